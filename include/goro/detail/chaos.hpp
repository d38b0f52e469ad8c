// Chaos injection, a test-only build switch (docs/testing.md). Built with
// -DGORO_CHAOS=<seed>, every GORO_CHAOS_POINT(name) on the scheduler's wake,
// park, hand-off, steal, timer and netpoll paths may stall its thread for a
// while: most do nothing, some spin a random number of pause instructions,
// a few call sched_yield, rarely one sleeps 10-200 us. GORO_CHAOS_IF(n) is
// true one time in n: it randomises choices that any interleaving could make
// (runnext or ring, stealing runnext early, cutting a spin short). Without
// GORO_CHAOS both compile to nothing.
//
// Each thread draws from its own xorshift stream, seeded from the seed and
// the order in which threads first reach a point. The seed also picks a
// profile (which kind of delay dominates) and a set of "hot" points that
// stall eight times as often, so different seeds stretch different windows.
// The environment variable GORO_CHAOS_SEED overrides the built-in seed (the
// soak script loops seeds over one binary); GORO_CHAOS_SEED=off disables
// injection.
#pragma once

#include <cstdint>

#if defined(GORO_CHAOS)

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "../os/os.hpp"
#include "config.hpp"
#endif

namespace goro::detail::chaos {

// FNV-1a of a point's name: its identity for the per-seed hot set.
consteval std::uint32_t site_id(const char* s) {
  std::uint32_t h = 2166136261u;
  for (; *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 16777619u;
  return h;
}

#if defined(GORO_CHAOS)

inline constexpr std::uint64_t built_in_seed = static_cast<std::uint64_t>(GORO_CHAOS);

inline std::uint64_t mix(std::uint64_t x) noexcept {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct config {
  bool enabled = true;
  std::uint64_t seed = built_in_seed;
  // Out of 4096 draws at an ordinary point: thresholds for a rare sleep,
  // a sched_yield, and a pause loop (cumulative, in that order).
  std::uint32_t sleep = 0, yield = 0, pause = 0;
};

inline const config& settings() noexcept {
  static const config c = [] {
    config k;
    if (const char* e = std::getenv("GORO_CHAOS_SEED")) {
      if (std::strcmp(e, "off") == 0)
        k.enabled = false;
      else
        k.seed = std::strtoull(e, nullptr, 0);
    }
    // Profiles: 0 pauses, 1 yields, 2 sleeps, 3 a bit of everything.
    struct profile {
      std::uint32_t sleep, yield, pause;
    };
    constexpr profile profiles[4] = {{2, 40, 1200}, {2, 400, 300}, {16, 40, 300}, {6, 120, 600}};
    const profile& p = profiles[mix(k.seed) % 4];
    k.sleep = p.sleep;
    k.yield = k.sleep + p.yield;
    k.pause = k.yield + p.pause;
    return k;
  }();
  return c;
}

struct thread_state {
  std::uint64_t x = 0;
  std::uint64_t next() noexcept {
    if (x == 0) {
      static std::atomic<std::uint64_t> threads{0};
      x = mix(settings().seed ^ mix(threads.fetch_add(1, std::memory_order_relaxed) + 1)) | 1;
    }
    x ^= x << 13;  // xorshift64
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  }
};

// Not inlined: a point may run on a goroutine that later resumes on another
// thread, so the thread_local must be looked up afresh at every call.
GORO_NOINLINE inline std::uint64_t draw() noexcept {
  static thread_local thread_state st;
  return st.next();
}

// Uniform-ish in [0, n) (n > 0).
inline std::uint32_t choice(std::uint32_t n) noexcept {
  if (!settings().enabled) return 1 % n;
  return static_cast<std::uint32_t>((draw() >> 32) % n);
}

inline bool hot(std::uint32_t site) noexcept { return mix(settings().seed ^ site) % 8 == 0; }

GORO_NOINLINE inline void point(std::uint32_t site) noexcept {
  const config& c = settings();
  if (!c.enabled) return;
  const std::uint64_t r = draw();
  std::uint32_t x = static_cast<std::uint32_t>(r % 4096);
  if (hot(site)) x /= 8;                                          // hot points stall eight times as often
  const std::uint32_t len = static_cast<std::uint32_t>(r >> 40);  // 24 more random bits
  if (x < c.sleep) {
    os::sleep_ns(10'000 + len % 190'000);  // 10-200 us
  } else if (x < c.yield) {
    os::yield_thread();
  } else if (x < c.pause) {
    // Mostly short, one in 16 long (up to ~4096 pauses: tens of us; more
    // often made a 100k-goroutine test take minutes on a loaded machine).
    const std::uint32_t n = (len & 0xf00) == 0 ? (len >> 12) % 4096 : len % 64;
    for (std::uint32_t i = 0; i < n; ++i) cpu_relax();
  }
}

// Fault injection for the chaos machinery's own tests: true where the
// environment variable GORO_CHAOS_FAULT names this fault (e.g. drop_wakep:
// wakep does nothing, a lost wake-up the stall monitor must report).
inline bool fault(const char* name) noexcept {
  static const char* const f = std::getenv("GORO_CHAOS_FAULT");
  return f != nullptr && std::strcmp(f, name) == 0;
}

}  // namespace goro::detail::chaos

#define GORO_CHAOS_FAULT(name) ::goro::detail::chaos::fault(name)
#define GORO_CHAOS_POINT(name)                                                       \
  do {                                                                               \
    constexpr std::uint32_t goro_chaos_site_ = ::goro::detail::chaos::site_id(name); \
    ::goro::detail::chaos::point(goro_chaos_site_);                                  \
  } while (false)
#define GORO_CHAOS_IF(n) (::goro::detail::chaos::choice(n) == 0)

#else  // !GORO_CHAOS

}  // namespace goro::detail::chaos

#define GORO_CHAOS_POINT(name) ((void)0)
#define GORO_CHAOS_IF(n) false
#define GORO_CHAOS_FAULT(name) false

#endif
