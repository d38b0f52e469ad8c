// yield peer: Boost.Fiber, work_stealing on --procs threads. G fibers each
// call boost::this_fiber::yield() Y times. Metric: ns per yield.
#include "../../bench_common.hpp"
#include "fiber_pool.hpp"

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::uint64_t g = bench::arg_u64(argc, argv, "--goroutines", 1000);
  const std::uint64_t y = bench::arg_u64(argc, argv, "--yields", 10'000);
  const bool suspend = bench::arg_flag(argc, argv, "--suspend");
  fiber_bench::run_pool(c.procs, suspend, [&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      fiber_bench::wait_group wg;
      wg.add(static_cast<long>(g));
      std::int64_t t0 = bench::now_ns();
      for (std::uint64_t i = 0; i < g; ++i)
        fiber_bench::go([&wg, y] {
          for (std::uint64_t k = 0; k < y; ++k) boost::this_fiber::yield();
          wg.done();
        });
      wg.wait();
      std::int64_t dt = bench::now_ns() - t0;
      if (rep >= c.warmup)
        bench::result("yield", "boost_fiber", c.procs, "ns_per_op", double(dt) / double(g * y),
                      bench::kv("goroutines", double(g)) + bench::kv("yields", double(y)));
    }
  });
}
