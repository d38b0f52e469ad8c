// parked_memory: N goroutines (default 100,000) each park on one channel's
// receive; the process's resident memory grows by how much per goroutine?
// Measured from /proc/self/statm (Windows: the working set) once all of
// them have started (each calls wg.done() just before it blocks in recv),
// then the channel is closed and every goroutine returns. `--small 1` runs
// the same on a runtime whose policy has 4 KiB stacks (goro::stack<4096>)
// instead of the default 64 KiB.
//
//   parked_memory [--procs 2] [--n 100000] [--reps 3] [--small 0|1]
#include <goro/goro.hpp>

#include "bench_common.hpp"

namespace {

// One repetition on a fresh runtime: a runtime keeps the stacks and G
// records it has used (RSS would not grow a second time), and its
// destructor returns them.
template <class Policy>
double measure_once(unsigned procs, std::uint64_t n) {
  goro::basic_runtime<Policy> rt{goro::options{.maxprocs = procs}};
  return rt.run([&] {
    goro::chan<int> ch;  // unbuffered: every receiver parks
    goro::wait_group started, finished;
    started.add(static_cast<std::int64_t>(n));
    finished.add(static_cast<std::int64_t>(n));
    const std::int64_t before = bench::resident_bytes();
    for (std::uint64_t i = 0; i < n; ++i)
      goro::go([ch, &started, &finished]() mutable {
        started.done();
        (void)ch.recv();  // parks until close
        finished.done();
      });
    started.wait();
    goro::sleep_for(std::chrono::milliseconds(20));  // let the last ones park
    const std::int64_t after = bench::resident_bytes();
    ch.close();
    finished.wait();
    return double(after - before) / double(n);
  });
}

template <class Policy>
void measure(const bench::common_args& c, std::uint64_t n, const char* workload) {
  for (unsigned rep = 0; rep < c.reps; ++rep)
    bench::result(workload, "goro", c.procs, "bytes_per_goroutine", measure_once<Policy>(c.procs, n),
                  bench::kv("n", double(n)));
}

}  // namespace

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv, 1);
  const std::uint64_t n = bench::arg_u64(argc, argv, "--n", 100'000);
  if (bench::arg_u64(argc, argv, "--small", 0) != 0)
    measure<goro::policy<goro::stack<4096>>>(c, n, "parked_memory_small");
  else
    measure<goro::default_policy>(c, n, "parked_memory");
}
