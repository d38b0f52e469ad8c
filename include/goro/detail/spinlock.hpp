// A tiny lock for very short critical sections (wait queues of sync
// objects). Its unlock is a single release store and is the last access to
// the lock, so an object holding one may be destroyed as soon as another
// thread has acquired and released it (wait_group relies on this).
#pragma once

#include <atomic>
#include <cstdint>

#include "../os/os.hpp"
#include "config.hpp"

namespace goro::detail {

class spinlock {
 public:
  // The uncontended exchange inline, the waiting out of line: GCC stopped
  // inlining the whole of lock() into the channel operations, and the
  // call cost a channel round trip ~2% of its instructions (pingpong).
  GORO_ALWAYS_INLINE void lock() noexcept {
    if (GORO_LIKELY(!locked_.exchange(true, std::memory_order_acquire))) return;
    lock_contended();
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  GORO_NOINLINE void lock_contended() noexcept {
    // lock() tried the exchange first: the lock's line usually sits in another core's
    // cache (a channel shared by two Ms), and a load first would fetch it
    // shared only to fetch it again exclusive for the exchange. Under
    // contention, spin on loads (test-and-test-and-set) with exponential
    // backoff: 1, 2, 4 ... 64 pauses between looks (Go's lock2 spins
    // procyield(30) between tries). The object a lock guards usually shares
    // its cache line (a channel is one line), so a waiter that looks every
    // few cycles takes the line away from the holder in the middle of its
    // critical section; backing off lets the holder finish, and often run
    // several operations in a row. 4 producers and 4 consumers on one
    // channel at 2 procs: 160 -> 48 ns per item on a VM where cross-core
    // transfers are slow.
    for (unsigned round = 0;; ++round) {
      if (round < backoff_rounds) {
        for (unsigned k = 1u << (round < max_backoff_shift ? round : max_backoff_shift); k != 0; --k) cpu_relax();
      } else if (round < backoff_rounds + yield_rounds) {
        os::yield_thread();  // about 190 pauses gone: the holder was probably descheduled
      } else {
        nap(round - backoff_rounds - yield_rounds);
      }
      if (!locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire)) return;
    }
  }

  static constexpr unsigned max_backoff_shift = 6;  // at most 64 pauses between looks
  static constexpr unsigned backoff_rounds = 8;     // 1+2+...+64+64 pauses, then sched_yield
  static constexpr unsigned yield_rounds = 64;      // then short sleeps
  std::atomic<bool> locked_{false};

  // The holder is off CPU for long (it sleeps, or its thread was preempted
  // or throttled by a cgroup CPU quota): a waiter that keeps yielding stays
  // runnable and burns its CPU share (and the quota the holder needs) for
  // as long as that lasts. Sleep instead, 1 us doubling up to 1 ms (plus
  // the timer slack); no wake-up is needed, the next look finds the lock
  // free. An unlock stays a plain store.
  GORO_NOINLINE static void nap(unsigned n) noexcept {
    os::sleep_ns(1000L << (n < 10 ? n : 10));
  }
};

}  // namespace goro::detail
