// Clocks for the preemption policy: the clock_like concept, a manual clock
// for tests and frame-budgeted engines, and a cheap cycle-counter clock.
#pragma once

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstdint>

#include "os/os.hpp"

namespace goro {

// The standard Clock requirements.
template <class C>
concept clock_like = requires {
  typename C::rep;
  typename C::period;
  typename C::duration;
  typename C::time_point;
  { C::is_steady } -> std::convertible_to<bool>;
  { C::now() } -> std::same_as<typename C::time_point>;
};

// A clock that only moves when told to: time slices become deterministic.
struct manual_clock {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<manual_clock>;
  static constexpr bool is_steady = true;

  static time_point now() noexcept { return time_point(duration(ticks().load(std::memory_order_acquire))); }
  static void advance(duration d) noexcept { ticks().fetch_add(d.count(), std::memory_order_acq_rel); }

 private:
  static std::atomic<rep>& ticks() noexcept {
    static std::atomic<rep> t{0};
    return t;
  }
};

// Reads the CPU's cycle/virtual counter (rdtsc, cntvct_el0, rdtime),
// converted to nanoseconds with a frequency calibrated once against
// steady_clock. Cheaper than a vDSO clock_gettime; monotonic on machines
// with an invariant TSC.
struct cycle_clock {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<cycle_clock>;
  static constexpr bool is_steady = true;

  static std::uint64_t ticks() noexcept {
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
    std::uint64_t v;
    asm volatile("mrs %0, cntvct_el0" : "=r"(v));
    return v;
#elif defined(__riscv)
    // The time CSR (Linux lets user mode read it; the frequency is
    // platform-defined, so calibrate() measures it).
    std::uint64_t v;
    asm volatile("rdtime %0" : "=r"(v));
    return v;
#endif
  }
  static time_point now() noexcept {
    static const double ns_per_tick = calibrate();
    return time_point(duration(static_cast<rep>(static_cast<double>(ticks()) * ns_per_tick)));
  }

 private:
  static double calibrate() noexcept {
#if defined(__aarch64__)
    std::uint64_t freq;
    asm volatile("mrs %0, cntfrq_el0" : "=r"(freq));
    if (freq != 0) return 1e9 / static_cast<double>(freq);
#endif
    auto t0 = std::chrono::steady_clock::now();
    std::uint64_t c0 = ticks();
    detail::os::sleep_ns(2'000'000);
    auto t1 = std::chrono::steady_clock::now();
    std::uint64_t c1 = ticks();
    double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
    return c1 > c0 ? ns / static_cast<double>(c1 - c0) : 1.0;
  }
};

static_assert(clock_like<std::chrono::steady_clock>);
static_assert(clock_like<manual_clock>);
static_assert(clock_like<cycle_clock>);

}  // namespace goro
