// sysmon: the runtime's monitor thread, and the scheduler's half of
// goro::blocking (Go's sysmon / retake / preemptone, entersyscall /
// entersyscallblock / exitsyscall / exitsyscallfast / exitsyscall0, and
// schedtrace, all in src/runtime/proc.go).
//
// sysmon runs on its own OS thread without a P, so it can act while every
// P is busy: it never runs goroutines. Each round it
//   - preempts: a P whose schedtick has not moved for Policy::time_slice
//     (measured with Policy::preemption_clock) gets its running G's
//     preempt flag set (cooperative: honoured at the G's next safe point);
//   - retakes Ps from blocking calls: a P whose syscalltick has not moved
//     for one sysmon round is handed to another M (handoffp), unless it has
//     no work, somebody else is spinning or idle, and the call is younger
//     than 10 ms (then taking it would only cost a thread wake-up);
//   - prints the SCHED line every GORO_DEBUG=schedtrace=MS milliseconds.
// It sleeps 20 us between rounds, doubling after 50 rounds in a row that
// retook nothing, up to 10 ms; when every P has been idle at each of its
// rounds for 1 ms it parks on a note until a P leaves the idle list
// (pidle_get calls on_p_busy), so an idle runtime costs no CPU. (Parking
// at the first idle round instead made a server that idles for a few
// microseconds between bursts wake sysmon, by futex, thousands of times
// a second; Go's sysmon is woken only by syscall exits.)
//
// A P in a blocking call has status `syscall` and no owner: whoever CASes
// it from `syscall` first owns it — the M coming back from the call (fast
// path, it keeps running) or sysmon (which hands it on). This is the only
// way a P changes hands without the scheduler lock.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "../policy.hpp"
#include "config.hpp"
#include "dump_impl.hpp"  // debug_setting
#include "extm.hpp"
#include "note.hpp"
#include "g.hpp"
#include "m.hpp"
#include "os_thread.hpp"
#include "async_preempt.hpp"  // async preemption
#include "preempt.hpp"

