// A tiny lock for very short critical sections (wait queues of sync
// objects). Its unlock is a single release store and is the last access to
// the lock, so an object holding one may be destroyed as soon as another
// thread has acquired and released it (wait_group relies on this).
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>

#include "config.hpp"

namespace goro::detail {

class spinlock {
 public:
  void lock() noexcept {
    // The exchange first: the lock's line usually sits in another core's
    // cache (a channel shared by two Ms), and a load first would fetch it
    // shared only to fetch it again exclusive for the exchange. Under
    // contention, spin on loads (test-and-test-and-set).
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    for (unsigned spins = 0;; ++spins) {
      if (!locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire)) return;
      if (spins < 64)
        cpu_relax();
      else
        sched_yield();  // the holder was probably descheduled
    }
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace goro::detail
