// mutex: G goroutines (default 64) each lock and unlock one goro::mutex M
// times (default 20,000), incrementing a shared counter inside and doing a
// little local work (W dependent multiply-adds, default 20) outside, so the
// lock is contended but not held all the time. Metric: ns per lock/unlock
// pair = wall / (G * M). Exercises the fast path, spinning, parking in the
// sema, and starvation hand-offs.
//
//   mutex [--procs 2] [--goroutines 64] [--iters 20000] [--work 20] [--reps 3] [--warmup 1]
#include <goro/goro.hpp>

#include <mutex>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::uint64_t g = bench::arg_u64(argc, argv, "--goroutines", 64);
  const std::uint64_t m = bench::arg_u64(argc, argv, "--iters", 20'000);
  const std::uint64_t w = bench::arg_u64(argc, argv, "--work", 20);

  goro::runtime rt{goro::options{.maxprocs = c.procs}};
  int rc = rt.run([&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      goro::mutex mu;
      std::uint64_t counter = 0;  // guarded by mu
      goro::wait_group wg;
      wg.add(static_cast<int>(g));
      std::int64_t t0 = bench::now_ns();
      for (std::uint64_t i = 0; i < g; ++i)
        goro::go([&, i] {
          std::uint64_t x = i + 1;
          for (std::uint64_t k = 0; k < m; ++k) {
            {
              std::lock_guard<goro::mutex> lk(mu);
              ++counter;
            }
            for (std::uint64_t j = 0; j < w; ++j) x = x * 6364136223846793005ull + 1442695040888963407ull;
          }
          if (x == 0) std::puts("");  // keep the local work
          wg.done();
        });
      wg.wait();
      std::int64_t dt = bench::now_ns() - t0;
      if (counter != g * m) return 1;
      if (rep >= c.warmup)
        bench::result("mutex", "goro", c.procs, "ns_per_op", double(dt) / double(g * m),
                      bench::kv("goroutines", double(g)) + bench::kv("iters", double(m)));
    }
    return 0;
  });
  return rc;
}
