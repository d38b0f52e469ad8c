// imbalance: one spawner goroutine spawns T tasks (default 20,000), each a
// calibrated busy spin of about 50 us (not a sleep). Idle Ps must find the
// work by stealing from the spawner's P.
// Metric: parallel efficiency in percent =
//   100 * T * single_task_ns / (wall_ns * procs)
// where single_task_ns is the mean of the same spin run serially on the
// main thread before the parallel run (and re-measured after; the mean of
// both is used, so frequency drift shows up in neither direction).
//
//   imbalance [--procs 2] [--tasks 20000] [--task-us 50] [--reps 3] [--warmup 1]
#include <goro/goro.hpp>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::uint64_t tasks = bench::arg_u64(argc, argv, "--tasks", 20'000);
  const double task_us = bench::arg_f64(argc, argv, "--task-us", 50.0);
  const std::uint64_t iters = bench::calibrate_spin(task_us);
  const unsigned probe = 2000;  // serial runs to time one task (~0.1 s)

  goro::runtime rt{goro::options{.maxprocs = c.procs}};
  rt.run([&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      double before = bench::measure_task_ns(iters, probe);
      goro::wait_group wg;
      wg.add(static_cast<int>(tasks));
      std::int64_t t0 = bench::now_ns();
      goro::go([&wg, tasks, iters] {
        for (std::uint64_t i = 0; i < tasks; ++i)
          goro::go([&wg, iters] {
            bench::consume(bench::spin(iters));
            wg.done();
          });
      });
      wg.wait();
      std::int64_t dt = bench::now_ns() - t0;
      double after = bench::measure_task_ns(iters, probe);
      double single = (before + after) / 2;
      double eff = 100.0 * double(tasks) * single / (double(dt) * c.procs);
      if (rep >= c.warmup)
        bench::result("imbalance", "goro", c.procs, "efficiency_pct", eff,
                      bench::kv("task_us", single / 1000) + bench::kv("wall_ms", dt / 1e6) +
                          bench::kv("tasks", double(tasks)));
    }
  });
}
