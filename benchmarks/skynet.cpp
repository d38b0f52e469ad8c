// skynet: a tree of goroutines, 10 children per node, N leaves (default
// 1,000,000); each leaf sends its number, each node sums its children's
// answers from a channel. Metric: ns per goroutine (wall / all nodes).
//
//   skynet [--procs 2] [--leaves 1000000] [--reps 3] [--warmup 1]
#include <goro/goro.hpp>

#include "bench_common.hpp"

namespace {

void skynet(goro::chan<std::int64_t> c, std::int64_t num, std::int64_t size) {
  if (size == 1) {
    c.send(num);
    return;
  }
  goro::chan<std::int64_t> rc(10);
  const std::int64_t sub = size / 10;
  for (std::int64_t i = 0; i < 10; ++i) goro::go(skynet, rc, num + i * sub, sub);
  std::int64_t sum = 0;
  for (int i = 0; i < 10; ++i) sum += *rc.recv();
  c.send(sum);
}

}  // namespace

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::int64_t leaves = static_cast<std::int64_t>(bench::arg_u64(argc, argv, "--leaves", 1'000'000));
  std::int64_t nodes = 0;
  for (std::int64_t l = leaves; l >= 1; l /= 10) nodes += l;

  goro::runtime rt{goro::options{.maxprocs = c.procs}};
  rt.run([&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      goro::chan<std::int64_t> out;
      std::int64_t t0 = bench::now_ns();
      goro::go(skynet, out, 0, leaves);
      std::int64_t sum = *out.recv();
      std::int64_t dt = bench::now_ns() - t0;
      if (sum != leaves * (leaves - 1) / 2) {
        std::fprintf(stderr, "skynet: wrong sum %lld\n", static_cast<long long>(sum));
        std::exit(1);
      }
      if (rep >= c.warmup)
        bench::result("skynet", "goro", c.procs, "ns_per_op", double(dt) / double(nodes),
                      bench::kv("leaves", double(leaves)));
    }
  });
}
