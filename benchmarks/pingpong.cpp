// pingpong: two goroutines bounce an int over two unbuffered channels N
// times (default 1,000,000 round trips). Metric: ns per round trip.
//
//   pingpong [--procs 2] [--n 1000000] [--reps 3] [--warmup 1]
#include <goro/goro.hpp>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::uint64_t n = bench::arg_u64(argc, argv, "--n", 1'000'000);

  goro::runtime rt{goro::options{.maxprocs = c.procs}};
  rt.run([&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      goro::chan<int> ping, pong;
      goro::wait_group wg;
      wg.add(1);
      goro::go([&] {
        for (std::uint64_t i = 0; i < n; ++i) pong.send(*ping.recv() + 1);
        wg.done();
      });
      std::int64_t t0 = bench::now_ns();
      int v = 0;
      for (std::uint64_t i = 0; i < n; ++i) {
        ping.send(v);
        v = *pong.recv();
      }
      std::int64_t dt = bench::now_ns() - t0;
      wg.wait();
      if (static_cast<std::uint64_t>(v) != n) return;  // never: keeps v alive
      if (rep >= c.warmup)
        bench::result("pingpong", "goro", c.procs, "ns_per_op", double(dt) / double(n), bench::kv("n", double(n)));
    }
  });
}
