// Synchronisation primitives that work from goroutines (which park) and
// from plain threads (which block): mutex, once, cond, wait_group,
// semaphore. Go's sync package; every one of them blocks through
// detail::sema / detail::notify_list, which block through park.hpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>

#include "detail/cpus.hpp"
#include "detail/goexit.hpp"
#include "detail/inside_blocking.hpp"
#include "detail/m.hpp"
#include "detail/sema.hpp"
#include "detail/test_seam.hpp"
#include "detail/timed_park.hpp"
#include "error.hpp"
#include "os/os.hpp"

namespace goro {

// Go's sync.Mutex (src/sync/mutex.go): Lockable, so std::lock_guard,
// std::unique_lock and std::scoped_lock work with it.
//
// State word: bit 0 locked, bit 1 woken (an unlocker already woke a waiter,
// or a spinner is about to take the lock: don't wake another), bit 2
// starving, and above them the number of waiters blocked (or about to
// block) in sema_. Uncontended lock and unlock are one atomic RMW each.
//
// Normal mode: waiters queue FIFO, but a woken waiter does not own the lock;
// it competes with newly arriving goroutines, which usually win (they are
// already running). A waiter that loses queues again at the head.
// Starvation mode: a waiter that waited longer than 1 ms sets the starving
// bit; from then on unlock() hands ownership straight to the waiter at the
// head of the queue, and newcomers neither take the lock nor spin: they
// queue at the tail. The owner leaves starvation mode when it was the last
// waiter or it waited less than 1 ms.
//
// Differences from Go: a spinner checks only that there are several CPUs
// and several Ps (Go also requires another P running and an empty local
// run queue); a plain thread spins when there are several CPUs. Unlocking
// an unlocked mutex raises goro::usage_error and leaves the state intact
// (Go's is a fatal error). The starvation hand-off does not yield the
// unlocker's P (Go's semrelease(handoff) does): the new owner is in the
// unlocker's runnext slot, or the global queue when a thread unlocked.
//
// Memory order: the lock-taking CASes are acquire and unlock's RMW is
// release. A waiter handed the mutex in starvation mode synchronises with
// the unlocker through the sema (its spinlock and the park/ready hand-off)
// and through its acquire load/add of state_, which reads the unlocker's
// release RMW or a later one in its release sequence.
//
// Lifetime: the mutex may be destroyed by whoever holds it last, as soon
// as its own unlock() returned, even while an earlier unlock() is still
// running. As in Go, an unlock() that has waiters to wake still works on
// the mutex after clearing the locked bit (unlockSlow), and in that window
// another party may lock it, unlock it and destroy it. So the slow unlock
// counts itself in unlockers_ before it clears the bit, and the destructor
// waits for the count to drop: the destroying party locked the mutex after
// that clear (its acquire reads the clearing RMW or a later one in its
// release sequence), so it sees the count.
class mutex {
 public:
  mutex() = default;
  mutex(const mutex&) = delete;
  mutex& operator=(const mutex&) = delete;
  ~mutex() {
    while (unlockers_.load(std::memory_order_acquire) != 0) detail::os::yield_thread();  // an unlock() finishing its wake-up
  }

  // Inside goro::blocking, a lock that would wait is a usage_error.
  void lock() {
    // Fast path: grab an unlocked mutex (acquire pairs with unlock's release).
    std::uint32_t expected = 0;
    if (GORO_LIKELY(
            state_.compare_exchange_weak(expected, locked, std::memory_order_acquire, std::memory_order_relaxed)))
      return;
    lock_slow();
  }

  // Go's TryLock: never blocks or spins; fails when the mutex is locked or
  // starving (in starvation mode it belongs to the waiters).
  bool try_lock() noexcept {
    std::uint32_t old = state_.load(std::memory_order_relaxed);
    if (old & (locked | starving)) return false;
    return state_.compare_exchange_strong(old, old | locked, std::memory_order_acquire, std::memory_order_relaxed);
  }

