// The stall monitor's test subject (tests/stall_monitor_test.cpp): built as
// a chaos program whatever the preset, so the monitor runs.
//   stall lost_wakeup  2 procs; a goroutine spawns another and spins until it
//                      ran. With GORO_CHAOS_FAULT=drop_wakep no M is woken
//                      for it: the monitor must abort (idle P, queued G).
//   stall hog          1 proc; a goroutine spins without a goro call while
//                      another is queued: no progress, the monitor aborts.
// Exits 0 when the spawned goroutine ran, 3 when nothing stopped the spin
// within 5 s (the monitor missed the stall).
#ifndef GORO_CHAOS
#define GORO_CHAOS 1
#endif
#include <goro/goro.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  const bool hog = argc > 1 && std::strcmp(argv[1], "hog") == 0;
  int rc = 0;
  goro::runtime rt{goro::options{hog ? 1u : 2u}};
  rt.run([&] {
    std::atomic<bool> ran{false};
    goro::go([&] { ran.store(true); });
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!ran.load() && std::chrono::steady_clock::now() < until) {
    }
    if (!ran.load()) {
      std::fprintf(stderr, "stall helper: the spawned goroutine did not run within 5 s\n");
      rc = 3;
      while (!ran.load()) goro::yield();
    }
  });
  return rc;
}
