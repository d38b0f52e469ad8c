// The runtime's side of main_return::unwind (runtime.hpp options; the
// goroutine's side is goexit.hpp): when the main goroutine returns (and
// when a runtime is destroyed with goroutines started by go() while no
// run() was active), every goroutine still alive is ended the C++ way.
// main_return_sched owns the whole sequence; it runs on a thread of its
// own started as main finishes (run() joins it before returning), or on
// the destructor's thread:
//
// 1. The runtime's ending_goroutines flag is set and preempt_pending gets
//    one more count, so every safe point takes its slow path, where
//    call_point() sees the flag: a running goroutine unwinds at its next
//    goro call, and a goroutine about to start is discarded unrun
//    (sched.hpp goroutine_main: its functor is destroyed on its stack).
// 2. Kill passes, repeated until no goroutine is left: each parked
//    goroutine not ending yet is pinned (the goroutine dump's g::dump_pin
//    protocol, under the dump registry's lock, with one process-wide
//    barrier), and if it is still parked its g::unlink_wait takes it off
//    its wait -- a channel or waiter queue, a select (claimed as a case's
//    waker would), a sleep's timer, a poll descriptor. When that succeeds
//    nobody else will ready it: it is marked `killed` and readied, and the
//    park site's exit_if_killed() unwinds it. When a waker got there
//    first, the goroutine runs and ends at its next goro call. A park that
//    is not committed yet (its timer not queued) is found again by the
//    next pass.
// 3. A goroutine still alive 1 s later reached no goro call (a CPU loop,
//    or a goro::blocking call that does not return): reported once on
//    stderr with the goroutine dump, and waited for. (Goroutines parked
//    while unwinding, waiting on what a plain thread may still do, get a
//    report saying so.)
// 4. Done when no goroutine is left, or when the rest can never run again
//    (a main goroutine left blocked by a run() that threw deadlock_error
//    is never woken: its run() frame is gone):
//    parked while already unwinding (a destructor waiting for something
//    nobody will do) or on a wait that cannot be undone (a select on a
//    destroyed channel, an rw_mutex hand-over), with every P idle and no
//    timer or I/O pending, unchanged for three passes -- and, as for
//    checkdead (deadcheck.hpp), no live external M and nothing from
//    outside for a grace period: a plain thread may still wake them (a
//    destructor handing off to a worker thread and waiting for its
//    answer). The runtime's shutdown reports those as blocked forever and
//    releases them, as before.
//
// Then the flag is cleared: a later run() on the same runtime starts
// fresh. With main_return::wait none of this happens.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "../dump.hpp"
#include "../os/os.hpp"
#include "extm.hpp"
#include "g.hpp"
#include "m.hpp"
#include "preempt.hpp"
#include "timer_heap.hpp"

namespace goro::detail {

// How long a goroutine may go without reaching a goro call after main
// returned before it is reported.
inline constexpr std::int64_t main_return_report_ns = 1'000'000'000;

// S is scheduler<Policy> (this is its friend).
template <class S>
struct main_return_sched {
  // The runtime's destructor (shutdown), or run() when no ender thread
  // could be started: the whole sequence on the calling thread.
  // for_run: on run()'s thread (after_main), see wait_all.
  static void unwind_all(S& s, bool for_run = false) noexcept {
    if (s.live_goroutines() == 0) return;
    begin(s);
    wait_all(s, for_run);
  }

  // Main just finished (sched.hpp main_finished, on the g0 of the M that
  // ran it, before main_done_ is published): step 1 at once, and a thread
  // of its own for the rest -- not the run() caller's, which may be busy
  // running a goroutine that reaches no goro call (run() joins it:
  // after_main). Without that thread, after_main does it all.
  static void main_finished(S& s) noexcept {
    if (s.live_goroutines() == 0) return;
    begin(s);
    s.ender_started_ = s.ender_.start(
                           s.threads_, "ender",
                           [](void* arg) -> void* {
                             wait_all(*static_cast<S*>(arg), true);
                             return nullptr;
                           },
                           &s) == 0;
  }

  // run(), once the caller's M has left (main finished).
  static void after_main(S& s) noexcept {
    if (s.ender_started_) {
      s.ender_.join();
      s.ender_started_ = false;
      return;
    }
    unwind_all(s, true);
  }

