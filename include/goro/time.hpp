// Time: sleeping, and (with channels) after / timer / ticker, on the
// runtime's per-P timer heaps (detail/timer_heap.hpp; scheduling in
// detail/sched.hpp: find_runnable runs due timers, an idle M sleeps no
// longer than the next timer). Durations and instants are
// std::chrono::steady_clock's.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>

#include "chan.hpp"
#include "detail/config.hpp"
#include "detail/extm.hpp"
#include "detail/note.hpp"
#include "detail/inside_blocking.hpp"
#include "detail/m.hpp"
#include "detail/spinlock.hpp"
#include "detail/timer_heap.hpp"
#include "detail/timer_sleeper.hpp"
#include "error.hpp"
#include "runtime.hpp"

namespace goro {

namespace detail {

// A std::chrono duration in nanoseconds, rounded up (never early) and
// saturated (hours::max() is "forever", not an overflow). The saturation
// test is in double, not long double: AArch64's and RISC-V's long double
// is quad precision done by libgcc_s calls, whose first call ran the
// dynamic linker's resolver on a 2 KiB goroutine stack (timers in
// tests/helpers/tiny_stack.cpp); a double is exact to ~1 us at the cap.
template <class Rep, class Period>
std::int64_t to_ns(const std::chrono::duration<Rep, Period>& d) noexcept {
  using namespace std::chrono;
  if (d <= d.zero()) return 0;
  if (duration<double, std::nano>(d).count() >= static_cast<double>(INT64_MAX / 2)) return INT64_MAX / 2;
  return ceil<nanoseconds>(d).count();
}

// Go's timeSleep: the goroutine parks, and only once it is off its stack
// (the park's unlock step, on g0) is its timer queued — so the timer cannot
// fire, and ready it, before it has stopped running (Go's resetForSleep).
GORO_DECL void sleep_until_ns(std::int64_t when);

// Timers created outside any runtime (a plain thread calling after(),
// constructing a timer...) live on one process-wide heap served by a
// thread of its own, started on first use. It sleeps until the heap's
// earliest timer with the same handshake as an idle M (sched.hpp,
// park_idle): the adder publishes the timer then reads the deadline the
// thread sleeps to; the thread publishes that deadline then re-reads the
// heap. Deadlock detection counts the thread as a live external M while it
// has timers (one may wake a goroutine), and the adder as one (extm.hpp).
class thread_timers {
 public:
  GORO_DECL static thread_timers& get();

  // The heap's last timer deleted: wake the thread, so that it stops
  // counting as an external M now (see timer_heap::on_emptied).
  thread_timers() noexcept {
    heap_.on_emptied([](void* self) { static_cast<thread_timers*>(self)->wake_.wake(); }, this);
  }

  GORO_DECL void add(timer* t);

 private:
  [[noreturn]] void loop() noexcept {
    extm_mark_internal();  // checkdead: counted only while timers are pending
    os::set_thread_name("goro-timers");  // process-wide: timers of plain threads
    bool counted = false;
    for (;;) {
      wake_.clear();
      heap_.run_due(nanotime());
      // Read under the heap's lock, after clear(): a del() that empties the
      // heap either did so before (we read 0) or wakes us after our lock
      // section, so after clear(), and the sleep below returns at once.
      // (run_due's unlocked earliest() could be stale here: clear() is a
      // plain store, which may pass a later load.)
      std::int64_t next = heap_.earliest_locked();
      const std::int64_t until = next == 0 ? INT64_MAX : next;
      sleeper_.publish(until);  // the sleeper's half (timer_sleeper.hpp)
      if (timer_sleeper::look_again(heap_.earliest(), until)) continue;
      if ((next != 0) != counted) extm_hold(counted = next != 0);  // checkdead
      if (next == 0)
        wake_.sleep();
      else if (std::int64_t ns = next - nanotime(); ns > 0)
        wake_.sleep_for(ns);
      sleeper_.clear();
    }
  }

