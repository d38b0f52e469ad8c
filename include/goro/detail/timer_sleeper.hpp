// The deadline of a thread that sleeps until the next timer, and the
// handshake that keeps a timer added meanwhile from being slept past
// (Go: wakeNetPoller against the M blocked in netpoll). Two sleepers use
// it: the scheduler's timer M (sched_idle.hpp park_idle / wake_for_timer,
// sched_mpool.hpp stopm) and the process-wide timer thread of plain
// threads (time.hpp thread_timers).
//
// The "publish, then check" pair, stated once here:
//   sleeper: publish(until), then read the heaps' earliest() again and
//            sleep only if look_again() says nothing is due before `until`;
//   adder:   publish the timer (its heap's earliest(), seq_cst), then
//            wake the sleeper if must_wake(when).
// Both publications and both reads are seq_cst, so either the adder sees
// the sleeper's deadline and wakes it when the new timer is earlier, or
// the sleeper sees the new timer and does not sleep past it.
#pragma once

#include <atomic>
#include <cstdint>

namespace goro::detail {

class timer_sleeper {
 public:
  // Sleeper: about to sleep until `until` (INT64_MAX: no timer pending,
  // but adders must still wake it).
  void publish(std::int64_t until) noexcept { until_.store(until, std::memory_order_seq_cst); }
  // Sleeper: after publish(until), whether the earliest pending timer
  // (0: none) is due before `until`: then look again instead of sleeping.
  static bool look_again(std::int64_t earliest, std::int64_t until) noexcept {
    return earliest != 0 && earliest < until;
  }
  // Sleeper: awake (adders need not wake it).
  void clear() noexcept { until_.store(0, std::memory_order_seq_cst); }

  // Adder, after publishing a timer due at `when`: whether the sleeper
  // would sleep past it.
  bool must_wake(std::int64_t when) const noexcept {
    const std::int64_t until = until_.load(std::memory_order_seq_cst);
    return until != 0 && when < until;
  }
  // The published deadline (0: nobody sleeps on one).
  std::int64_t until(std::memory_order order = std::memory_order_seq_cst) const noexcept {
    return until_.load(order);
  }

 private:
  std::atomic<std::int64_t> until_{0};
};

}  // namespace goro::detail