  // Before a deadlock is confirmed (deadcheck.hpp), main's waiter comes off
  // the object's queue (kill_pass's protocol): run() then throws
  // deadlock_error and leaves main parked for good, and nothing -- a plain
  // thread's later send, unlock or done() -- wakes it into run()'s frame,
  // gone by then. Shutdown finds it blocked forever. False when main is
  // not waiting any more, or its waker took it off the queue first: then
  // it was no deadlock, and main runs on. Without the barrier (a kernel
  // without membarrier) main's state cannot be read safely: it is left
  // where it is and the deadlock reported, as before detaching existed.
  static bool detach_main(g* gp) noexcept {
    std::lock_guard<std::mutex> lk(registry().lock);
    gp->dump_pin.store(true, std::memory_order_relaxed);
    bool detached = true;
    if (os::process_wide_barrier()) {
      detached = false;
      if (gp->status.load(std::memory_order_acquire) == g_status::waiting) {
        std::lock_guard<std::mutex> ul(unlink_lock());
        auto unlink = gp->unlink_wait;
        // No unlink: a wait nothing can end (a select whose channels are gone).
        detached = !unlink || unlink(gp->unlink_arg);
        if (detached) gp->unlink_wait = nullptr;
      }
    }
    gp->dump_pin.store(false, std::memory_order_release);
    return detached;
  }

 private:
  static void begin(S& s) noexcept {
    if (!s.ending_goroutines.exchange(true, std::memory_order_seq_cst))
      preempt_pending.fetch_add(1, std::memory_order_seq_cst);  // every safe point takes its slow path
  }

  // Steps 2-4, then the flag is cleared. for_run: for run()'s caller (on
  // the ender thread, or on its own), whose lanes are discounted as
  // checkdead does; else for the calling thread, discounting its own.
  static void wait_all(S& s, bool for_run) noexcept {
    const std::int64_t start = nanotime();
    bool reported = false;
    int quiet = 0;
    std::size_t last_live = 0;
    long nap_ns = 100'000;
    std::uint64_t quiet_epoch = 0;  // step 4's grace period (as shutdown's main_return::wait)
    std::int64_t quiet_since = 0;
    for (;;) {
      const std::size_t woken = kill_pass(s);
      const std::size_t live = s.live_goroutines();
      if (live == 0) break;
      // The rest live on thread_lanes of the thread in run(), which cannot
      // pump them before run() returns: they end at their lane's next
      // run_for (a parked one was killed above), not waited for here.
      if (live == stranded(s)) break;
      const bool parked = woken == 0 && live == last_live && stuck(s);
      bool outside_quiet = false;
      if (parked) {
        // The deadlock rule (deadcheck.hpp confirm_locked): not while an
        // external M is live, and only after a grace period with no
        // external activity. Mains left by a deadlocked run() wait on
        // nothing anyone can end: no grace for them.
        const std::uint64_t epoch = extm_epoch.load(std::memory_order_seq_cst);
        const std::int64_t now = nanotime();
        if (extm_live.load(std::memory_order_seq_cst) > own_count(s, for_run) || quiet_since == 0 ||
            epoch != quiet_epoch) {
          quiet_epoch = epoch;
          quiet_since = now;
        }
        outside_quiet = now - quiet_since >= deadlock_grace_ns || dead_mains(s) == live;
      } else {
        quiet_since = 0;
      }
      if (outside_quiet) {
        if (++quiet >= 3) break;
      } else {
        quiet = 0;
      }
      last_live = live;
      if (!reported && nanotime() - start >= main_return_report_ns) {
        reported = true;
        report(s, live, parked);
      }
      os::sleep_ns(nap_ns);
      nap_ns = std::min<long>(nap_ns * 2, 10'000'000);
    }
    if (s.ending_goroutines.exchange(false, std::memory_order_seq_cst))
      preempt_pending.fetch_sub(1, std::memory_order_seq_cst);
  }