  timer_heap heap_;
  note wake_;
  timer_sleeper sleeper_;
};

// Queues t on the calling goroutine's (or M's) runtime, else on the
// process-wide thread.
GORO_DECL void add_timer_anywhere(timer* t);

// Re-arms t under `op`, the lock that serializes every stop / reset of t
// (Go's timer.modify, done as deltimer + addtimer): takes t off its heap
// -- which waits for a running sync function, so set() never races it --
// then set(pending) fills t's new fields, or acts instead, and says whether
// to queue t again. Returns whether t was pending. For goro::timer / ticker
// (chan_timer) and the net deadlines (net_socket.hpp set_deadline). `op`
// must not be taken by t's function (del would wait for it forever).
// `home`: an after_func timer's runtime, where t is queued whoever re-arms
// it (else add_timer_anywhere's choice); if that runtime has ended, set is
// not called, t stays off every heap and *gone is set.
template <class Set>
bool rearm_timer(spinlock& op, timer& t, Set set, after_func_home* home = nullptr, bool* gone = nullptr) {
  std::lock_guard<spinlock> lk(op);
  const bool pending = timer_heap::del(&t);
  if (!home) {
    if (set(pending)) add_timer_anywhere(&t);
    return pending;
  }
  std::lock_guard<spinlock> hl(home->lock);  // the runtime cannot end while we queue t
  if (!home->rt) {
    *gone = true;
    return pending;  // false: its heaps were cleared
  }
  if (set(pending)) home->rt->add_timer(&t);
  return pending;
}

using time_chan = chan<std::chrono::steady_clock::time_point>;

[[noreturn]] GORO_NOINLINE inline void raise_usage_moved_from(const char* call, const char* what) {
  raise_usage((std::string(call) + " on a moved-from " + what).c_str());
}

// The runtime side of a goro::timer / ticker: a sync timer (stop and reset
// wait for a send in progress; detail/timer_heap.hpp) that sends the time
// on a channel of capacity 1 without blocking (Go's sendTime).
// after_func's callable, type-erased without std::function's copy
// requirement (a move-only F is fine). Shared by the goroutines of every
// firing, as Go's one func value is.
struct after_func_callable {
  virtual ~after_func_callable() = default;
  virtual void operator()() = 0;
};
template <class F>
struct after_func_callable_of final : after_func_callable {
  F f;
  explicit after_func_callable_of(F&& fn) : f(std::move(fn)) {}
  void operator()() override { f(); }
};

struct chan_timer {
  timer t;
  time_chan c{1};
  spinlock op;  // serializes stop / reset on one timer

  // after_func: fn runs in a new goroutine of `owner` at each firing, and
  // c is never sent to. self_owned: the goro::timer was dropped while this
  // was pending; the firing (or the runtime's end, through t.drop) frees it.
  // home: owner as seen by stop / reset / detach, which may come after it
  // ended (owner is read only by a firing, on owner's heap: owner lives).
  std::shared_ptr<after_func_callable> fn;
  sched_base* owner = nullptr;
  std::shared_ptr<after_func_home> home;
  bool self_owned = false;

  GORO_DECL chan_timer(std::int64_t when, std::int64_t period);
  GORO_DECL ~chan_timer();

  GORO_DECL bool stop() noexcept;

