// tail_latency: how late a light periodic goroutine runs while CPU hogs
// keep every P busy. The main goroutine reads a 1 ms goro::ticker for
// --ms milliseconds and records each tick's lag (the time it received the
// tick minus the time the tick was due) while --hogs goroutines (default
// 2 x procs) compute without blocking. A hog only gives up its P when
// sysmon preempts it, so the lag measures preemption (time slice, sysmon's
// cadence) and how fast a woken goroutine gets a P back (timers run in
// find_runnable, the woken goroutine goes to runnext).
// Metric: p99_us, the 99th percentile of the lag in microseconds (extra:
// p50_us, max_us, ticks received).
//
// Hogs: goroutines that make no runtime call cannot be preempted under the
// default preemption::cooperative policy (docs/preemption.md): a call-free
// loop must call goro::preempt_point(); here once per inner unit of work
// (~1 us of a dependent multiply-add chain). With --async 1 the runtime
// uses preemption::signal and the hogs run inside goro::async_preemptible
// without any preempt_point() (sysmon interrupts them with SIGURG, as Go
// preempts a tight loop).
//
// A tick's due time is on the ticker's grid: t0 + k ms. After a late tick
// the ticker drops the ticks it could not deliver (the channel holds one)
// and the next due time is the next grid point after the receipt, as with
// Go's time.Ticker.
//
//   tail_latency [--procs 2] [--ms 1000] [--hogs 2*procs] [--async 0|1]
//                [--reps 3] [--warmup 1]
#include <goro/goro.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

constexpr std::int64_t period_ns = 1'000'000;  // the ticker's period: 1 ms
constexpr std::uint64_t unit_iters = 500;      // one unit of hog work: ~1 us

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

template <class Runtime>
void run(const bench::common_args& c, std::int64_t dur_ms, unsigned hogs, bool async) {
  Runtime rt{goro::options{.maxprocs = c.procs}};
  rt.run([&] {
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      std::atomic<bool> stop{false};
      goro::wait_group wg;
      wg.add(hogs);
      for (unsigned h = 0; h < hogs; ++h) {
        goro::go([&stop, &wg, async] {
          std::uint64_t x = 0;
          if (async) {
            goro::async_preemptible scope;  // pure computation: no lock, no call
            while (!stop.load(std::memory_order_relaxed)) x += bench::spin(unit_iters);
          } else {
            while (!stop.load(std::memory_order_relaxed)) {
              x += bench::spin(unit_iters);
              goro::preempt_point();  // goro's contract for call-free loops (cooperative)
            }
          }
          bench::consume(x);
          wg.done();
        });
      }
      std::vector<double> lags;
      lags.reserve(static_cast<std::size_t>(dur_ms) + 16);
      const std::int64_t t0 = bench::now_ns();
      goro::ticker tick{std::chrono::nanoseconds(period_ns)};
      auto ch = tick.c();
      std::int64_t due = t0 + period_ns;
      const std::int64_t end = t0 + dur_ms * 1'000'000;
      for (;;) {
        ch.recv();
        std::int64_t r = bench::now_ns();
        lags.push_back(static_cast<double>(std::max<std::int64_t>(r - due, 0)) / 1e3);
        due += period_ns;
        if (due <= r) due = t0 + ((r - t0) / period_ns + 1) * period_ns;  // ticks dropped meanwhile
        if (r >= end) break;
      }
      tick.stop();
      stop.store(true);
      wg.wait();
      if (rep >= c.warmup) {
        double p99 = percentile(lags, 0.99);
        bench::result(async ? "tail_latency_async" : "tail_latency", "goro", c.procs, "p99_us", p99,
                      bench::kv("p50_us", percentile(lags, 0.5)) +
                          bench::kv("max_us", *std::max_element(lags.begin(), lags.end())) +
                          bench::kv("ticks", static_cast<double>(lags.size())) + bench::kv("hogs", hogs));
      }
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const auto dur_ms = static_cast<std::int64_t>(bench::arg_u64(argc, argv, "--ms", 1000));
  const auto hogs = static_cast<unsigned>(bench::arg_u64(argc, argv, "--hogs", 2 * c.procs));
  const bool async = bench::arg_u64(argc, argv, "--async", 0) != 0;
  if (async) {
    using sig = goro::policy<goro::preemption_mode<goro::preemption::signal>>;
    run<goro::basic_runtime<sig>>(c, dur_ms, hogs, true);
  } else {
    run<goro::runtime>(c, dur_ms, hogs, false);
  }
}
