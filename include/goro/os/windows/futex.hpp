// Parking a thread on a 32-bit word: WaitOnAddress / WakeByAddressSingle /
// WakeByAddressAll (Windows 8+, synchronization.lib: goro's CMake target
// links it; other builds add -lsynchronization). The same contract as
// linux/futex.hpp; the portable note on top is detail/note.hpp. (Go parks
// Ms on per-M event objects instead, os_windows.go semasleep: it predates
// WaitOnAddress and runs on Windows 7.)
#pragma once

#include <atomic>
#include <climits>
#include <cstdint>

#include "windows_h.hpp"

namespace goro::detail::os {

// Sleeps while *addr == expected (compared by the system against the value
// as it goes to sleep), until woken or about timeout_ns (>= 0) passes.
// WaitOnAddress counts in milliseconds: a timeout is rounded up, never
// down (a timed park must not return early for good), and the wait then
// ends on the system timer's tick (1 ms to 15.6 ms on Windows, depending on
// timeBeginPeriod; Wine waits on the Linux host's clock). Spurious returns
// are allowed: callers loop.
inline void futex_wait(std::atomic<std::uint32_t>* addr, std::uint32_t expected, long long timeout_ns = -1) noexcept {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  DWORD ms = INFINITE;
  if (timeout_ns >= 0) {
    const long long m = (timeout_ns + 999'999) / 1'000'000;
    ms = m >= static_cast<long long>(INFINITE) ? INFINITE - 1 : static_cast<DWORD>(m);
  }
  WaitOnAddress(reinterpret_cast<volatile void*>(addr), &expected, sizeof expected, ms);
}

// Wakes up to `count` threads sleeping on addr. Harmless when addr's object
// is already gone: the wake only looks the address up in the system's wait
// table, it does not touch the memory.
inline void futex_wake(std::atomic<std::uint32_t>* addr, int count = INT_MAX) noexcept {
  if (count == 1) {
    WakeByAddressSingle(reinterpret_cast<void*>(addr));
  } else if (count == INT_MAX) {
    WakeByAddressAll(reinterpret_cast<void*>(addr));
  } else {
    for (int i = 0; i < count; ++i) WakeByAddressSingle(reinterpret_cast<void*>(addr));
  }
}

}  // namespace goro::detail::os
