// channel: P producers send N ints in total (default 10,000,000) over one
// buffered channel (capacity 128) to C consumers. Metric: ns per item.
//
//   channel [--procs 2] [--n 10000000] [--producers 1] [--consumers 1] [--cap 128] [--reps 3] [--warmup 1]
#include <goro/goro.hpp>

#include <atomic>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::uint64_t n = bench::arg_u64(argc, argv, "--n", 10'000'000);
  const std::uint64_t np = bench::arg_u64(argc, argv, "--producers", 1);
  const std::uint64_t nc = bench::arg_u64(argc, argv, "--consumers", 1);
  const std::size_t cap = bench::arg_u64(argc, argv, "--cap", 128);

  goro::runtime rt{goro::options{.maxprocs = c.procs}};
  rt.run([&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      goro::chan<std::int64_t> ch(cap);
      goro::wait_group producers, consumers;
      std::atomic<std::int64_t> total{0};
      std::int64_t t0 = bench::now_ns();
      producers.add(static_cast<std::int64_t>(np));
      consumers.add(static_cast<std::int64_t>(nc));
      for (std::uint64_t p = 0; p < np; ++p)
        goro::go([&, p] {
          std::uint64_t lo = n * p / np, hi = n * (p + 1) / np;
          for (std::uint64_t i = lo; i < hi; ++i) ch.send(static_cast<std::int64_t>(i));
          producers.done();
        });
      for (std::uint64_t k = 0; k < nc; ++k)
        goro::go([&] {
          std::int64_t sum = 0;
          for (std::int64_t v : ch) sum += v;
          total.fetch_add(sum, std::memory_order_relaxed);
          consumers.done();
        });
      producers.wait();
      ch.close();
      consumers.wait();
      std::int64_t dt = bench::now_ns() - t0;
      if (total.load() != static_cast<std::int64_t>(n * (n - 1) / 2)) {
        std::fprintf(stderr, "channel: wrong sum\n");
        std::exit(1);
      }
      if (rep >= c.warmup)
        bench::result(
            "channel", "goro", c.procs, "ns_per_op", double(dt) / double(n),
            bench::kv("n", double(n)) + bench::kv("producers", double(np)) + bench::kv("consumers", double(nc)));
    }
  });
}
