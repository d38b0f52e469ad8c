// idle_cpu: CPU used by a runtime that has nothing to run.
// A runtime with 2 Ps runs a main goroutine that spawns goroutines (so every
// P and M has been woken) and waits for them; then the main goroutine blocks
// on a wait_group that a plain std::thread releases after --ms (default
// 1000) ms. Process CPU time (getrusage; GetProcessTimes on Windows; user
// + system, all threads) is sampled by that thread at the start and end of
// the idle window.
// Metric: cpu_pct = 100 * cpu_time / wall of the window (percent of one
// core; target ~0).
//
//   idle_cpu [--procs 2] [--ms 1000] [--reps 3] [--warmup 0]
#include <goro/goro.hpp>

#include <thread>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  c.warmup = static_cast<unsigned>(bench::arg_u64(argc, argv, "--warmup", 0));
  const std::uint64_t ms = bench::arg_u64(argc, argv, "--ms", 1000);

  goro::runtime rt{goro::options{.maxprocs = c.procs, .detect_deadlock = false}};  // a plain thread releases main
  rt.run([&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      {  // some work first, so that every P has run something
        goro::wait_group busy;
        busy.add(100);
        for (int i = 0; i < 100; ++i)
          goro::go([&busy] {
            bench::consume(bench::spin(10'000));
            busy.done();
          });
        busy.wait();
      }
      goro::wait_group idle;
      idle.add(1);
      double pct = 0, wall_ms = 0;
      std::thread releaser([&] {
        std::int64_t c0 = bench::process_cpu_ns(), t0 = bench::now_ns();
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        std::int64_t c1 = bench::process_cpu_ns(), t1 = bench::now_ns();
        pct = 100.0 * double(c1 - c0) / double(t1 - t0);
        wall_ms = double(t1 - t0) / 1e6;
        idle.done();
      });
      idle.wait();  // nothing runnable in the runtime until the thread says so
      releaser.join();
      if (rep >= c.warmup)
        bench::result("idle_cpu", "goro", c.procs, "cpu_pct", pct, bench::kv("wall_ms", wall_ms));
    }
  });
}