  // An after_func timer's handle is going away: dropping it must not cancel
  // f (Go's AfterFunc). If still pending, the timer becomes its own owner
  // (not sync any more: its function frees it) and true is returned.
  GORO_DECL bool detach() noexcept;
  // An after_func timer whose runtime has ended cannot be re-armed (f has
  // no runtime to run in): a usage_error.
  GORO_DECL bool reset(std::int64_t when, std::int64_t period);
};

// The home of rt's after_func timers, made on first use.
GORO_DECL std::shared_ptr<after_func_home> after_func_home_of(sched_base* rt);

}  // namespace detail

// Pauses the calling goroutine for at least d (it parks; its M runs other
// goroutines). From a plain thread, sleeps the thread. d <= 0 returns at
// once.
template <class Rep, class Period>
void sleep_for(const std::chrono::duration<Rep, Period>& d) {
  std::int64_t ns = detail::to_ns(d);
  if (ns == 0) {
    // Still a goro call, so a safe point: a loop of zero sleeps is otherwise
    // never preempted (cooperative preemption), and what it waits for may
    // be asleep on this P's timer heap.
    detail::call_point();
    return;
  }
  detail::sleep_until_ns(detail::when_after(detail::nanotime(), ns));
}

// Pauses the calling goroutine until t (steady_clock). A t in the past
// returns at once.
template <class Duration>
void sleep_until(const std::chrono::time_point<std::chrono::steady_clock, Duration>& t) {
  using namespace std::chrono;
  auto since = t.time_since_epoch();
  if (since <= since.zero()) {
    detail::call_point();  // a safe point (see sleep_for)
    return;
  }
  detail::sleep_until_ns(detail::to_ns(since));
}

// A channel that receives the time once, d from now (Go's time.After).
// The timer cannot be stopped; use goro::timer for that. Receive-only: its
// timer is its only sender, and closing it does not compile.
template <class Rep, class Period>
recv_chan<std::chrono::steady_clock::time_point> after(const std::chrono::duration<Rep, Period>& d) {
  struct once {
    detail::timer t;
    detail::time_chan c{1};
  };
  // Owned here until queued: a heap that cannot grow (the runtime's
  // allocator refused) throws from add_timer_anywhere, and o goes with it.
  auto owned = std::make_unique<once>();
  once* o = owned.get();
  o->t.when = detail::when_after(detail::nanotime(), detail::to_ns(d));
  o->t.arg = o;
  o->t.f = [](void* arg, std::uintptr_t, std::int64_t) {
    auto* self = static_cast<once*>(arg);
    auto now = std::chrono::steady_clock::now();
    self->c.impl()->offer(now);  // capacity 1, nobody else sends: never full; never raises
    delete self;                 // not sync: the heap forgets t before calling us
  };
  // Dropped unfired (the runtime ended first): free it.
  o->t.drop = [](void* arg, std::uintptr_t, std::int64_t) { delete static_cast<once*>(arg); };
  recv_chan<std::chrono::steady_clock::time_point> c = o->c;  // o may be gone once queued
  detail::add_timer_anywhere(&o->t);
  (void)owned.release();  // the heap's now: its f or drop frees it
  return c;
}

// Go's time.Timer: sends the time on c() once, d from now, unless stopped.
class timer {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  template <class Rep, class Period>
  explicit timer(const std::chrono::duration<Rep, Period>& d)
      : s_(std::make_unique<detail::chan_timer>(detail::when_after(detail::nanotime(), detail::to_ns(d)), 0)) {
    detail::add_timer_anywhere(&s_->t);
  }
  // A moved-from timer owns nothing: its stop / reset / c() are usage_errors.
  timer(timer&&) noexcept = default;
  timer& operator=(timer&& o) noexcept {
    if (this != &o) {
      release();
      s_ = std::move(o.s_);
    }
    return *this;
  }
  // Stops it (waits for a send in progress); an after_func timer is left to
  // fire (Go's AfterFunc).
  ~timer() { release(); }

  // True if this call stopped the timer before it fired. It does not drain
  // c(): after false, a value may be waiting there.
  bool stop() { return get("timer::stop")->stop(); }

  // Re-arms the timer to fire d from now. True if it was still pending.
  // Like Go's before 1.23, a value sent before the reset stays in c().
  // An after_func timer whose runtime was destroyed cannot be re-armed: a
  // usage_error (its stop() just returns false).
  template <class Rep, class Period>
  bool reset(const std::chrono::duration<Rep, Period>& d) {
    return get("timer::reset")->reset(detail::when_after(detail::nanotime(), detail::to_ns(d)), 0);
  }

