// imbalance peer: oneTBB task_group, --procs threads. One spawner task runs
// T tasks of ~50 us calibrated spin into the same task_group.
// Metric: efficiency_pct = 100 * T * single_task_ns / (wall * procs).
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_group.h>

#include "../../bench_common.hpp"

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::uint64_t tasks = bench::arg_u64(argc, argv, "--tasks", 20'000);
  const double task_us = bench::arg_f64(argc, argv, "--task-us", 50.0);
  const std::uint64_t iters = bench::calibrate_spin(task_us);
  const unsigned probe = 2000;
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism, c.procs);
  for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
    double before = bench::measure_task_ns(iters, probe);
    tbb::task_group tg;
    std::int64_t t0 = bench::now_ns();
    tg.run([&tg, tasks, iters] {
      for (std::uint64_t i = 0; i < tasks; ++i) tg.run([iters] { bench::consume(bench::spin(iters)); });
    });
    tg.wait();
    std::int64_t dt = bench::now_ns() - t0;
    double after = bench::measure_task_ns(iters, probe);
    double single = (before + after) / 2;
    double eff = 100.0 * double(tasks) * single / (double(dt) * c.procs);
    if (rep >= c.warmup)
      bench::result("imbalance", "tbb", c.procs, "efficiency_pct", eff,
                    bench::kv("task_us", single / 1000) + bench::kv("wall_ms", dt / 1e6) +
                        bench::kv("tasks", double(tasks)));
  }
}
