// The one-shot `note` an idle M sleeps on (Go's note: notesleep /
// notewakeup / noteclear, lock_futex.go), on the OS layer's futex.
#pragma once

#include <atomic>
#include <cstdint>

#include "../os/os.hpp"
#include "config.hpp"

namespace goro::detail {

// One-shot wake-up: sleep() returns once wake() was called (before or after).
// clear() re-arms it; only the sleeper clears.
class note {
 public:
  void clear() noexcept { key_.store(0, std::memory_order_relaxed); }
  void wake() noexcept {
    if (key_.exchange(1, std::memory_order_acq_rel) == 0) os::futex_wake(&key_, 1);
  }
  void sleep() noexcept {
    while (key_.load(std::memory_order_acquire) == 0) os::futex_wait(&key_, 0);
  }
  // True once wake() was called (since the last clear()).
  bool is_woken() const noexcept { return key_.load(std::memory_order_acquire) != 0; }
  // Sleeps at most timeout_ns; returns true if woken.
  bool sleep_for(long long timeout_ns) noexcept {
    if (key_.load(std::memory_order_acquire) == 0) os::futex_wait(&key_, 0, timeout_ns);
    return key_.load(std::memory_order_acquire) != 0;
  }

 private:
  std::atomic<std::uint32_t> key_{0};
};

}  // namespace goro::detail
