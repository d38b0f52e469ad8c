// Clocks and sleeping (Go's nanotime / usleep, os_windows.go). The precise
// monotonic clock, detail::nanotime, is std::chrono::steady_clock
// (QueryPerformanceCounter in libstdc++ on Windows) and needs nothing here.
#pragma once

#include <chrono>
#include <cstdint>

#include "thread.hpp"
#include "windows_h.hpp"

namespace goro::detail::os {

// The tick count (milliseconds, advanced at the system timer's tick, 1 to
// 15.6 ms), in nanoseconds: cheaper than the precise clock. Only compared
// with itself (wait durations).
inline std::int64_t coarse_nanotime() noexcept {
  return static_cast<std::int64_t>(GetTickCount64()) * 1'000'000;
}

// A high-resolution waitable timer for the calling thread (Windows 10
// 1803+, and Wine), created on first use and closed when the thread exits
// (thread_exit_slot, thread.hpp: not a thread_local object, whose
// destructor read the handle from freed memory); null where the system has
// none, and sleep_ns then falls back to Sleep. Go's usleep2HighRes does the
// same.
inline void WINAPI close_sleep_timer(void* h) noexcept {
  if (h != INVALID_HANDLE_VALUE) CloseHandle(h);
}
inline HANDLE thread_sleep_timer() noexcept {
  constexpr DWORD high_resolution = 0x2;  // CREATE_WAITABLE_TIMER_HIGH_RESOLUTION
  static thread_exit_slot slot{&close_sleep_timer};
  if (!slot.usable()) return nullptr;  // no slot left: no timer (it could not be closed)
  void* h = slot.get();
  if (h == nullptr) {
    h = CreateWaitableTimerExW(nullptr, nullptr, high_resolution, TIMER_ALL_ACCESS);
    if (h == nullptr) h = INVALID_HANDLE_VALUE;  // none: not tried again on this thread
    if (!slot.set(h)) {
      if (h != INVALID_HANDLE_VALUE) CloseHandle(h);
      return nullptr;
    }
  }
  return h == INVALID_HANDLE_VALUE ? nullptr : static_cast<HANDLE>(h);
}

// Sleeps the calling thread for at least ns nanoseconds by the precise
// clock: on the high-resolution timer to within about a microsecond where
// there is one, else with Sleep, in whole milliseconds rounded up (then to
// the system timer's tick). Either wait may end a little before the
// precise clock says (they count on another clock: under Wine a 10 ms wait
// was seen to end after 9.3 ms), so the rest is slept again.
inline void sleep_ns(long long ns) noexcept {
  if (ns <= 0) {
    SwitchToThread();
    return;
  }
  using clock = std::chrono::steady_clock;
  const clock::time_point until = clock::now() + std::chrono::nanoseconds(ns);
  for (;;) {
    HANDLE t = thread_sleep_timer();
    LARGE_INTEGER due;
    due.QuadPart = -((ns + 99) / 100);  // negative: relative, in 100 ns units
    if (!t || !SetWaitableTimer(t, &due, 0, nullptr, nullptr, FALSE) || WaitForSingleObject(t, INFINITE) != WAIT_OBJECT_0) {
      const long long ms = (ns + 999'999) / 1'000'000;
      Sleep(ms >= static_cast<long long>(INFINITE) ? INFINITE - 1 : static_cast<DWORD>(ms));
    }
    const clock::time_point now = clock::now();
    if (now >= until) return;
    ns = std::chrono::duration_cast<std::chrono::nanoseconds>(until - now).count();
  }
}

}  // namespace goro::detail::os