  // Timed locks (beyond Go, for engines): false if the lock was not taken
  // by then. They poll try_lock with a growing sleep (50 us up to 1 ms)
  // rather than queue: a timed waiter never holds a place among the
  // blocked lockers, so it cannot disturb the hand-off protocol (and it
  // has no fairness claim: a blocked lock() may win first).
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return try_lock_until_ns(detail::deadline_after(d), "mutex try_lock_for");  // saturated: hours::max() waits
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& tp) {
    return try_lock_until_ns(detail::deadline_ns(tp), "mutex try_lock_until");
  }

  void unlock() {
    // Fast path: locked with nobody waiting; the CAS is the last access.
    // Release: the critical section happens-before the next owner's acquire.
    std::uint32_t old = locked;
    if (GORO_LIKELY(state_.compare_exchange_strong(old, 0, std::memory_order_release, std::memory_order_relaxed)))
      return;
    if (GORO_UNLIKELY(!(old & locked))) detail::raise_usage("unlock of unlocked mutex");  // nothing changed
    // Waiters: counted in unlockers_ (see the class comment) before the
    // locked bit is cleared, uncounted as the very last access.
    unlockers_.fetch_add(1, std::memory_order_relaxed);  // ordered before the release RMW below
    old = state_.fetch_and(~locked, std::memory_order_release);
    if (GORO_UNLIKELY(!(old & locked))) {  // unlocked by someone else meanwhile: misuse
      unlockers_.fetch_sub(1, std::memory_order_release);
      detail::raise_usage("unlock of unlocked mutex");
    }
    const std::uint32_t now = old & ~locked;
#ifdef GORO_TEST_HOOK_MUTEX_UNLOCKED
    GORO_TEST_HOOK_MUTEX_UNLOCKED();  // tests: widen the window after the release
#endif
    if (now != 0) unlock_slow(now);
    unlockers_.fetch_sub(1, std::memory_order_release);  // last access to *this
  }

 private:
  // Until the nanotime() `when`. `call`: the caller's name, for errors.
  bool try_lock_until_ns(std::int64_t when, const char* call) {
    // A safe point even when it will not wait (as chan's try_recv): a loop
    // polling try_lock_for(0) is otherwise never preempted, and the holder
    // may be waiting on this P (cooperative preemption).
    detail::call_point();
    std::int64_t backoff = 50'000;
    for (;;) {
      if (try_lock()) return true;
      const std::int64_t now = detail::nanotime();
      if (now >= when) return false;
      detail::check_may_park(call);
      detail::nap_until(std::min(when, now + backoff), detail::wait_reason::mutex_lock);
      detail::exit_if_killed(detail::current_g());  // main_return (detail/goexit.hpp)
      if (backoff < 1'000'000) backoff *= 2;
    }
  }

  static constexpr std::uint32_t locked = 1;
  static constexpr std::uint32_t woken = 2;
  static constexpr std::uint32_t starving = 4;
  static constexpr unsigned waiter_shift = 3;
  static constexpr std::uint32_t one_waiter = 1u << waiter_shift;
  // A waiter blocked longer than this switches the mutex to starvation mode.
  static constexpr std::chrono::nanoseconds starvation_threshold{1'000'000};
  // Spin at most this many rounds of spin_pauses pause instructions before
  // blocking (Go's active_spin and active_spin_cnt).
  static constexpr int active_spin = 4;
  static constexpr int spin_pauses = 30;

  // sync_runtime_canSpin: spinning only pays when the owner can be running
  // on another CPU at the same time.
  static bool can_spin(int iter) noexcept {
    if (iter >= active_spin) return false;
    if (!detail::multicore()) return false;
    detail::m_base* m = detail::current_m();
    return !m || !m->curg || m->sched->procs() > 1;
  }

  static void do_spin() noexcept {
    for (int i = 0; i < spin_pauses; ++i) detail::cpu_relax();
  }

