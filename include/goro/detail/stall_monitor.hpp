// The stall monitor: a debugging thread per runtime that turns a lost
// wake-up into a loud failure instead of a slow or hung program. On in
// chaos builds (-DGORO_CHAOS, see chaos.hpp and docs/testing.md) and with
// -DGORO_STALL_MONITOR; compiled out otherwise (an empty member).
//
// Every 5 ms it samples the scheduler without locks (atomics only) and
// aborts, printing the scheduler's state, when for longer than the limit
//  - a P sits idle, and no M spins, while queued work goes unserved: a
//    run queue stays non-empty while its P schedules nothing, the global
//    queue stays non-empty while no P takes from it or steals, or the same
//    timer stays overdue: nobody was woken for it (default 100 ms,
//    GORO_STALL_IDLE_MS);
//  - work is queued but no P makes progress: no schedule, park, unpark,
//    spawn or exit anywhere (default 2000 ms, GORO_STALL_PROGRESS_MS).
// GORO_STALL_MONITOR=0 in the environment turns it off at run time.
//
// A queue that is non-empty at every sample is not enough: a ping-pong pair
// keeps its P's runnext full all the time while that P serves it, and an
// idle P's spinning M may rightly leave it alone. What counts is that the
// same work waited the whole window with nobody serving it.
#pragma once

#if defined(GORO_CHAOS) && !defined(GORO_STALL_MONITOR)
#define GORO_STALL_MONITOR 1
#endif

#if defined(GORO_STALL_MONITOR) && GORO_STALL_MONITOR
#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "../os/os.hpp"
#include "chaos.hpp"
#include "timer_heap.hpp"  // nanotime
#endif

namespace goro::detail {

#if defined(GORO_STALL_MONITOR) && GORO_STALL_MONITOR

template <class Sched>
class stall_monitor {
 public:
  explicit stall_monitor(Sched& s) noexcept : s_(s) {
    if (const char* e = std::getenv("GORO_STALL_MONITOR"); e && std::strcmp(e, "0") == 0) return;
    idle_limit_ms_ = env_ms("GORO_STALL_IDLE_MS", 100);
    progress_limit_ms_ = env_ms("GORO_STALL_PROGRESS_MS", 2000);
    pid_ = os::process_id();
    started_ = os::create_thread(&thread_, &stall_monitor::main, this) == 0;
  }
  stall_monitor(const stall_monitor&) = delete;
  stall_monitor& operator=(const stall_monitor&) = delete;
  ~stall_monitor() {
    if (!started_) return;
    stop_.store(true, std::memory_order_relaxed);
    if (os::process_id() == pid_) os::join_thread(thread_);  // a forked child has no such thread
  }

 private:
  static std::int64_t env_ms(const char* name, std::int64_t dflt) noexcept {
    const char* e = std::getenv(name);
    return e ? std::strtoll(e, nullptr, 10) : dflt;
  }

  static void* main(void* self) {
    static_cast<stall_monitor*>(self)->loop();
    return nullptr;
  }

  static constexpr unsigned max_watched = 64;  // Ps watched one by one (more: the global view only)

  struct sample {
    std::uint32_t npidle = 0;
    std::uint32_t nmspinning = 0;
    std::uint64_t queued = 0;        // Gs in the global queue and every run queue
    std::int64_t earliest = 0;       // the earliest timer's when (0: none)
    std::int64_t overdue = 0;        // ns past it (0: not due)
    std::uint64_t progress = 0;      // every P's scheduling counters, summed
    std::uint64_t global_taken = 0;  // Gs taken from the global queue or stolen, summed
    std::uint32_t globq = 0;
    std::uint32_t np = 0;
    std::uint32_t runq[max_watched] = {};
    std::uint64_t served[max_watched] = {};  // one P's scheduling counters
  };

  sample take() const noexcept {
    sample x;
    x.npidle = s_.npidle_.load(std::memory_order_acquire);
    x.nmspinning = s_.spinning_.count(std::memory_order_acquire);
    x.globq = s_.globq_.size();
    x.queued = x.globq;
    x.np = s_.created_ps();
    for (unsigned i = 0; i < x.np; ++i) {
      const auto* pp = s_.allp_[i];
      const std::uint32_t q = pp->runq.size();
      const std::uint64_t served = pp->sysmon_schedtick.load(std::memory_order_relaxed) + pp->spawns.get() +
                                   pp->exits.get() + pp->parks.get() + pp->unparks.get() + pp->steals.get() +
                                   pp->global_polls.get();
      x.queued += q;
      x.progress += served;
      x.global_taken += pp->global_polls.get() + pp->steals.get();
      if (i < max_watched) {
        x.runq[i] = q;
        x.served[i] = served;
      }
    }
    x.progress += s_.unparks_.load(std::memory_order_relaxed) + s_.offp_spawns_.load(std::memory_order_relaxed);
    x.earliest = s_.earliest_timer();
    if (x.earliest != 0) {
      std::int64_t now = nanotime();
      if (x.earliest < now) x.overdue = now - x.earliest;
    }
    return x;
  }

  // Work that nobody serves since `from` while a P is idle and no M spins
  // (a spinning M, or one being started for an idle P, is on its way: the
  // OS may just be slow to run it on a loaded machine): a run queue
  // that stayed non-empty while its P scheduled nothing (a P that keeps
  // scheduling serves its own queue: a ping-pong pair keeps its runnext
  // full, legitimately), the global queue non-empty while no P took from it
  // or stole, or the same timer overdue all along.
  static bool unserved(const sample& from, const sample& x) noexcept {
    if (x.npidle == 0 || x.nmspinning != 0) return false;
    for (unsigned i = 0; i < x.np && i < max_watched && i < from.np; ++i)
      if (x.runq[i] > 0 && from.runq[i] > 0 && x.served[i] == from.served[i]) return true;
    if (x.np > max_watched && x.queued > 0 && x.progress == from.progress) return true;
    if (x.globq > 0 && from.globq > 0 && x.global_taken == from.global_taken) return true;
    return x.overdue > 0 && x.earliest == from.earliest;
  }

