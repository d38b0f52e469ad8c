// yield: G goroutines (default 1,000) each call goro::yield() Y times
// (default 10,000). Metric: ns per yield = wall / (G * Y).
//
//   yield [--procs 2] [--goroutines 1000] [--yields 10000] [--reps 3] [--warmup 1]
#include <goro/goro.hpp>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::uint64_t g = bench::arg_u64(argc, argv, "--goroutines", 1000);
  const std::uint64_t y = bench::arg_u64(argc, argv, "--yields", 10'000);

  goro::runtime rt{goro::options{.maxprocs = c.procs}};
  rt.run([&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      goro::wait_group wg;
      wg.add(static_cast<int>(g));
      std::int64_t t0 = bench::now_ns();
      for (std::uint64_t i = 0; i < g; ++i)
        goro::go([&wg, y] {
          for (std::uint64_t k = 0; k < y; ++k) goro::yield();
          wg.done();
        });
      wg.wait();
      std::int64_t dt = bench::now_ns() - t0;
      if (rep >= c.warmup)
        bench::result("yield", "goro", c.procs, "ns_per_op", double(dt) / double(g * y),
                      bench::kv("goroutines", double(g)) + bench::kv("yields", double(y)));
    }
  });
}