  // Go's lockSlow.
  GORO_NOINLINE void lock_slow() {
    using clock = std::chrono::steady_clock;
    clock::time_point wait_start{};
    bool waited = false;       // queued at least once: requeue at the head
    bool is_starving = false;  // this waiter waited past the threshold
    bool awoke = false;        // this caller owns the woken bit
    int iter = 0;
    detail::call_point();  // main_return: a contended lock is a goro call that can end the goroutine
    std::uint32_t old = state_.load(std::memory_order_relaxed);
    for (;;) {
      // Held: we would spin, then wait. Not inside goro::blocking (nothing
      // of ours is in state_ yet: awoke is still false here).
      if ((old & (locked | starving)) && GORO_UNLIKELY(detail::inside_blocking(detail::current_m())))
        detail::raise_inside_blocking("mutex lock");
      // Spin while the owner runs, unless starving (the lock then goes to
      // the head waiter, spinning cannot get it). Setting woken tells
      // unlock() not to wake a waiter we would race with.
      if ((old & (locked | starving)) == locked && can_spin(iter)) {
        if (!awoke && !(old & woken) && (old >> waiter_shift) != 0 &&
            state_.compare_exchange_weak(old, old | woken, std::memory_order_relaxed, std::memory_order_relaxed))
          awoke = true;
        do_spin();
        ++iter;
        old = state_.load(std::memory_order_relaxed);
        continue;
      }
      std::uint32_t next = old;
      if (!(old & starving)) next |= locked;  // a starving mutex is the waiters': don't take it
      if (old & (locked | starving)) next += one_waiter;
      // Switch to starvation mode, but only while locked: unlock() expects a
      // starving mutex to have waiters.
      if (is_starving && (old & locked)) next |= starving;
      if (awoke) {
        // We were woken (or spun with woken set), so the bit is still ours.
        if (!(next & woken)) detail::fatal("goro: inconsistent mutex state");
        next &= ~woken;
      }
      if (!state_.compare_exchange_weak(old, next, std::memory_order_acquire, std::memory_order_relaxed)) continue;
      if (!(old & (locked | starving))) return;  // we took the lock
      const bool lifo = waited;
      if (!waited) {
        wait_start = clock::now();
        waited = true;
      }
      sema_.acquire(lifo, &uncount_waiter, this, detail::wait_reason::mutex_lock);
      detail::exit_if_killed(detail::current_g());  // main_return: taken off the queue (uncounted), not woken
      is_starving = is_starving || clock::now() - wait_start > starvation_threshold;
      old = state_.load(std::memory_order_acquire);
      if (old & starving) {
        // Handed off: we own the mutex, but the state still shows it
        // unlocked and counts us as a waiter. Fix both in one add.
        if ((old & (locked | woken)) || (old >> waiter_shift) == 0) detail::fatal("goro: inconsistent mutex state");
        std::uint32_t delta = locked - one_waiter;  // modulo 2^32
        // Leave starvation mode if we did not wait long, or we were the
        // last waiter: two goroutines could otherwise stay in lock-step
        // hand-off mode forever.
        if (!is_starving || (old >> waiter_shift) == 1) delta -= starving;
        state_.fetch_add(delta, std::memory_order_acquire);
        return;
      }
      awoke = true;
      iter = 0;
    }
  }

  // Go's unlockSlow; `now` is the state just after our unlock.
  // A waiter taken off the semaphore's queue without being woken (the
  // runtime ending its goroutine, detail/main_return.hpp, or destroyed while
  // it waited): it no longer counts. If an unlock already counted it out
  // (its token then stays in the semaphore for the next waiter), nothing.
  static void uncount_waiter(void* self) noexcept {
    auto& st = static_cast<mutex*>(self)->state_;
    std::uint32_t v = st.load(std::memory_order_relaxed);
    while ((v >> waiter_shift) != 0 && !st.compare_exchange_weak(v, v - one_waiter, std::memory_order_relaxed)) {
    }
  }

