// blocking: at gomaxprocs(1), one goroutine waits 100 ms in the kernel
// inside goro::blocking while others keep computing; then a compute loop
// with preempt_point() shares the single P with a ticker goroutine.
// Exits 0 on success.
#include <goro/goro.hpp>

#include <unistd.h>

#include <atomic>
#include <cstdio>

int main() {
  goro::runtime rt{goro::options{1}};
  int ticks_during_call = rt.run([] {
    std::atomic<int> ticks{0};
    std::atomic<bool> stop{false};
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      while (!stop.load()) {
        ticks.fetch_add(1);
        goro::yield();
      }
      wg.done();
    });
    // Without blocking() the only P would sit in usleep for 100 ms.
    goro::blocking([] { usleep(100'000); });
    int seen = ticks.load();
    // A CPU-bound loop: preempt_point() lets sysmon's time slice (10 ms)
    // give the ticker a turn.
    int before = ticks.load();
    for (long long i = 0; ticks.load() == before && i < 4'000'000'000LL; ++i) goro::preempt_point();
    stop.store(true);
    wg.wait();
    return seen;
  });
  auto s = rt.stats();
  std::printf("blocking: %d ticks during a 100 ms blocking call; %llu P hand-offs, %llu preemptions\n",
              ticks_during_call, static_cast<unsigned long long>(s.syscall_handoffs),
              static_cast<unsigned long long>(s.preemptions));
  return ticks_during_call > 0 && s.syscall_handoffs > 0 && s.preemptions > 0 ? 0 : 1;
}