  // One pass of step 2; returns how many goroutines it woke.
  static std::size_t kill_pass(S& s) noexcept {
    using g_list = std::vector<g*, memory_allocator<g*>>;  // the runtime's allocator
    g_list parked{memory_allocator<g*>(s.memory)};
    s.for_each_g(
        [](g* gp, void* v) {
          // Not a main goroutine: one still parked is left over from a run()
          // that threw deadlock_error, and its run() frame is gone.
          if (gp->status.load(std::memory_order_acquire) == g_status::waiting && !gp->is_main &&
              gp->exiting.load(std::memory_order_relaxed) == exit_state::none)
            static_cast<g_list*>(v)->push_back(gp);
        },
        &parked);
    if (parked.empty()) return 0;
    g_list owned{memory_allocator<g*>(s.memory)};
    {
      runtime_registry& reg = registry();
      std::lock_guard<std::mutex> lk(reg.lock);  // one pinner at a time (the goroutine dump too)
      for (g* gp : parked) gp->dump_pin.store(true, std::memory_order_relaxed);
      // Either an M resuming gp sees the pin and waits, or we see it
      // running (dump.hpp owns this protocol).
      const bool barrier = os::process_wide_barrier();
      for (g* gp : parked) {
        bool own = false;
        if (barrier && gp->status.load(std::memory_order_acquire) == g_status::waiting &&
            gp->exiting.load(std::memory_order_relaxed) == exit_state::none && !gp->no_kill) {
          std::lock_guard<std::mutex> ul(unlink_lock());  // its queue is not being destroyed meanwhile
          if (auto unlink = gp->unlink_wait) own = unlink(gp->unlink_arg);
          if (own) gp->exiting.store(exit_state::killed, std::memory_order_relaxed);
        }
        gp->dump_pin.store(false, std::memory_order_release);
        if (own) owned.push_back(gp);
      }
    }
    const extm_internal_scope internal;  // the runtime's own wakes: no external M (extm.hpp)
    for (g* gp : owned) gp->sched->ready(gp);
    return owned.size();
  }

  // What of extm_live is the thread waiting for the goroutines (run()'s
  // caller for the ender thread): its lanes, and its own plain-thread count
  // unless it is inside run() (run_main takes that out of extm_live).
  static std::uint32_t own_count(const S& s, bool for_run) noexcept {
    if (for_run) return s.run_lanes_ ? s.run_lanes_->load(std::memory_order_seq_cst) : 0u;
    return (extm_counted_here() ? 1u : 0u) + lanes_owned_here()->load(std::memory_order_seq_cst);
  }

  // Main goroutines left parked by a run() that threw deadlock_error.
  static std::size_t dead_mains(S& s) noexcept {
    std::size_t n = 0;
    s.for_each_g(
        [](g* gp, void* v) {
          if (gp->is_main && gp->status.load(std::memory_order_acquire) == g_status::waiting)
            ++*static_cast<std::size_t*>(v);
        },
        &n);
    return n;
  }

  // Goroutines on thread_lanes that run()'s own thread owns (lane.hpp).
  static std::size_t stranded(S& s) noexcept {
    struct arg {
      const void* lanes;
      std::size_t n;
    } a{s.run_lanes_, 0};
    if (!a.lanes) return 0;
    s.for_each_g(
        [](g* gp, void* v) {
          auto* p = static_cast<arg*>(v);
          const g_status st = gp->status.load(std::memory_order_acquire);
          // sched is a dump field: a lane goroutine exiting on its owner's
          // thread rewrites it while this walk runs (g.hpp).
          if ((st == g_status::runnable || st == g_status::waiting) && dump_field(gp->sched)->lane_owner() == p->lanes)
            ++p->n;
        },
        &a);
    return a.n;
  }

  // Whether nothing in the runtime can run a goroutine now or later: no
  // goroutine running or runnable (one inside goro::blocking is running,
  // its P possibly idle), every P idle, no timer, no I/O wait.
  static bool stuck(S& s) noexcept {
    bool active = false;
    s.for_each_g(
        [](g* gp, void* a) {
          const g_status st = gp->status.load(std::memory_order_acquire);
          if (st == g_status::running || st == g_status::runnable) *static_cast<bool*>(a) = true;
        },
        &active);
    if (active) return false;
    typename S::sched_lock lk(s);
    return s.npidle_.load(std::memory_order_relaxed) == s.active_ps() && s.globq_.empty() &&
           s.spinning_.count(std::memory_order_relaxed) == 0 && s.earliest_timer() == 0 &&
           s.poller_.waiters() <= 0;
  }

  // parked: all of them wait in goro calls, for a plain thread (step 4).
  static void report(S& s, std::size_t live, bool parked) noexcept {
    std::string dump;
#if GORO_EXCEPTIONS
    try {
      dump = format_goroutines(collect_goroutines(&s));
    } catch (...) {
    }
#else
    dump = format_goroutines(collect_goroutines(&s));
#endif
    std::fprintf(stderr,
                 parked
                     ? "goro: main returned; %zu goroutine%s still unwinding after 1 s, parked on what a live plain "
                       "thread may still do, and %s waited for\n\n%s\n"
                     : "goro: main returned; %zu goroutine%s reached no goro call within 1 s and %s waited for\n\n%s\n",
                 live, live == 1 ? "" : "s", live == 1 ? "is" : "are", dump.c_str());
    std::fflush(stderr);
  }
};

}  // namespace goro::detail
