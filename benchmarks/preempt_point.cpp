// preempt_point: the cost of goro::preempt_point() in a tight loop inside
// a goroutine (nothing requests preemption most of the time; sysmon's
// requests every time slice are included). Metric: ns per call.
//
//   preempt_point [--n 500000000] [--reps 3] [--warmup 1]
#include <goro/goro.hpp>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  c.procs = 1;
  const std::uint64_t n = bench::arg_u64(argc, argv, "--n", 500'000'000);
  goro::runtime rt{goro::options{.maxprocs = 1}};
  rt.run([&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      // Thread CPU time too: the machine may be shared, wall time includes
      // time other processes took. The goroutine may be preempted and
      // resumed on another thread (same P): it is summed per stretch on
      // one thread.
      std::int64_t t0 = bench::now_ns();
      std::int64_t cpu = 0;
      const std::uint64_t chunk = 1'000'000;
      for (std::uint64_t done = 0; done < n; done += chunk) {
        std::int64_t c0 = bench::thread_cpu_ns();
        for (std::uint64_t i = 0; i < chunk; ++i) goro::preempt_point();
        cpu += bench::thread_cpu_ns() - c0;
      }
      std::int64_t dt = bench::now_ns() - t0;
      if (rep >= c.warmup)
        bench::result("preempt_point", "goro", 1, "ns_per_op", double(dt) / double(n),
                      bench::kv("calls", double(n)) + bench::kv("cpu_ns_per_op", double(cpu) / double(n)));
    }
  });
  std::fprintf(stderr, "preempt_point: %llu preemptions by sysmon during the run\n",
               static_cast<unsigned long long>(rt.stats().preemptions));
}
