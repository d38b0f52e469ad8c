// fib: fib(27) as a spawn tree. Every call with n >= 2 spawns one goroutine
// for fib(n-1), computes fib(n-2) itself, and waits on a wait_group for the
// child (the shape of the classic Cilk/TBB fib; the Go, Boost.Fiber and
// oneTBB peers do exactly the same). fib(n < 2) returns n.
// Metric: ns per task = wall / number of goroutines spawned (317,810 for 27).
//
//   fib [--procs 2] [--depth 27] [--reps 3] [--warmup 1]
#include <goro/goro.hpp>

#include "bench_common.hpp"

static std::uint64_t fib(unsigned n) {
  if (n < 2) return n;
  std::uint64_t x = 0;
  goro::wait_group wg;
  wg.add(1);
  goro::go([&x, &wg, n] {
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
  const std::uint64_t tasks = bench::fib_spawns(depth);
  const std::uint64_t expect = bench::fib_serial(depth);

  goro::runtime rt{goro::options{.maxprocs = c.procs}};
  int rc = rt.run([&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      std::int64_t t0 = bench::now_ns();
      std::uint64_t r = fib(depth);
      std::int64_t dt = bench::now_ns() - t0;
      if (r != expect) {
        std::fprintf(stderr, "fib: wrong result %llu, expected %llu\n",
                     static_cast<unsigned long long>(r), static_cast<unsigned long long>(expect));
        return 1;
      }
      if (rep >= c.warmup)
        bench::result("fib", "goro", c.procs, "ns_per_op", double(dt) / double(tasks),
                      bench::kv("depth", depth) + bench::kv("tasks", double(tasks)));
    }
    return 0;
  });
  return rc;
}
