// Parking a thread on a 32-bit word: Linux futexes (Go's futexsleep /
// futexwakeup, os_linux.go; used as lock_futex.go uses them). The portable
// note built on these is detail/note.hpp.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <ctime>

#include "../../detail/config.hpp"

namespace goro::detail::os {

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
  const long r =
      syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), FUTEX_WAIT_PRIVATE, expected, tsp, nullptr, 0);
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

}  // namespace goro::detail::os
