// Thin wrappers over Linux futexes, and the one-shot `note` an idle M
// sleeps on (Go's note: notesleep / notewakeup / noteclear, lock_futex.go).
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <ctime>

#include "config.hpp"

namespace goro::detail {

// Sleeps while *addr == expected (or until woken, or `timeout_ns` passes
// when >= 0). Spurious returns are allowed: callers loop.
inline void futex_wait(std::atomic<std::uint32_t>* addr, std::uint32_t expected, long long timeout_ns = -1) noexcept {
  timespec ts{};
  timespec* tsp = nullptr;
  if (timeout_ns >= 0) {
    ts.tv_sec = static_cast<time_t>(timeout_ns / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(timeout_ns % 1'000'000'000);
    tsp = &ts;
  }
  const long r = syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), FUTEX_WAIT_PRIVATE, expected, tsp, nullptr, 0);
#if GORO_TSAN
  // ThreadSanitizer runs a program's signal handler only inside a call it
  // intercepts, and the raw futex call is not one: a signal that woke this
  // wait (EINTR) would otherwise wait until the thread next makes such a
  // call, which an idle M may not do for seconds (the SIGQUIT dump ran
  // after the program had moved on). usleep is intercepted and runs it.
  if (r != 0 && errno == EINTR) ::usleep(0);
#else
  (void)r;
#endif
}

// Wakes up to `count` threads sleeping on addr. Waking an address whose
// object is already gone is harmless: FUTEX_WAKE does not touch memory.
inline void futex_wake(std::atomic<std::uint32_t>* addr, int count = INT_MAX) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
}

// One-shot wake-up: sleep() returns once wake() was called (before or after).
// clear() re-arms it; only the sleeper clears.
class note {
 public:
  void clear() noexcept { key_.store(0, std::memory_order_relaxed); }
  void wake() noexcept {
    if (key_.exchange(1, std::memory_order_acq_rel) == 0) futex_wake(&key_, 1);
  }
  void sleep() noexcept {
    while (key_.load(std::memory_order_acquire) == 0) futex_wait(&key_, 0);
  }
  // True once wake() was called (since the last clear()).
  bool is_woken() const noexcept { return key_.load(std::memory_order_acquire) != 0; }
  // Sleeps at most timeout_ns; returns true if woken.
  bool sleep_for(long long timeout_ns) noexcept {
    if (key_.load(std::memory_order_acquire) == 0) futex_wait(&key_, 0, timeout_ns);
    return key_.load(std::memory_order_acquire) != 0;
  }

 private:
  std::atomic<std::uint32_t> key_{0};
};

}  // namespace goro::detail
