// channel peer: Boost.Fiber, work_stealing on --procs threads. P producer
// fibers send N ints in total over one buffered_channel (capacity 128) to
// C consumer fibers. Metric: ns per item.
#include "../../bench_common.hpp"
#include "fiber_pool.hpp"

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::uint64_t n = bench::arg_u64(argc, argv, "--n", 10'000'000);
  const std::uint64_t np = bench::arg_u64(argc, argv, "--producers", 1);
  const std::uint64_t nc = bench::arg_u64(argc, argv, "--consumers", 1);
  const std::size_t cap = bench::arg_u64(argc, argv, "--cap", 128);
  const bool suspend = bench::arg_flag(argc, argv, "--suspend");
  fiber_bench::run_pool(c.procs, suspend, [&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      boost::fibers::buffered_channel<std::int64_t> ch(cap);
      fiber_bench::wait_group producers, consumers;
      std::atomic<std::int64_t> total{0};
      std::int64_t t0 = bench::now_ns();
      producers.add(static_cast<long>(np));
      consumers.add(static_cast<long>(nc));
      for (std::uint64_t p = 0; p < np; ++p)
        fiber_bench::go([&, p] {
          std::uint64_t lo = n * p / np, hi = n * (p + 1) / np;
          for (std::uint64_t i = lo; i < hi; ++i) ch.push(static_cast<std::int64_t>(i));
          producers.done();
        });
      for (std::uint64_t k = 0; k < nc; ++k)
        fiber_bench::go([&] {
          std::int64_t sum = 0, v;
          while (ch.pop(v) == boost::fibers::channel_op_status::success) sum += v;
          total.fetch_add(sum, std::memory_order_relaxed);
          consumers.done();
        });
      producers.wait();
      ch.close();
      consumers.wait();
      std::int64_t dt = bench::now_ns() - t0;
      if (total.load() != static_cast<std::int64_t>(n * (n - 1) / 2)) std::abort();
      if (rep >= c.warmup)
        bench::result(
            "channel", "boost_fiber", c.procs, "ns_per_op", double(dt) / double(n),
            bench::kv("n", double(n)) + bench::kv("producers", double(np)) + bench::kv("consumers", double(nc)));
    }
  });
}
