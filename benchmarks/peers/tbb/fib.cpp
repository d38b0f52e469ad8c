// fib peer: oneTBB task_group, --procs threads. Same spawn tree as
// benchmarks/fib.cpp: run fib(n-1) as a task, fib(n-2) inline, wait.
// Metric: ns per task = wall / tasks spawned.
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_group.h>

#include "../../bench_common.hpp"

static std::uint64_t fib(unsigned n) {
  if (n < 2) return n;
  std::uint64_t x = 0;
  tbb::task_group tg;
  tg.run([&x, n] { x = fib(n - 1); });
  std::uint64_t y = fib(n - 2);
  tg.wait();
  return x + y;
}

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const auto depth = static_cast<unsigned>(bench::arg_u64(argc, argv, "--depth", 27));
  const std::uint64_t tasks = bench::fib_spawns(depth);
  const std::uint64_t expect = bench::fib_serial(depth);
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism, c.procs);
  for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
    std::int64_t t0 = bench::now_ns();
    std::uint64_t r = fib(depth);
    std::int64_t dt = bench::now_ns() - t0;
    if (r != expect) return 1;
    if (rep >= c.warmup)
      bench::result("fib", "tbb", c.procs, "ns_per_op", double(dt) / double(tasks),
                    bench::kv("depth", depth) + bench::kv("tasks", double(tasks)));
  }
}
