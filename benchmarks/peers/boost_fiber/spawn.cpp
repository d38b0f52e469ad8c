// spawn peer: Boost.Fiber, work_stealing on --procs threads. N detached
// fibers each call wg.done(); the main fiber waits. Metric: ns per fiber.
#include "../../bench_common.hpp"
#include "fiber_pool.hpp"

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::uint64_t n = bench::arg_u64(argc, argv, "--n", 1'000'000);
  const bool suspend = bench::arg_flag(argc, argv, "--suspend");
  fiber_bench::run_pool(c.procs, suspend, [&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      fiber_bench::wait_group wg;
      wg.add(static_cast<long>(n));
      std::int64_t t0 = bench::now_ns();
      for (std::uint64_t i = 0; i < n; ++i) fiber_bench::go([&wg] { wg.done(); });
      wg.wait();
      std::int64_t dt = bench::now_ns() - t0;
      if (rep >= c.warmup)
        bench::result("spawn", "boost_fiber", c.procs, "ns_per_op", double(dt) / double(n), bench::kv("n", double(n)));
    }
  });
}