  void loop() noexcept {
    std::int64_t idle_since = 0, stuck_since = 0;
    sample window;  // the sample that opened the idle window
    std::uint64_t last_progress = ~std::uint64_t{0};
    while (!stop_.load(std::memory_order_relaxed)) {
      os::sleep_ns(5'000'000);
      if (s_.exiting_.load(std::memory_order_acquire)) continue;
      const sample x = take();
      const std::int64_t now = nanotime();
      // A P idle while a G or a due timer waits for one, and nobody serves it.
      if (idle_since != 0 && unserved(window, x)) {
        if (now - idle_since > idle_limit_ms_ * 1'000'000)
          fail(x, "a P stayed idle while queued work or a due timer went unserved", now - idle_since);
      } else if (x.npidle > 0 && x.nmspinning == 0 && (x.queued > 0 || x.overdue > 0)) {
        idle_since = now;  // open a window: this sample is its reference
        window = x;
      } else {
        idle_since = 0;
      }
      // Work queued, and nothing moves anywhere.
      if (x.queued > 0 && x.progress == last_progress) {
        if (stuck_since == 0) stuck_since = now;
        if (now - stuck_since > progress_limit_ms_ * 1'000'000)
          fail(x, "work was queued but no P made progress", now - stuck_since);
      } else {
        stuck_since = 0;
      }
      last_progress = x.progress;
    }
  }

  [[noreturn]] void fail(const sample& x, const char* what, std::int64_t for_ns) const noexcept {
    FILE* f = stderr;
    std::fprintf(f, "goro: stall monitor: %s for %" PRId64 " ms\n", what, for_ns / 1'000'000);
#if defined(GORO_CHAOS)
    std::fprintf(f, "  chaos seed %" PRIu64 "%s\n", chaos::settings().seed,
                 chaos::settings().enabled ? "" : " (injection off)");
#endif
    std::fprintf(f,
                 "  procs %u (P records %u), idle Ps %u, spinning Ms %u, global queue %u, queued in all %" PRIu64
                 ", live goroutines %zu\n",
                 s_.active_ps(), s_.created_ps(), x.npidle, s_.spinning_.count(std::memory_order_relaxed),
                 s_.globq_.size(), x.queued, s_.live_goroutines());
    const std::int64_t until = s_.timer_m_until_.until(std::memory_order_relaxed);
    const std::int64_t now = nanotime();
    std::fprintf(f, "  earliest timer overdue by %" PRId64 " us; timer M: %s %" PRId64 " us; poller waiters %d\n",
                 x.overdue / 1000, until == 0 ? "none," : "sleeps until now +",
                 until == 0 ? std::int64_t{0} : (until - now) / 1000, static_cast<int>(s_.poller_.waiters()));
    for (unsigned i = 0, n = s_.created_ps(); i < n; ++i) {
      const auto* pp = s_.allp_[i];
      const auto st = pp->status.load(std::memory_order_relaxed);
      const char* name = st == Sched::p_status::idle      ? "idle"
                         : st == Sched::p_status::running ? "running"
                                                          : "in goro::blocking";
      const auto* gp = pp->sysmon_curg.load(std::memory_order_acquire);  // execute: sysmon_m, then this (release)
      int m_id = -1;
      {
        std::lock_guard<spinlock> lk(s_.m_record_lock_);  // sysmon_m may name a freed M: see Sched::m_record_lock_
        if (const auto* mm = static_cast<const typename Sched::m*>(pp->sysmon_m.load(std::memory_order_relaxed)))
          m_id = mm->id;
      }
      std::fprintf(f,
                   "  P%u%s: %s, run queue %u, schedtick %u, last ran goroutine %" PRIu64 " on M%d, parks %" PRIu64
                   ", unparks %" PRIu64 ", timers %zu (earliest %" PRId64 " us from now)\n",
                   pp->id, pp->id >= s_.active_ps() ? " (retired)" : "", name, pp->runq.size(),
                   pp->sysmon_schedtick.load(std::memory_order_relaxed), gp ? gp->id : 0, m_id,
                   static_cast<std::uint64_t>(pp->parks.get()), static_cast<std::uint64_t>(pp->unparks.get()),
                   pp->timers.size(), pp->timers.earliest() ? (pp->timers.earliest() - now) / 1000 : 0);
    }
    // The idle-M count is under the scheduler lock; a stuck lock is a
    // finding too, so do not wait for it long.
    bool locked = false;
    for (int i = 0; i < 100 && !(locked = s_.lock_.try_lock()); ++i) {
      os::sleep_ns(1'000'000);
    }
    if (locked) {
      std::fprintf(f, "  idle Ms %zu, Ms %zu, Ms asleep with a locked goroutine %zu\n", s_.nmidle_, s_.allm_.size(),
                   s_.nmlocked_wait_);
      s_.lock_.unlock();
    } else {
      std::fprintf(f, "  the scheduler lock stayed held for 100 ms\n");
    }
    std::fflush(f);
    std::abort();
  }

  Sched& s_;
  std::int64_t idle_limit_ms_ = 100, progress_limit_ms_ = 2000;
  long pid_ = 0;
  os::thread_handle thread_{};
  bool started_ = false;
  std::atomic<bool> stop_{false};
};

#else

template <class Sched>
class stall_monitor {
 public:
  explicit stall_monitor(Sched&) noexcept {}
};

#endif

}  // namespace goro::detail
