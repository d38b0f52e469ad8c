// imbalance peer: Boost.Fiber, work_stealing on --procs threads. One
// spawner fiber spawns T fibers of ~50 us calibrated spin.
// Metric: efficiency_pct = 100 * T * single_task_ns / (wall * procs).
#include "../../bench_common.hpp"
#include "fiber_pool.hpp"

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::uint64_t tasks = bench::arg_u64(argc, argv, "--tasks", 20'000);
  const double task_us = bench::arg_f64(argc, argv, "--task-us", 50.0);
  const bool suspend = bench::arg_flag(argc, argv, "--suspend");
  const std::uint64_t iters = bench::calibrate_spin(task_us);
  const unsigned probe = 2000;
  fiber_bench::run_pool(c.procs, suspend, [&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      double before = bench::measure_task_ns(iters, probe);
      fiber_bench::wait_group wg;
      wg.add(static_cast<long>(tasks));
      std::int64_t t0 = bench::now_ns();
      fiber_bench::go([&wg, tasks, iters] {
        for (std::uint64_t i = 0; i < tasks; ++i)
          fiber_bench::go([&wg, iters] {
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
        bench::result("imbalance", "boost_fiber", c.procs, "efficiency_pct", eff,
                      bench::kv("task_us", single / 1000) + bench::kv("wall_ms", dt / 1e6) +
                          bench::kv("tasks", double(tasks)));
    }
  });
}