  GORO_NOINLINE void unlock_slow(std::uint32_t now) noexcept {
    if (!(now & starving)) {
      std::uint32_t old = now;
      for (;;) {
        // No waiters, or someone already woken / spinning / holding the
        // lock: nobody to wake. If starving appeared, the mutex was locked
        // again after our unlock and that owner's unlock does the hand-off.
        if ((old >> waiter_shift) == 0 || (old & (locked | woken | starving))) return;
        // Take the right to wake one waiter.
        if (state_.compare_exchange_weak(old, (old - one_waiter) | woken, std::memory_order_relaxed,
                                         std::memory_order_relaxed)) {
          sema_.release();
          return;
        }
      }
    }
    // Starvation mode: hand ownership to the head waiter. locked stays clear
    // until it wakes and fixes the state, but starving keeps newcomers out.
    sema_.release();
  }

  std::atomic<std::uint32_t> state_{0};
  std::atomic<std::uint32_t> unlockers_{0};  // slow unlock() calls in progress
  detail::sema sema_;
};

// Go's sync.Once: call(f) runs f once; concurrent callers wait until it has
// finished, and every caller returns after f's effects are visible.
// If f throws, the exception propagates to that caller and the once is not
// done: a later (or a waiting) call runs f again (Go's Once would count the
// panicking call as done). f must not call call() on the same once
// (deadlock, as in Go).
class once {
 public:
  once() = default;
  once(const once&) = delete;
  once& operator=(const once&) = delete;

  template <class F>
  void call(F&& f) {
    // Fast path: the acquire load pairs with the release store after f, so
    // f's writes are visible to a caller that sees done_.
    if (GORO_LIKELY(done_.load(std::memory_order_acquire) != 0)) return;
    call_slow(std::forward<F>(f));
  }

  // Whether f has completed (without throwing).
  bool done() const noexcept { return done_.load(std::memory_order_acquire) != 0; }

 private:
  template <class F>
  GORO_NOINLINE void call_slow(F&& f) {
    std::lock_guard<mutex> lk(m_);
    if (done_.load(std::memory_order_relaxed) != 0) return;  // m_ orders it
    std::invoke(std::forward<F>(f));
    done_.store(1, std::memory_order_release);
  }

  std::atomic<std::uint32_t> done_{0};
  mutex m_;
};

// Go's sync.Cond, bound to goro::mutex through std::unique_lock. A notify
// wakes only goroutines/threads that were already waiting when it was
// called (a ticket taken before the lock was released); there are no
// spurious wake-ups, but as with any condition variable the condition must
// be re-checked in a loop: another party may change it between the notify
// and the woken waiter's re-lock. notify_one/notify_all may be called with
// or without the lock held.
class cond {
 public:
  cond() = default;
  cond(const cond&) = delete;
  cond& operator=(const cond&) = delete;

  // Atomically (with respect to notifies) releases lk and blocks; re-locks
  // before returning.
  void wait(std::unique_lock<mutex>& lk) {
    if (!lk.owns_lock()) detail::raise_usage("cond wait without the lock held");
    detail::check_may_park("cond wait");
    const std::uint32_t t = list_.add();
    lk.unlock();
    list_.wait(t);
    const bool end = detail::take_kill(detail::current_g());  // main_return: woken to end it
    lk.lock();
    if (GORO_UNLIKELY(end)) detail::end_goroutine(detail::current_g());  // with the lock held, as any wait returns
  }

  // while (!pred()) wait(lk);
  template <class Pred>
  void wait(std::unique_lock<mutex>& lk, Pred pred) {
    while (!pred()) wait(lk);
  }

  // Timed waits (beyond Go, for engines): as wait(), giving up at the
  // deadline. False on timeout; lk is locked again either way.
  template <class Rep, class Period>
  bool wait_for(std::unique_lock<mutex>& lk, const std::chrono::duration<Rep, Period>& d) {
    return wait_until_ns(lk, detail::deadline_after(d), "cond wait_for");  // saturated: hours::max() waits
  }
  template <class Clock, class Duration>
  bool wait_until(std::unique_lock<mutex>& lk, const std::chrono::time_point<Clock, Duration>& tp) {
    return wait_until_ns(lk, detail::deadline_ns(tp), "cond wait_until");
  }

