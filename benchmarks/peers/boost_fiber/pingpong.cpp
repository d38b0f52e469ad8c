// pingpong peer: Boost.Fiber, work_stealing on --procs threads. Two fibers
// bounce an int over two unbuffered_channels N times. Metric: ns per round trip.
#include "../../bench_common.hpp"
#include "fiber_pool.hpp"

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::uint64_t n = bench::arg_u64(argc, argv, "--n", 1'000'000);
  const bool suspend = bench::arg_flag(argc, argv, "--suspend");
  fiber_bench::run_pool(c.procs, suspend, [&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      boost::fibers::unbuffered_channel<int> ping, pong;
      fiber_bench::wait_group wg;
      wg.add(1);
      fiber_bench::go([&] {
        int v;
        for (std::uint64_t i = 0; i < n; ++i) {
          ping.pop(v);
          pong.push(v + 1);
        }
        wg.done();
      });
      std::int64_t t0 = bench::now_ns();
      int v = 0;
      for (std::uint64_t i = 0; i < n; ++i) {
        ping.push(v);
        pong.pop(v);
      }
      std::int64_t dt = bench::now_ns() - t0;
      wg.wait();
      if (static_cast<std::uint64_t>(v) != n) std::abort();
      if (rep >= c.warmup)
        bench::result("pingpong", "boost_fiber", c.procs, "ns_per_op", double(dt) / double(n),
                      bench::kv("n", double(n)));
    }
  });
}
