// sleepers: N goroutines (default 100,000) each sleep a random 1-10 ms
// (uniform, fixed seed) and then call wg.done(); the main goroutine spawns
// them all and waits. Metrics: wall_ms (spawn to last wake-up; the floor
// is ~10 ms plus spawning) and cpu_ms (process CPU time, user + system,
// all threads, over the same window) — timer heaps, wake-ups, and idle Ms
// that must sleep rather than poll between timers.
//
//   sleepers [--procs 2] [--n 100000] [--reps 3] [--warmup 1]
#include <goro/goro.hpp>

#include <chrono>
#include <random>
#include <vector>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::uint64_t n = bench::arg_u64(argc, argv, "--n", 100'000);

  std::mt19937_64 rng(1);
  std::vector<std::chrono::microseconds> durations(n);
  for (auto& d : durations) d = std::chrono::microseconds(1000 + rng() % 9001);

  goro::runtime rt{goro::options{.maxprocs = c.procs}};
  rt.run([&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      goro::wait_group wg;
      wg.add(static_cast<std::int64_t>(n));
      std::int64_t c0 = bench::process_cpu_ns(), t0 = bench::now_ns();
      for (std::uint64_t i = 0; i < n; ++i) {
        auto d = durations[i];
        goro::go([&wg, d] {
          goro::sleep_for(d);
          wg.done();
        });
      }
      wg.wait();
      std::int64_t dt = bench::now_ns() - t0, dc = bench::process_cpu_ns() - c0;
      if (rep >= c.warmup)
        bench::result("sleepers", "goro", c.procs, "wall_ms", double(dt) / 1e6,
                      bench::kv("cpu_ms", double(dc) / 1e6) + bench::kv("n", double(n)));
    }
  });
}