  void notify_one() noexcept { list_.notify_one(); }
  void notify_all() noexcept { list_.notify_all(); }

 private:
  // Until the nanotime() `when`. `call`: the caller's name, for errors
  // (they named wait_until when wait_for was called).
  bool wait_until_ns(std::unique_lock<mutex>& lk, std::int64_t when, const char* call) {
    if (!lk.owns_lock()) raise_without_lock(call);
    detail::check_may_park(call);
    const std::uint32_t t = list_.add();
    lk.unlock();
    const bool notified = list_.wait_until(t, when);
    const bool end = detail::take_kill(detail::current_g());  // main_return: woken to end it
    lk.lock();
    if (GORO_UNLIKELY(end)) detail::end_goroutine(detail::current_g());
    return notified;
  }

  [[noreturn]] GORO_NOINLINE static void raise_without_lock(const char* call) {
    detail::raise_usage((std::string(call) + " without the lock held").c_str());
  }

  detail::notify_list list_;
};

// A counting semaphore for goroutines and threads (the runtime semaphore
// mutex and wait_group use). acquire() takes a token, blocking until there
// is one; release(n) adds n, handed to blocked acquirers in FIFO order.
class semaphore {
 public:
  explicit semaphore(std::uint64_t initial = 0) noexcept : sema_(initial) {}
  semaphore(const semaphore&) = delete;
  semaphore& operator=(const semaphore&) = delete;

  // Inside goro::blocking, an acquire that would wait is a usage_error.
  void acquire() {
    if (GORO_UNLIKELY(detail::inside_blocking(detail::current_m()))) {
      if (!sema_.try_acquire()) detail::raise_inside_blocking("semaphore acquire");
      return;
    }
    detail::call_point();
    sema_.acquire();
    detail::exit_if_killed(detail::current_g());  // main_return: taken off the queue, no token
  }
  bool try_acquire() noexcept { return sema_.try_acquire(); }
  void release(std::uint64_t n = 1) noexcept { sema_.release(n); }

 private:
  detail::sema sema_;
};

class wait_group;
namespace detail::testing {
// A test seam (detail/test_seam.hpp): called by the done() that brought
// the counter to zero with waiters registered, before it resets the
// state: a test adds there, as a concurrent add() on another thread would.
inline test_seam<wait_group*> wait_group_before_reset;
}  // namespace detail::testing

// Go's sync.WaitGroup. It may live on the waiter's stack: once the counter
// reaches zero with nobody waiting, done() touches nothing more, and with
// waiters registered it releases them all in one sema_.release(), whose
// last access to the object happens before any of them can return.
class wait_group {
 public:
  wait_group() = default;
  wait_group(const wait_group&) = delete;
  wait_group& operator=(const wait_group&) = delete;

  void add(std::int64_t delta) {
    const std::uint64_t d = static_cast<std::uint64_t>(delta) << 32;
    const std::uint64_t s = state_.fetch_add(d, std::memory_order_acq_rel) + d;
    const auto v = static_cast<std::int32_t>(s >> 32);
    const auto w = static_cast<std::uint32_t>(s);
    if (v < 0) {
      state_.fetch_sub(d, std::memory_order_acq_rel);
      detail::raise_usage("wait_group counter went negative");
    }
    // Go's WaitGroup.Add: the first increment (from zero) must happen before
    // any wait; waiters registered with a zero counter are being released
    // by a done() right now, whose reset of the state swallows this add.
    if (w != 0 && delta > 0 && v == static_cast<std::int32_t>(delta)) raise_concurrent_add();
    if (v > 0 || w == 0) return;  // no further access to *this
    // v == 0 with w registered waiters: none can return before it gets a
    // token from the release below (registered ones that have not blocked
    // yet take a kept token), so *this stays alive until then. An add()
    // between our fetch_add and the reset is misuse (Go panics); the
    // waiters are still released, then this done() reports it.
    detail::testing::wait_group_before_reset(this);
    const bool raced = state_.load(std::memory_order_relaxed) != s;
    state_.store(0, std::memory_order_relaxed);
    sema_.release(w);
    if (raced) raise_concurrent_add();
  }