  // The channel the time is sent on (a receive-only handle: copies refer to it).
  recv_chan<time_point> c() const { return get("timer::c")->c; }

 private:
  explicit timer(std::unique_ptr<detail::chan_timer> s) noexcept : s_(std::move(s)) {}
  void release() noexcept {
    if (s_ && s_->fn && s_->detach()) (void)s_.release();  // it frees itself when it fires
    s_.reset();
  }

  template <class Rep, class Period, class F>
  friend timer after_func(const std::chrono::duration<Rep, Period>& d, F f);

  detail::chan_timer* get(const char* call) const {
    if (GORO_UNLIKELY(!s_)) detail::raise_usage_moved_from(call, "timer");
    return s_.get();
  }
  std::unique_ptr<detail::chan_timer> s_;
};

namespace detail {
// An after_func timer fired: start f's goroutine on the runtime it was
// made in. A self-owned timer is not sync, so it may free itself here.
GORO_DECL void fire_after_func(void* arg, std::uintptr_t, std::int64_t) noexcept;
}  // namespace detail

// Go's time.AfterFunc: runs f in its own goroutine (of the calling
// goroutine's runtime) once d has passed. stop() cancels it if it has not
// fired; reset(d) re-arms it (f runs again). Dropping the returned timer
// does not cancel f. Its c() is never sent to. Call from a goroutine.
// Once that runtime is destroyed the timer can never fire: stop() returns
// false and reset() is a usage_error.
template <class Rep, class Period, class F>
timer after_func(const std::chrono::duration<Rep, Period>& d, F f) {
  static_assert(std::is_invocable_v<F&>, "goro::after_func: the callable must take no arguments");
  detail::m_base* m = detail::require_goroutine("after_func()");
  auto s = std::make_unique<detail::chan_timer>(detail::when_after(detail::nanotime(), detail::to_ns(d)), 0);
  s->fn = std::make_shared<detail::after_func_callable_of<F>>(std::move(f));
  s->owner = m->sched->runtime();  // a thread_lane's goroutine: its runtime, not the lane
  s->home = detail::after_func_home_of(s->owner);
  s->t.f = &detail::fire_after_func;
  detail::add_timer_anywhere(&s->t);
  return timer(std::move(s));
}

// Go's time.Ticker: sends the time on c() every d. A reader that falls
// behind misses ticks (the channel holds one).
class ticker {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  template <class Rep, class Period>
  explicit ticker(const std::chrono::duration<Rep, Period>& d) : s_(make(interval(d))) {
    detail::add_timer_anywhere(&s_->t);
  }
  // A moved-from ticker owns nothing: its stop / reset / c() are usage_errors.
  ticker(ticker&&) noexcept = default;
  ticker& operator=(ticker&&) noexcept = default;
  ~ticker() = default;  // stops it

  // No more ticks after this returns (one sent before may be in c()).
  void stop() { get("ticker::stop")->stop(); }

  // Stops the ticker and restarts it with period d, the next tick d from now.
  template <class Rep, class Period>
  void reset(const std::chrono::duration<Rep, Period>& d) {
    detail::chan_timer* s = get("ticker::reset");
    std::int64_t p = interval(d, "non-positive interval for ticker::reset");
    s->reset(detail::when_after(detail::nanotime(), p), p);
  }

  // The channel the time is sent on (a handle: copies refer to it).
  detail::time_chan c() const { return get("ticker::c")->c; }

 private:
  template <class Rep, class Period>
  static std::int64_t interval(const std::chrono::duration<Rep, Period>& d,
                               const char* what = "non-positive interval for ticker") {
    std::int64_t p = detail::to_ns(d);
    if (p <= 0) detail::raise_usage(what);
    return p;
  }
  static std::unique_ptr<detail::chan_timer> make(std::int64_t p) {
    return std::make_unique<detail::chan_timer>(detail::when_after(detail::nanotime(), p), p);
  }
  detail::chan_timer* get(const char* call) const {
    if (GORO_UNLIKELY(!s_)) detail::raise_usage_moved_from(call, "ticker");
    return s_.get();
  }

