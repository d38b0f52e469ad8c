// Clocks and sleeping (Go's nanotime1 / usleep, os_linux.go and
// sys_linux_*.s). The runtime's precise monotonic clock, detail::nanotime,
// is std::chrono::steady_clock and needs nothing from here.
#pragma once

#include <time.h>

#include <cstdint>

namespace goro::detail::os {

// CLOCK_MONOTONIC at tick granularity (a few ms), in nanoseconds: cheaper
// than the precise clock. Only compared with itself (wait durations).
inline std::int64_t coarse_nanotime() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Sleeps the calling thread for about ns nanoseconds (at least that long,
// unless a signal interrupts it; plus the kernel's timer slack).
inline void sleep_ns(long long ns) noexcept {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  nanosleep(&ts, nullptr);
}

}  // namespace goro::detail::os
