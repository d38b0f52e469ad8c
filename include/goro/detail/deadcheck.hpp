// checkdead's confirmation (sched.hpp arms it): a suspected deadlock is
// reported only once it has lasted deadlock_grace_ns with no external
// activity and no live external M (extm.hpp). The run() caller's M does the
// waiting: it is stopped anyway (every M is, or nothing is suspected), and
// it is the one that leaves and makes run() throw.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "extm.hpp"
#include "m.hpp"
#include "timer_heap.hpp"  // nanotime

namespace goro::detail {

template <class S>
struct deadcheck_sched {
  // The run() caller's M's sleep in stopm / stoplockedm, its note cleared
  // and it counted stopped (idle list or locked wait) by the caller under
  // lock_. A plain park_note.sleep() unless a deadlock is suspected: then
  // it sleeps to the end of the grace period, or until an external M
  // exits, and confirms (confirm). Returns when mm was taken (its taker's
  // wake consumed, as the plain sleep would), must leave, or confirmed the
  // deadlock (then it took itself off: no wake is coming).
  template <class M>
  static void sleep(S& s, M* mm) {
    for (;;) {
      std::int64_t until;
      {
        typename S::sched_lock lk(s);
        if (!stopped(mm) || s.should_leave(mm)) break;
        until = confirm_locked(lk, s, mm);
      }
      if (until == confirm_now) {
        const confirm_result r = confirm(s, mm);
        if (r == confirm_result::taken_off) return;  // no wake is coming
        if (r == confirm_result::confirmed) break;   // mm was taken meanwhile: its taker's wake is
        continue;                                    // main was woken: no deadlock
      }
      if (until == 0) break;
      if (until == INT64_MAX) {
        // Until an external M exits. Linking first, then reading extm_live:
        // extm_drop decrements, then wakes the linked watchers under
        // extm_watch_lock, so either it finds us linked or (the lock orders
        // the two) we see its decrement and do not sleep.
        extm_watcher w{&mm->park_note};
        extm_watch(&w);
        if (extm_live.load(std::memory_order_seq_cst) > own_count(mm)) mm->park_note.sleep();
        extm_unwatch(&w);  // no watcher wake after this
      } else if (std::int64_t ns = until - nanotime(); ns > 0) {
        (void)mm->park_note.sleep_for(ns);
      }
      typename S::sched_lock lk(s);
      if (!stopped(mm) || s.should_leave(mm)) break;
      // Still stopped: a timeout, or a watcher's wake (the only waker that
      // does not take mm first; shutdown's sets exiting_). Clearing under
      // lock_ loses no taker's wake: a taker takes mm under lock_ first.
      mm->park_note.clear();
    }
    mm->park_note.sleep();  // returns at once if already woken
  }

 private:
  // What of extm_live is run()'s own thread: the thread_lanes it owns (it
  // cannot pump them while inside run()). Its own plain-thread count is
  // out of extm_live while it is inside run() (run_main).
  template <class M>
  static std::uint32_t own_count(const M* rm) noexcept {
    return rm->extm_lanes ? rm->extm_lanes->load(std::memory_order_seq_cst) : 0u;
  }

  template <class M>
  static bool stopped(const M* mm) noexcept {
    return mm->in_idle_list || mm->locked_wait;
  }

  // Under lock_, by the run() caller's M while stopped. Returns 0 when
  // nothing is suspected (sleep plainly; the next M to stop re-arms),
  // INT64_MAX while an external M is live (sleep until one exits), else
  // the nanotime() at which to look again. Confirms (deadlock_, rm taken
  // off) when the grace period passed with extm_epoch unchanged: the
  // epoch read here is seq_cst, as is every bump, so an outside call that
  // came before this read restarts the grace period, and one that comes
  // after it came after the deadlock had lasted the whole period.
  template <class M>
  static std::int64_t confirm_locked(const typename S::sched_lock& held, S& s, M* rm) {
    if (s.deadcheck_at_ == 0) return 0;
    if (!s.dead_locked(held)) {
      s.deadcheck_at_ = 0;
      return 0;
    }
    const std::uint64_t epoch = extm_epoch.load(std::memory_order_seq_cst);
    const bool live = extm_live.load(std::memory_order_seq_cst) > own_count(rm);
    const std::int64_t now = nanotime();
    if (epoch != s.deadcheck_epoch_ || live) {
      s.deadcheck_epoch_ = epoch;
      s.deadcheck_at_ = now + deadlock_grace_ns;
    }
    if (live) return INT64_MAX;
    if (now < s.deadcheck_at_) return s.deadcheck_at_;
    return confirm_now;
  }

  static constexpr std::int64_t confirm_now = -1;

  // The grace period passed: main comes off the object it waits on
  // (detach_main, which takes that object's lock: not under lock_), and only
  // then is the deadlock published. A wake that reaches main first (a
  // plain thread's first call, landing just now) makes the detach fail: no
  // deadlock, main runs on. One that comes after the detach finds no main
  // to wake, as one after the confirmation would.
  enum class confirm_result { not_deadlocked, confirmed, taken_off };
  template <class M>
  static confirm_result confirm(S& s, M* mm) {
    testing::deadlock_confirm_hook();  // test seam (extm.hpp)
    const bool detached = S::main_return_ops::detach_main(s.run_main_g_);
    typename S::sched_lock lk(s);
    if (!detached) {
      s.deadcheck_at_ = 0;  // the next M to stop re-arms
      return confirm_result::not_deadlocked;
    }
    // Main can never run again: confirmed, even if mm was taken meanwhile
    // (its taker's wake is on its way; should_leave sends mm out then).
    s.deadlock_.store(true, std::memory_order_seq_cst);
    s.deadcheck_at_ = 0;
    return s.take_run_m_locked(lk, mm) ? confirm_result::taken_off : confirm_result::confirmed;
  }
};

}  // namespace goro::detail
