// spawn: N goroutines (default 1,000,000) that each call wg.done() on one
// wait_group; the main goroutine spawns them all, then waits.
// Metric: ns per goroutine = wall / N (spawn + run + exit).
//
//   spawn [--procs 2] [--n 1000000] [--reps 3] [--warmup 1]
#include <goro/goro.hpp>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::uint64_t n = bench::arg_u64(argc, argv, "--n", 1'000'000);

  goro::runtime rt{goro::options{.maxprocs = c.procs}};
  rt.run([&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      goro::wait_group wg;
      wg.add(static_cast<int>(n));
      std::int64_t t0 = bench::now_ns();
      for (std::uint64_t i = 0; i < n; ++i) goro::go([&wg] { wg.done(); });
      wg.wait();
      std::int64_t dt = bench::now_ns() - t0;
      if (rep >= c.warmup)
        bench::result("spawn", "goro", c.procs, "ns_per_op", double(dt) / double(n),
                      bench::kv("n", double(n)));
    }
  });
}
