// Blocking with a deadline (the timed waits of wait_group, cond and
// semaphore): park.hpp's block_on, plus a timer that takes the waiter off
// its queue and wakes it when the deadline passes first.
//
// The race between a waker and the deadline is settled under the queue's
// lock: whoever unlinks the waiter owns the wake-up. The waker pops it (the
// wait succeeded); the timer's function removes it (timed out) -- if it is
// no longer queued, a waker has it and the function does nothing.
//
// Lifetimes: the timer is `sync` and lives in the blocked goroutine's frame;
// after the wake-up the goroutine deletes it, which waits for a running
// timer function (detail/timer_heap.hpp). So when the wait returns, no
// timer function still touches the frame or the sync object.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "extm.hpp"
#include "../os/os.hpp"
#include "m.hpp"
#include "park.hpp"
#include "spinlock.hpp"
#include "timer_heap.hpp"

namespace goro::detail {

// Unlinks w from its queue (owner) if it is still there; true if it was.
// Called with the queue's lock held.
using unlink_fn = bool (*)(void* owner, waiter* w) noexcept;

// Blocks the caller, queued as `w` with `lock` held, until wake(w) or the
// nanotime() `when`. Releases `lock`. True: woken; false: timed out (w
// taken off its queue).
// unlinked(ctx), if given, runs when a runtime destroyed while the caller
// waits takes w off its queue (see block_on). `why`: what the goroutine
// dump shows meanwhile (the untimed wait's reason: a timed wait is the
// same wait).
inline bool block_on_until(waiter& w, spinlock& lock, std::int64_t when, unlink_fn unlink, void* owner,
                           void (*unlinked)(void*) noexcept = nullptr, void* unlinked_ctx = nullptr,
                           wait_reason why = wait_reason::other) noexcept {
  if (!w.gp) {
    // A plain thread: sleep on the futex with a timeout.
    extm_outside_op();  // checkdead: a plain thread blocked on a goro object is a live external M
    lock.unlock();
    for (;;) {
      if (w.woken.load(std::memory_order_acquire) != 0) return true;
      const std::int64_t now = nanotime();
      if (now >= when) break;
      os::futex_wait(&w.woken, 0, when - now);
    }
    lock.lock();
    const bool removed = unlink(owner, &w);
    lock.unlock();
    if (removed) return false;
    // A waker popped us first: its wake is on its way.
    while (w.woken.load(std::memory_order_acquire) == 0) os::futex_wait(&w.woken, 0);
    return true;
  }

  struct timed {
    waiter* w = nullptr;
    spinlock* lock = nullptr;
    unlink_fn unlink = nullptr;
    void* owner = nullptr;
    void (*unlinked)(void*) noexcept = nullptr;
    void* unlinked_ctx = nullptr;
    bool timed_out = false;  // written under *lock before the wake, read after it
    timer t;
  } ctx;
  ctx.w = &w;
  ctx.lock = &lock;
  ctx.unlink = unlink;
  ctx.owner = owner;
  ctx.unlinked = unlinked;
  ctx.unlinked_ctx = unlinked_ctx;
  ctx.t.when = when;
  ctx.t.sync = true;
  ctx.t.arg = &ctx;
  ctx.t.f = [](void* arg, std::uintptr_t, std::int64_t) {
    auto* c = static_cast<timed*>(arg);
    c->lock->lock();
    const bool removed = c->unlink(c->owner, c->w);
    if (removed) c->timed_out = true;
    c->lock->unlock();
    if (removed) wake(c->w);
  };
  // Like sleep: the timer is queued only once we are off our stack (the
  // park's unlock step, on g0), then the queue's lock is released. A
  // runtime destroyed while we wait (its timers dropped) takes w off its
  // queue (g::unlink_wait, as block_on).
  block(
      current_m(), w.gp, w.woken,
      [](void* arg) {
        auto* c = static_cast<timed*>(arg);
        // On g0, where a bad_alloc from the heap's growth would unwind
        // the scheduler with the queue locked; the wait is noexcept.
        GORO_TRY { current_m()->sched->add_timer(&c->t); }
        GORO_CATCH_ALL { fatal("goro: out of memory (the timer of a timed wait)"); }
        c->lock->unlock();
        return true;
      },
      &ctx,
      [](void* arg) noexcept {
        auto* c = static_cast<timed*>(arg);
        c->lock->lock();
        const bool removed = c->unlink(c->owner, c->w);
        c->lock->unlock();
        if (removed && c->unlinked) c->unlinked(c->unlinked_ctx);
        return removed;
      },
      &ctx, why);
  timer_heap::del(&ctx.t);  // waits for a running function: nothing touches ctx after this
  return !ctx.timed_out;
}

// Sleeps the caller (a goroutine parks) until the nanotime() `when`: a
// timed block that nobody wakes. `why`: as block_on_until's.
inline void nap_until(std::int64_t when, wait_reason why = wait_reason::other) noexcept {
  waiter w;
  spinlock l;
  bool taken = false;  // under l: the timer or the runtime ending the goroutine (main_return.hpp) wakes it, once
  l.lock();
  (void)block_on_until(
      w, l, when,
      [](void* t, waiter*) noexcept {
        bool* x = static_cast<bool*>(t);
        return !std::exchange(*x, true);
      },
      &taken, nullptr, nullptr, why);
}

// A deadline as nanotime(): 0 and negative instants are "already past".
template <class Clock, class Duration>
std::int64_t deadline_ns(const std::chrono::time_point<Clock, Duration>& tp) noexcept {
  using namespace std::chrono;
  const auto clock_now = Clock::now();
  // Far from now in the units tp and now are compared in, checked in double
  // first: a coarse instant (time_point<steady_clock, seconds>::max(),
  // "forever") overflowed when converted to the clock's nanoseconds (UB),
  // and read as long past: the wait timed out at once.
  using common = typename std::common_type_t<Duration, typename Clock::duration>;
  const double at = duration<double, typename common::period>(tp.time_since_epoch()).count();
  constexpr double bound = static_cast<double>(std::numeric_limits<typename common::rep>::max()) / 4;
  if (!(at < bound && at > -bound)) return at > 0 ? INT64_MAX / 2 : nanotime();  // NaN: past
  // Compared before subtracting: tp - now overflows for time_point::min(),
  // which then read as a wait of centuries.
  if (tp <= clock_now) return nanotime();
  const auto d = tp - clock_now;                             // another clock: converted through "how long from now"
  const double ns = duration<double, std::nano>(d).count();  // not long double: see to_ns
  const std::int64_t now = nanotime();
  if (ns >= static_cast<double>(INT64_MAX / 2)) return INT64_MAX / 2;
  return when_after(now, static_cast<std::int64_t>(ns) + 1);
}

// A deadline as nanotime() for a wait of d from now: rounded up (never
// early) and saturated as time.hpp's to_ns -- now() + d in nanoseconds
// overflows for hours::max() ("forever") and nanoseconds::min() ("already
// past").
template <class Rep, class Period>
std::int64_t deadline_after(const std::chrono::duration<Rep, Period>& d) noexcept {
  using namespace std::chrono;
  const std::int64_t now = nanotime();
  if (d <= d.zero()) return now;
  if (duration<double, std::nano>(d).count() >= static_cast<double>(INT64_MAX / 2)) return INT64_MAX / 2;
  return when_after(now, ceil<nanoseconds>(d).count());
}

}  // namespace goro::detail
