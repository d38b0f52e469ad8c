// spawn peer: oneTBB task_group, --procs threads (tbb::global_control). The
// main thread runs N tasks into one task_group, each decrementing a shared
// counter (the wait_group's done()), then task_group::wait().
// Metric: ns per task.
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_group.h>

#include <atomic>

#include "../../bench_common.hpp"

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::uint64_t n = bench::arg_u64(argc, argv, "--n", 1'000'000);
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism, c.procs);
  for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
    std::atomic<std::int64_t> pending{static_cast<std::int64_t>(n)};
    tbb::task_group tg;
    std::int64_t t0 = bench::now_ns();
    for (std::uint64_t i = 0; i < n; ++i) tg.run([&pending] { pending.fetch_sub(1, std::memory_order_acq_rel); });
    tg.wait();
    std::int64_t dt = bench::now_ns() - t0;
    if (pending.load() != 0) return 1;
    if (rep >= c.warmup)
      bench::result("spawn", "tbb", c.procs, "ns_per_op", double(dt) / double(n), bench::kv("n", double(n)));
  }
}