namespace goro::detail {

// sysmon's sleep between rounds: starts at sysmon_min_delay, doubles once
// sysmon_idle_rounds rounds in a row did nothing, up to sysmon_max_delay
// (Go: 20 us, 50, 10 ms).
inline constexpr std::chrono::microseconds sysmon_min_delay{20};
inline constexpr std::chrono::microseconds sysmon_max_delay{10'000};
inline constexpr std::uint32_t sysmon_idle_rounds = 50;
// How long every P must have looked idle, at each round, before sysmon
// parks until one gets busy.
inline constexpr std::int64_t sysmon_park_after_idle_ns = 1'000'000;
// A P in a blocking call with nothing queued is left alone while others
// are spinning or idle, but no longer than this (Go: 10 ms): it keeps
// sysmon from sleeping deeply.
inline constexpr std::chrono::nanoseconds syscall_retake_max{10'000'000};
// Lazy stack release (stack.hpp): stacks freed past the resident cache are
// released once no more have come for this long, or once they have waited
// the longer time, whichever is first.
inline constexpr std::int64_t stack_release_quiet_ns = 1'000'000;
inline constexpr std::int64_t stack_release_max_wait_ns = 100'000'000;

// GORO_DEBUG=key=value[,key=value...]: the value of `key`, or 0
// (dump_impl.hpp: a value that is not a number is reported and ignored).
inline long goro_debug_value(const char* key) noexcept { return debug_setting(key, 0); }

// Sched is scheduler<Policy>; sysmon is its friend and reads its Ps, idle
// lists and counters directly.
template <class Policy, class Sched>
class sysmon {
  using clock = typename Policy::preemption_clock;
  using steady = std::chrono::steady_clock;

  // What sysmon last saw of a P (Go's sysmontick); only sysmon touches it.
  struct p_ticks {
    bool running_seen = false;  // schedtick/schedwhen describe the current busy stretch
    std::uint32_t schedtick = 0;
    typename clock::time_point schedwhen{};
    std::uint32_t syscalltick = 0;
    steady::time_point syscallwhen{};
  };

 public:
  explicit sysmon(Sched& s) noexcept : s_(s), schedtrace_ms_(goro_debug_value("schedtrace")), start_(steady::now()) {}
  sysmon(const sysmon&) = delete;
  sysmon& operator=(const sysmon&) = delete;
  ~sysmon() { stop(); }

  // Starts the thread the first time the runtime gets work (the first
  // spawn: run() or go() from outside; never from a goroutine, which
  // exists only after a first spawn). Without a thread the runtime still
  // works, without preemption or hand-offs.
  // Every spawn calls it: the check stays inline, the start does not.
  void ensure_started() noexcept {
    if (GORO_LIKELY(state_.load(std::memory_order_acquire) != 0)) return;
    start();
  }

 private:
  GORO_NOINLINE void start() noexcept {
    std::uint32_t zero = 0;
    if (!state_.compare_exchange_strong(zero, 1, std::memory_order_acq_rel)) return;
    ticks_ = decltype(ticks_)(memory_allocator<p_ticks>(s_.memory));  // the runtime's allocator
    // The allocator may refuse (bad_alloc): no thread then, as for EAGAIN
    // below, and the next spawn tries again (this is noexcept: terminate).
    GORO_TRY { ticks_.assign(s_.created_ps(), p_ticks{}); }
    GORO_CATCH_ALL {
      state_.store(0, std::memory_order_release);
      return;
    }
    int err = thread_.start(
        s_.threads_, "sysmon",
        [](void* self) -> void* {
          extm_mark_internal();  // checkdead: the runtime's own thread, not an external M
          static_cast<sysmon*>(self)->loop();
          return nullptr;
        },
        this);
    if (err != 0) state_.store(0, std::memory_order_release);  // no thread (EAGAIN): the next spawn tries again
  }

 public:

  // Stops and joins the thread (runtime shutdown, after every goroutine finished).
  void stop() noexcept {
    if (!thread_.started()) return;
    stopping_.store(true, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with the fence in sleep(): see there
    note_.wake();
    thread_.join();
  }

  // A P left the idle list (pidle_get, after its seq_cst npidle decrement):
  // wake sysmon if it sleeps deeply. Dekker with deep_sleep(): either this
  // sees sleeping_ or sysmon sees npidle < nprocs.
  void on_p_busy() noexcept {
    if (GORO_UNLIKELY(sleeping_.load(std::memory_order_seq_cst)) && sleeping_.exchange(false, std::memory_order_seq_cst))
      note_.wake();
  }

  void count_preemption() noexcept { preemptions_.fetch_add(1, std::memory_order_relaxed); }

  template <class Stats>
  void fill_stats(Stats& st) const noexcept {
    st.preemptions = preemptions_.load(std::memory_order_relaxed);
    st.syscall_handoffs = handoffs_.load(std::memory_order_relaxed);
    st.sysmon_parks = parks_.load(std::memory_order_relaxed);
  }

  // ---- goro::blocking: the scheduler side ----

  // entersyscall: the M keeps pp but lets go of it: pp's status becomes
  // `syscall` with no owner, so sysmon may take it if the call lasts.
  // entersyscallblock (long_call): hand pp off at once.
  void enter_syscall(typename Sched::m* mm, bool long_call) noexcept {
    auto* pp = mm->pp;
    pp->syscalltick.store(pp->syscalltick.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    mm->in_blocking = true;
    s_.releasep(mm);
    if (!long_call) {
      mm->oldp = pp;
      // Release: everything this M did with pp happens before the owner
      // that CASes it away from `syscall` (sysmon, or this M coming back)
      // uses it.
      pp->status.store(Sched::p_status::syscall, std::memory_order_release);
      return;
    }
    mm->oldp = nullptr;
    handoffs_.fetch_add(1, std::memory_order_relaxed);
    GORO_CHAOS_POINT("entersyscall.handoff");
    s_.handoffp(pp);  // Go's handoffp
  }

  // exitsyscall, goroutine side: take the old P back if nobody took it
  // (fast path), else an idle P; else switch to g0, which queues the G on
  // the global queue and stops this M (exitsyscall0).
  void exit_syscall(typename Sched::m* mm) noexcept {
    auto* pp = std::exchange(mm->oldp, nullptr);
    mm->in_blocking = false;
    if (pp) {
      auto expect = Sched::p_status::syscall;
      if (pp->status.compare_exchange_strong(expect, Sched::p_status::running, std::memory_order_acq_rel)) {
        s_.acquirep(mm, pp);
        pp->syscalltick.store(pp->syscalltick.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return;
      }
    }
    // exitsyscallfast_pidle
    {
      typename Sched::sched_lock lk(s_);
      pp = s_.pidle_get(lk);
    }
    if (pp) {
      s_.acquirep(mm, pp);
      return;
    }
    mm->after = after_switch::exitsyscall;
    switch_to_g0(mm, mm->curg);
    // Resumed by some M that has a P (execute of a runnable G).
  }

  // exitsyscall0, on g0 after exit_syscall switched out: an idle P if one
  // appeared (resume gp at once), else gp goes to the global queue and
  // the M stops. Both under one lock hold, so a P going idle later sees
  // gp in the global queue (find_runnable checks it under the same lock
  // before pidle_put).
  bool exit_syscall0(typename Sched::m* mm, g* gp) noexcept {
    typename Sched::p* pp;
    {
      typename Sched::sched_lock lk(s_);
      pp = s_.pidle_get(lk);
      if (!pp) {
        gp->status.store(g_status::runnable, std::memory_order_relaxed);
        s_.globq_.push_back(gp);
      }
    }
    if (!pp) return false;
    s_.acquirep(mm, pp);
    return true;
  }

  // preemptone: ask pp's running G to yield (sysmon, and gomaxprocs'
  // shrink). The G read may be stale (the P moved on meanwhile): the
  // request then lands on a G that clears it in execute() before it runs
  // again, or that was just started (harmless, as in Go). G records are never freed while the runtime lives; the
  // acquire pairs with execute's release store, so the G record's
  // construction (on whichever thread spawned it) happens before our write.
  void preemptone(typename Sched::p* pp) noexcept {
    if (g* gp = pp->sysmon_curg.load(std::memory_order_acquire)) {
      request_preempt(gp);
      if constexpr (Sched::async_signal) {  // async preemption: SIGURG if gp is in an async_preemptible scope
        // The M and its thread stay valid while the lock is held (Sched::m_record_lock_).
        std::lock_guard<spinlock> lk(s_.m_record_lock_);
        m_base* mm = pp->sysmon_m.load(std::memory_order_relaxed);
        GORO_CHAOS_POINT("sysmon.preemptone_m");
        async_preempt_signal(gp, mm);
      }
    }
  }

 private:
  void loop() noexcept {
    std::uint32_t idle = 0;
    auto delay = sysmon_min_delay;
    auto last_trace = steady::now();
    std::int64_t all_idle_since = 0;  // the first round of a run that saw every P idle
    for (;;) {
      if (idle == 0) {
        delay = sysmon_min_delay;
      } else if (idle > sysmon_idle_rounds) {
        delay = std::min(delay * 2, sysmon_max_delay);
      }
      // A timer due on a busy P: wake for it (see retake), never sooner than
      // the shortest delay.
      auto nap = delay;
      if (next_busy_timer_ != 0) {
        std::int64_t until_ns = next_busy_timer_ - nanotime();
        auto until = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::nanoseconds(until_ns));
        if (until < nap) nap = std::max(until, sysmon_min_delay);
      }
      if (!sleep(nap)) return;
      // An M could not be started (no thread to be had): try again each
      // round until one is, so queued work is not left waiting for a wakep.
      const bool retry_m = s_.m_start_failed_.load(std::memory_order_seq_cst);
      if (retry_m) s_.retry_start_m();
      // Every P idle (for 1 ms: see the top) and nothing to print: sleep
      // until a P gets busy. With no P busy there is nothing to retake.
      if (schedtrace_ms_ <= 0 && !retry_m && all_idle()) {
        std::int64_t t = nanotime();
        if (all_idle_since == 0) all_idle_since = t;
        if (t - all_idle_since < sysmon_park_after_idle_ns) {
          ++idle;
          continue;
        }
        all_idle_since = 0;
        release_stacks(0, true);  // an idle runtime keeps no excess stacks resident
        parks_.fetch_add(1, std::memory_order_relaxed);
        if (!deep_sleep()) return;
        idle = 0;
        continue;
      }
      all_idle_since = 0;
      auto now = steady::now();
      if (schedtrace_ms_ > 0 && now - last_trace >= std::chrono::milliseconds(schedtrace_ms_)) {
        last_trace = now;
        schedtrace(now);
      }
      if (Sched::netpoll_ops::sysmon(s_, nanotime())) idle = 0;  // netpoll: nobody polled for 10 ms
      release_stacks(nanotime(), false);
      if (retake(now) != 0)
        idle = 0;
      else
        ++idle;
    }
  }

  // Go's background scavenger, for stacks: releasing them while a burst of
  // goroutines is still exiting would cost one madvise (and one TLB
  // shoot-down) per stack, as they exit in no particular order; once the
  // frees stop, most of a burst's neighbours are free together and share
  // calls. Meanwhile the waiting stacks are reused first.
  void release_stacks(std::int64_t now, bool force) noexcept {
    const std::size_t n = s_.stacks_waiting_release();
    if (n == 0) {
      release_first_ = 0;
      release_seen_ = 0;
      return;
    }
    if (!force) {
      if (release_first_ == 0) release_first_ = now;
      if (n != release_seen_) {
        release_seen_ = n;
        release_changed_ = now;
      }
      if (now - release_changed_ < stack_release_quiet_ns && now - release_first_ < stack_release_max_wait_ns) return;
    }
    s_.release_waiting_stacks();
    release_first_ = 0;
    release_seen_ = 0;
  }

  bool all_idle() const noexcept { return s_.npidle_.load(std::memory_order_seq_cst) == s_.active_ps(); }

  // Sleeps up to d; false when sysmon must stop. The note is cleared before
  // stopping_ is read; the seq_cst fences here and in stop() make sure that
  // either this load sees stopping_ or stop()'s wake() sees the cleared
  // note (and so wakes the futex).
  bool sleep(std::chrono::microseconds d) noexcept {
    note_.clear();
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (stopping_.load(std::memory_order_seq_cst)) return false;
    note_.sleep_for(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
    return !stopping_.load(std::memory_order_seq_cst);
  }

  bool deep_sleep() noexcept {
    note_.clear();
    std::atomic_thread_fence(std::memory_order_seq_cst);
    sleeping_.store(true, std::memory_order_seq_cst);
    if (!stopping_.load(std::memory_order_seq_cst) && all_idle() && !s_.m_start_failed_.load(std::memory_order_seq_cst))
      note_.sleep();
    sleeping_.store(false, std::memory_order_relaxed);
    return !stopping_.load(std::memory_order_seq_cst);
  }

  // retake: preempt long-running Gs, take Ps from long blocking calls.
  // Returns the number of Ps taken from blocking calls.
  std::uint32_t retake(steady::time_point now) noexcept {
    std::uint32_t n = 0;
    [[maybe_unused]] auto pnow = clock::now();
    if (ticks_.size() < s_.created_ps()) {  // gomaxprocs grew
      // A refusing allocator (bad_alloc; this is noexcept): the new Ps
      // wait for a later round.
      GORO_TRY { ticks_.resize(s_.created_ps()); }
      GORO_CATCH_ALL {}
    }
    [[maybe_unused]] const std::int64_t tnow = nanotime();
    next_busy_timer_ = 0;
    for (std::size_t i = 0; i < ticks_.size(); ++i) {  // retired Ps too: one may still be held
      auto* pp = s_.allp_[i];
      p_ticks& pd = ticks_[i];
      auto st = pp->status.load(std::memory_order_acquire);
      bool sysretake = false;  // the slice is over while in a blocking call: retake now
      if constexpr (Policy::preempt != preemption::none) {
        // A slice is timed from the first round that sees the P running
        // with a given schedtick. The tick does not move for a G taken from
        // runnext (it inherits the slice), nor across an idle stretch: a P
        // seen idle starts afresh, so idle time never counts as running.
        // A P in a blocking call counts as running (Go's retake: _Prunning
        // || _Psyscall): a goroutine looping on short blocking calls keeps
        // its schedtick across them (exit_syscall's fast path) and would
        // otherwise restart its slice whenever sysmon saw it inside a call
        // -- and starve the P's other goroutines and timers (GCFairness,
        // tests/fairness_test.cpp).
        if (st == Sched::p_status::running || st == Sched::p_status::syscall) {
          std::uint32_t t = pp->sysmon_schedtick.load(std::memory_order_relaxed);
          if (!pd.running_seen || pd.schedtick != t) {
            pd.running_seen = true;
            pd.schedtick = t;
            pd.schedwhen = pnow;
          } else if (pnow - pd.schedwhen >= Policy::time_slice) {
            preemptone(pp);  // in a call: the G yields when it returns (blocking's preempt_point)
            sysretake = true;
          }
        } else {
          pd.running_seen = false;
        }
        // Timers due on a running P: that P runs them only when it next
        // schedules, which its goroutine may put off for a whole slice
        // (and 4 hogs per P make a 1 ms ticker late by tens of ms). Ask the
        // goroutine to yield now. goro's rule, not Go's (Go lets due timers
        // wait for the slice): with it a ticker's lag under CPU hogs is
        // sysmon's wake-up latency, and the loop above wakes sysmon for the
        // next timer of a busy P. After a request for a timer already due
        // it looks again 1 ms later (its next timer is not known yet; and
        // a goroutine that never reaches a safe point must not keep sysmon
        // at its shortest delay).
        if (st == Sched::p_status::running) {
          if (std::int64_t w = pp->timers.earliest(); w != 0) {
            if (w <= tnow) {
              preemptone(pp);
              w = tnow + 1'000'000;
            }
            if (next_busy_timer_ == 0 || w < next_busy_timer_) next_busy_timer_ = w;
          }
        }
      }
      if (st != Sched::p_status::syscall) continue;
      std::uint32_t t = pp->syscalltick.load(std::memory_order_relaxed);
      if (!sysretake && pd.syscalltick != t) {  // a new call since the last round: give it one round
        pd.syscalltick = t;
        pd.syscallwhen = now;
        continue;
      }
      if (pp->runq.empty() && s_.globq_.empty() &&
          s_.spinning_.count(std::memory_order_relaxed) + s_.npidle_.load(std::memory_order_relaxed) > 0 &&
          now - pd.syscallwhen < syscall_retake_max)
        continue;
      auto expect = Sched::p_status::syscall;
      if (!pp->status.compare_exchange_strong(expect, Sched::p_status::running, std::memory_order_acq_rel)) continue;
      GORO_CHAOS_POINT("sysmon.retake");
      ++n;
      handoffs_.fetch_add(1, std::memory_order_relaxed);
      s_.handoffp(pp);  // Go's handoffp
    }
    return n;
  }

  // schedtrace: Go's SCHED line, from a snapshot taken under the lock.
  void schedtrace(steady::time_point now) {
    std::string line;
    line.reserve(128);
    char buf[160];
    {
      typename Sched::sched_lock lk(s_);
      unsigned idlethreads = 0;
      for (auto* mm = s_.midle_; mm; mm = mm->link) ++idlethreads;
      // Ms alive (as checkmcount: not those whose thread exited locked), + sysmon
      const bool run_caller = s_.run_m_.load(std::memory_order_relaxed) != nullptr && !s_.run_m_left_;
      std::size_t threads = s_.allm_.size() - s_.nmexited_ + (run_caller ? 1 : 0) + 1;
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - start_).count();
      std::snprintf(buf, sizeof buf,
                    "SCHED %lldms: gomaxprocs=%u idleprocs=%u threads=%zu spinningthreads=%u needspinning=0 "
                    "idlethreads=%u runqueue=%u [",
                    static_cast<long long>(ms), s_.active_ps(), s_.npidle_.load(std::memory_order_relaxed), threads,
                    s_.spinning_.count(std::memory_order_relaxed), idlethreads, s_.globq_.size());
      line += buf;
    }
    for (unsigned i = 0, n = s_.active_ps(); i < n; ++i) {
      std::snprintf(buf, sizeof buf, i ? " %u" : "%u", s_.allp_[i]->runq.size());
      line += buf;
    }
    line += "]\n";
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
  }

  Sched& s_;
  const long schedtrace_ms_;
  const steady::time_point start_;
  std::vector<p_ticks, memory_allocator<p_ticks>> ticks_;  // per P, sysmon's thread only (sized before it starts)
  std::int64_t release_first_ = 0, release_changed_ = 0;  // release_stacks (sysmon's thread)
  std::size_t release_seen_ = 0;
  std::int64_t next_busy_timer_ = 0;  // the earliest future timer of a running P at the last retake (sysmon's thread)
  std::atomic<std::uint32_t> state_{0};  // 0: not started, 1: started
  runtime_thread thread_;  // "<thread_name>-sysmon"

  note note_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> sleeping_{false};  // parked deeply, waiting for on_p_busy
  std::atomic<std::uint64_t> preemptions_{0};
  std::atomic<std::uint64_t> parks_{0};  // deep sleeps (stats().sysmon_parks)
  std::atomic<std::uint64_t> handoffs_{0};
};

}  // namespace goro::detail