  std::unique_ptr<detail::chan_timer> s_;
};

}  // namespace goro

#if GORO_COMPILE_RUNTIME
namespace goro::detail {

GORO_DECL chan_timer::chan_timer(std::int64_t when, std::int64_t period) {
  t.when = when;
  t.period = period;
  t.sync = true;
  t.arg = this;
  t.f = [](void* arg, std::uintptr_t, std::int64_t) {
    auto now = std::chrono::steady_clock::now();
    // Full: the reader is behind, drop it. Closed (through impl()): nobody
    // to deliver to. Never raises: this runs on g0, in a noexcept path.
    static_cast<chan_timer*>(arg)->c.impl()->offer(now);
  };
}
GORO_DECL chan_timer::~chan_timer() { timer_heap::del(&t); }

GORO_DECL bool chan_timer::stop() noexcept {
  std::lock_guard<spinlock> lk(op);
  return timer_heap::del(&t);
}

GORO_DECL bool chan_timer::detach() noexcept {
  bool requeued = false;
  bool gone = false;  // its runtime ended: it was dropped with it, nothing left to run
  GORO_TRY {
    requeued = rearm_timer(
        op, t,
        [this](bool pending) {
          if (!pending) return false;  // fired (or stopped): nothing left to run
          self_owned = true;
          t.sync = false;
          t.drop = [](void* arg, std::uintptr_t, std::int64_t) { delete static_cast<chan_timer*>(arg); };
          return true;
        },
        home.get(), &gone);  // see reset
  }
  GORO_CATCH_ALL { return false; }  // could not re-queue: it is cancelled after all, and freed by the caller
  // Gone: not re-queued even if it was still pending (its runtime ended
  // between closing its home and dropping its timers): the caller frees it.
  return requeued && !gone;
}
GORO_DECL bool chan_timer::reset(std::int64_t when, std::int64_t period) {
  // An after_func timer stays on its runtime (home), whoever re-arms it:
  // queued where the caller is -- the process-wide timer thread for a
  // plain thread -- it outlived that runtime and spawned f on it once
  // destroyed; on the runtime's heaps it goes when the runtime ends. Once
  // that runtime has ended it has nowhere to go (before, its freed
  // scheduler was used: a crash).
  bool gone = false;
  const bool pending = rearm_timer(
      op, t,
      [&](bool) {
        t.when = when;
        t.period = period;
        return true;
      },
      home.get(), &gone);
  if (gone) raise_usage("timer::reset: the runtime of this after_func timer was destroyed (f can never run)");
  return pending;
}

GORO_DECL std::shared_ptr<after_func_home> after_func_home_of(sched_base* rt) {
  std::lock_guard<spinlock> lk(rt->af_home_lock);
  if (!rt->af_home) {
    rt->af_home = std::make_shared<after_func_home>();
    rt->af_home->rt = rt;
  }
  return rt->af_home;
}

GORO_DECL void sleep_until_ns(std::int64_t when) {
  m_base* m = current_m();
  if (!m || !m->curg) {
    // A plain thread just sleeps, until the clock says so: with MinGW-w64,
    // std::this_thread::sleep_until sleeps once and may wake early (9.3 ms
    // of a 10 ms sleep was seen under Wine).
    const std::chrono::steady_clock::time_point until{std::chrono::nanoseconds(when)};
    // One that sleeps counts as a live external M from now on (checkdead),
    // as if it had made a timer: it often sleeps, then feeds a goroutine.
    if (std::chrono::steady_clock::now() < until) extm_outside_op(m);
    while (std::chrono::steady_clock::now() < until) std::this_thread::sleep_until(until);
    return;
  }
  if (GORO_UNLIKELY(m->in_blocking)) {
    if (when <= nanotime()) return;  // a deadline already past sleeps no more than sleep_for(0) does
    raise_inside_blocking("sleep");
  }
  call_point();  // main_return (goexit.hpp)
  m = current_m();  // call_point may have switched (TLS rule, DESIGN.md section 7)
  if (when <= nanotime()) return;
  struct sleep_timer {
    timer t;
    bool refused = false;  // the heap could not grow (the runtime's allocator refused)
  } st;
  timer& t = st.t;
  t.when = when;
  t.arg = m->curg;
  t.f = [](void* arg, std::uintptr_t, std::int64_t) {
    g* gp = static_cast<g*>(arg);
    gp->sched->ready(gp);  // last touch: gp's frame (and t) may be gone once it runs
  };
  // main_return (main_return.hpp): whoever takes the timer off its heap
  // first -- the runtime ending this goroutine, or its firing -- wakes it.
  g* gp = m->curg;
  gp->unlink_wait = [](void* arg) noexcept { return timer_heap::del(static_cast<timer*>(arg)); };
  gp->unlink_arg = &t;
  park(
      m,
      [](void* arg) {
        // On g0: a bad_alloc from the heap's growth must not unwind the
        // scheduler; the goroutine resumes at once and throws it itself.
        auto* s = static_cast<sleep_timer*>(arg);
        GORO_TRY { current_m()->sched->add_timer(&s->t); }
        GORO_CATCH_ALL {
          s->refused = true;
          return false;
        }
        return true;
      },
      &st, wait_reason::sleep);
  gp->unlink_wait = nullptr;
  exit_if_killed(gp);
  if (st.refused) raise_bad_alloc();
}

GORO_DECL thread_timers& thread_timers::get() {
  // Never destroyed: its thread may still sleep at exit.
  static thread_timers* self = [] {
    auto* t = new thread_timers;
    std::thread(&thread_timers::loop, t).detach();
    return t;
  }();
  return *self;
}

GORO_DECL void thread_timers::add(timer* t) {
  extm_outside_op();  // checkdead
  const std::int64_t when = t->when;
  heap_.add(t);
  if (sleeper_.must_wake(when)) wake_.wake();  // the adder's half (timer_sleeper.hpp)
}

GORO_DECL void add_timer_anywhere(timer* t) {
  if (m_base* m = current_m(); m && m->sched)
    m->sched->add_timer(t);
  else
    thread_timers::get().add(t);
}

GORO_DECL void fire_after_func(void* arg, std::uintptr_t, std::int64_t) noexcept {
  auto* self = static_cast<chan_timer*>(arg);
  std::shared_ptr<after_func_callable> fn = self->fn;
  sched_base* owner = self->owner;
  if (self->self_owned) delete self;
  // created by: this function (Go's dump says time.goFunc for AfterFunc's)
  // Nobody to throw to (Go's newproc throws too), but say why: the
  // runtime's allocator refused the G record or the closure.
#if GORO_EXCEPTIONS
  char msg[256];
  try {
    spawn(owner, reinterpret_cast<const void*>(&fire_after_func), 0, [fn] { (*fn)(); });
  } catch (const std::bad_alloc& e) {
    std::snprintf(msg, sizeof msg, "goro: out of memory (after_func: its goroutine: %s)", e.what());
    fatal(msg);
  } catch (const std::exception& e) {
    std::snprintf(msg, sizeof msg, "goro: after_func: could not start the goroutine: %s", e.what());
    fatal(msg);
  } catch (...) {
    fatal("goro: after_func: could not start the goroutine");
  }
#else
  spawn(owner, reinterpret_cast<const void*>(&fire_after_func), 0, [fn] { (*fn)(); });
#endif
}

}  // namespace goro::detail
#endif  // GORO_COMPILE_RUNTIME
