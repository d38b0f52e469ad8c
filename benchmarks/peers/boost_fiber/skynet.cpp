// skynet peer: Boost.Fiber, work_stealing on --procs threads. A tree of
// fibers, 10 children per node; buffered_channel (capacity 16: Boost wants
// a power of two). Metric: ns per fiber (wall / all nodes).
#include "../../bench_common.hpp"
#include "fiber_pool.hpp"

namespace {

using chan_t = boost::fibers::buffered_channel<std::int64_t>;

void skynet(chan_t& c, std::int64_t num, std::int64_t size) {
  if (size == 1) {
    c.push(num);
    return;
  }
  chan_t rc(16);
  const std::int64_t sub = size / 10;
  for (std::int64_t i = 0; i < 10; ++i) fiber_bench::go([&rc, num, i, sub] { skynet(rc, num + i * sub, sub); });
  std::int64_t sum = 0;
  for (int i = 0; i < 10; ++i) sum += rc.value_pop();
  c.push(sum);
}

}  // namespace

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::int64_t leaves = static_cast<std::int64_t>(bench::arg_u64(argc, argv, "--leaves", 1'000'000));
  const bool suspend = bench::arg_flag(argc, argv, "--suspend");
  std::int64_t nodes = 0;
  for (std::int64_t l = leaves; l >= 1; l /= 10) nodes += l;
  fiber_bench::run_pool(c.procs, suspend, [&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      chan_t out(2);
      std::int64_t t0 = bench::now_ns();
      fiber_bench::go([&] { skynet(out, 0, leaves); });
      std::int64_t sum = out.value_pop();
      std::int64_t dt = bench::now_ns() - t0;
      if (sum != leaves * (leaves - 1) / 2) std::abort();
      if (rep >= c.warmup)
        bench::result("skynet", "boost_fiber", c.procs, "ns_per_op", double(dt) / double(nodes),
                      bench::kv("leaves", double(leaves)));
    }
  });
}
