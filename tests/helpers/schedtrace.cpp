// Runs a little work at 2 procs for ~150 ms; started by sysmon_test with
// GORO_DEBUG=schedtrace=10, which must make sysmon print SCHED lines.
#include <goro/goro.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>

int main() {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    std::atomic<bool> stop{false};
    goro::wait_group wg;
    wg.add(3);
    for (int i = 0; i < 3; ++i)
      goro::go([&] {
        while (!stop.load(std::memory_order_relaxed)) goro::preempt_point();
        wg.done();
      });
    goro::blocking([] { usleep(150'000); });
    stop.store(true);
    wg.wait();
  });
  return 0;
}
