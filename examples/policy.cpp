// policy: a runtime with a custom compile-time policy (small 4 KiB stacks,
// a short local run queue, a quarter per steal, switches that leave the FP
// control state to the thread), then its counters. Exits 0 on success.
#include <goro/goro.hpp>

#include <atomic>
#include <cstdio>

// Options are applied left to right on goro::default_policy.
using small_policy = goro::policy<goro::queue_capacity<64>,  // per-P ring slots (power of two)
                                  goro::steal<1, 4>,          // a thief takes a quarter, rounded up
                                  goro::stack<4 * 1024>,      // 4 KiB stacks: packed, canary-checked
                                  // nothing here calls fesetround: switches need not carry the FP control words
                                  goro::fp_control_mode<goro::fp_control::shared>>;

int main() {
  constexpr int n = 10'000;
  std::atomic<long> sum{0};
  goro::basic_runtime<small_policy> rt;
  rt.run([&] {
    goro::wait_group wg;
    wg.add(n);
    for (int i = 0; i < n; ++i) {
      goro::go([&, i] {
        sum.fetch_add(i, std::memory_order_relaxed);
        wg.done();
      });
    }
    wg.wait();
  });

  // Counters are snapshots; goroutines past their done() may still be exiting.
  goro::runtime_stats s = rt.stats();
  std::printf("policy: gomaxprocs=%u stack=%zu B queue=%zu\n", rt.gomaxprocs(), small_policy::stack_size,
              small_policy::local_queue_capacity);
  std::printf("  spawns=%llu exits=%llu steals=%llu global_polls=%llu\n", (unsigned long long)s.spawns,
              (unsigned long long)s.exits, (unsigned long long)s.steals, (unsigned long long)s.global_polls);
  std::printf("  parks=%llu unparks=%llu m_parks=%llu m_spins=%llu threads=%llu\n", (unsigned long long)s.parks,
              (unsigned long long)s.unparks, (unsigned long long)s.m_parks, (unsigned long long)s.m_spins,
              (unsigned long long)s.threads);
  bool ok = sum == long{n} * (n - 1) / 2 && s.spawns == n + 1;  // + the main goroutine
  return ok ? 0 : 1;
}
