// Time: sleeping, and (with channels) after / timer / ticker, on the
// runtime's per-P timer heaps (detail/timer_heap.hpp; scheduling in
// detail/sched.hpp: find_runnable runs due timers, an idle M sleeps no
// longer than the next timer). Durations and instants are
// std::chrono::steady_clock's.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

#include "detail/m.hpp"
#include "detail/timer_heap.hpp"

namespace goro {

namespace detail {

// A std::chrono duration in nanoseconds, rounded up (never early) and
// saturated (hours::max() is "forever", not an overflow).
template <class Rep, class Period>
std::int64_t to_ns(const std::chrono::duration<Rep, Period>& d) noexcept {
  using namespace std::chrono;
  if (d <= d.zero()) return 0;
  if (duration<long double, std::nano>(d).count() >= static_cast<long double>(INT64_MAX / 2)) return INT64_MAX / 2;
  return ceil<nanoseconds>(d).count();
}

// Go's timeSleep: the goroutine parks, and only once it is off its stack
// (the park's unlock step, on g0) is its timer queued — so the timer cannot
// fire, and ready it, before it has stopped running (Go's resetForSleep).
inline void sleep_until_ns(std::int64_t when) {
  m_base* m = current_m();
  if (!m || !m->curg) {
    // A plain thread just sleeps.
    std::this_thread::sleep_until(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(when)));
    return;
  }
  if (when <= nanotime()) return;
  timer t;
  t.when = when;
  t.arg = m->curg;
  t.f = [](void* arg, std::uintptr_t, std::int64_t) {
    g* gp = static_cast<g*>(arg);
    gp->sched->ready(gp);  // last touch: gp's frame (and t) may be gone once it runs
  };
  park(
      m,
      [](void* arg) {
        current_m()->sched->add_timer(static_cast<timer*>(arg));
        return true;
      },
      &t);
}

}  // namespace detail

// Pauses the calling goroutine for at least d (it parks; its M runs other
// goroutines). From a plain thread, sleeps the thread. d <= 0 returns at
// once.
template <class Rep, class Period>
void sleep_for(const std::chrono::duration<Rep, Period>& d) {
  std::int64_t ns = detail::to_ns(d);
  if (ns == 0) return;
  detail::sleep_until_ns(detail::when_after(detail::nanotime(), ns));
}

// Pauses the calling goroutine until t (steady_clock). A t in the past
// returns at once.
template <class Duration>
void sleep_until(const std::chrono::time_point<std::chrono::steady_clock, Duration>& t) {
  using namespace std::chrono;
  auto since = t.time_since_epoch();
  if (since <= since.zero()) return;
  detail::sleep_until_ns(detail::to_ns(since));
}

}  // namespace goro
