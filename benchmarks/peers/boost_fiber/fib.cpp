// fib peer: Boost.Fiber, work_stealing on --procs threads. Same spawn tree
// as benchmarks/fib.cpp: one fiber for fib(n-1), fib(n-2) inline, wait.
// Metric: ns per task = wall / fibers spawned.
#include "../../bench_common.hpp"
#include "fiber_pool.hpp"

static std::uint64_t fib(unsigned n) {
  if (n < 2) return n;
  std::uint64_t x = 0;
  fiber_bench::wait_group wg;
  wg.add(1);
  fiber_bench::go([&x, &wg, n] {
    x = fib(n - 1);
    wg.done();
  });
  std::uint64_t y = fib(n - 2);
  wg.wait();
  return x + y;
}

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const auto depth = static_cast<unsigned>(bench::arg_u64(argc, argv, "--depth", 27));
  const bool suspend = bench::arg_flag(argc, argv, "--suspend");
  const std::uint64_t tasks = bench::fib_spawns(depth);
  const std::uint64_t expect = bench::fib_serial(depth);
  int rc = 0;
  fiber_bench::run_pool(c.procs, suspend, [&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      std::int64_t t0 = bench::now_ns();
      std::uint64_t r = fib(depth);
      std::int64_t dt = bench::now_ns() - t0;
      if (r != expect) {
        std::fprintf(stderr, "fib: wrong result\n");
        rc = 1;
        return;
      }
      if (rep >= c.warmup)
        bench::result("fib", "boost_fiber", c.procs, "ns_per_op", double(dt) / double(tasks),
                      bench::kv("depth", depth) + bench::kv("tasks", double(tasks)));
    }
  });
  return rc;
}
