// context_cancel: cancellation fan-out -- one parent context, N children
// (default 100,000), each watched by a goroutine waiting in select on its
// child's done() (and on a channel nobody sends on). Metric: wall_ms from
// the parent's cancel() to the last waiter woken (wait_group), i.e. cancel
// walking the tree, closing N channels and readying N goroutines, and the
// goroutines running. Also setup_ms (making the children and parking the
// goroutines).
//
//   context_cancel [--procs 2] [--n 100000] [--reps 3] [--warmup 1]
#include <goro/goro.hpp>

#include <optional>
#include <variant>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::uint64_t n = bench::arg_u64(argc, argv, "--n", 100'000);

  goro::runtime rt{goro::options{.maxprocs = c.procs}};
  rt.run([&] {
    goro::chan<int> never;
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      std::int64_t t0 = bench::now_ns();
      auto [parent, cancel] = goro::with_cancel(goro::background());
      goro::wait_group ready, woken;
      ready.add(static_cast<std::int64_t>(n));
      woken.add(static_cast<std::int64_t>(n));
      for (std::uint64_t i = 0; i < n; ++i) {
        auto [child, cancel_child] = goro::with_cancel(parent);
        goro::go([&ready, &woken, never, child = child, cancel_child = cancel_child]() {
          ready.done();
          goro::select(goro::on_recv(child.done(), [](std::optional<std::monostate>) {}),
                       goro::on_recv(never, [](std::optional<int>) {}));
          cancel_child();
          woken.done();
        });
      }
      ready.wait();
      for (int i = 0; i < 10; ++i) goro::yield();  // let the last ones reach their select
      std::int64_t t1 = bench::now_ns();
      cancel();
      woken.wait();
      std::int64_t t2 = bench::now_ns();
      if (rep >= c.warmup)
        bench::result("context_cancel", "goro", c.procs, "wall_ms", double(t2 - t1) / 1e6,
                      bench::kv("setup_ms", double(t1 - t0) / 1e6) + bench::kv("n", double(n)));
    }
  });
}