  void done() { add(-1); }

  void wait() {
    std::uint64_t s = state_.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<std::int32_t>(s >> 32) == 0) return;
      detail::check_may_park("wait_group wait");
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) break;
    }
    // A runtime destroyed while we wait for good takes us off sema_'s
    // queue: un-count us too, or a later release would keep our token for
    // the next wait() to take early.
    sema_.acquire(false, &uncount_waiter, this, detail::wait_reason::wait_group_wait);
    detail::exit_if_killed(detail::current_g());  // main_return: taken off the queue (uncounted), not woken
    // The releasing done() reset the state to 0 before handing out tokens:
    // anything else means add() was called again before this wait()
    // returned (Go's "WaitGroup is reused before previous Wait has
    // returned"). This waiter is still inside wait(), so *this is alive.
    if (state_.load(std::memory_order_acquire) != 0)
      detail::raise_usage("wait_group misuse: wait_group is reused before previous wait has returned");
  }

  // Timed waits (beyond Go, for engines): false if the counter was not zero
  // by then.
  template <class Rep, class Period>
  bool wait_for(const std::chrono::duration<Rep, Period>& d) {
    return wait_until_ns(detail::deadline_after(d), "wait_group wait_for");  // saturated: hours::max() waits
  }
  template <class Clock, class Duration>
  bool wait_until(const std::chrono::time_point<Clock, Duration>& tp) {
    return wait_until_ns(detail::deadline_ns(tp), "wait_group wait_until");
  }

 private:
  // Until the nanotime() `when`. `call`: the caller's name, for errors.
  bool wait_until_ns(std::int64_t when, const char* call) {
    detail::call_point();  // a safe point even past the deadline (see mutex::try_lock_until_ns)
    std::uint64_t s = state_.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<std::int32_t>(s >> 32) == 0) return true;
      if (detail::nanotime() >= when) return false;
      detail::check_may_park(call);
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) break;
    }
    if (sema_.acquire_until(when, &uncount_waiter, this, detail::wait_reason::wait_group_wait)) {
      detail::exit_if_killed(detail::current_g());  // main_return: taken off the queue (uncounted), not woken
      return true;
    }
    // Timed out, off the sema's queue: withdraw our registration. If the
    // counter reached zero meanwhile, add() reset the state and released a
    // token for every registered waiter, us included: take ours (it is
    // there or on its way) and report success. (Reusing the wait_group
    // before this wait returns is the misuse Go's WaitGroup forbids too.)
    s = state_.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<std::int32_t>(s >> 32) == 0 || static_cast<std::uint32_t>(s) == 0) {
        sema_.acquire();
        detail::exit_if_killed(detail::current_g());
        return true;
      }
      if (state_.compare_exchange_weak(s, s - 1, std::memory_order_acq_rel, std::memory_order_acquire)) return false;
    }
  }

  // A runtime destroyed while a goroutine waits for good takes it off
  // sema_'s queue: un-count it too, or a later release would keep its
  // token for the next wait() to take early.
  static void uncount_waiter(void* self) noexcept {
    auto& st = static_cast<wait_group*>(self)->state_;
    std::uint64_t v = st.load(std::memory_order_relaxed);
    while (static_cast<std::uint32_t>(v) != 0 && !st.compare_exchange_weak(v, v - 1, std::memory_order_relaxed)) {
    }
  }

  [[noreturn]] static void raise_concurrent_add() {
    detail::raise_usage("wait_group misuse: add called concurrently with wait");
  }

  std::atomic<std::uint64_t> state_{0};  // counter in the high half, waiters in the low
  detail::sema sema_;
};

}  // namespace goro

// rw_mutex (Go's RWMutex) has its own header; sync.hpp gives it too.
#include "rw_mutex.hpp"  // IWYU pragma: export
