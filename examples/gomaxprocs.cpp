// Resizing the runtime at run time with gomaxprocs(n) (Go's GOMAXPROCS):
// workers keep running while the number of Ps goes 2 -> 4 -> 1 -> 2; when
// gomaxprocs(n) returns, at most n goroutines run at a time.
#include <goro/goro.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>

int main() {
  goro::runtime rt{goro::options{.maxprocs = 2}};
  rt.run([] {
    std::atomic<bool> stop{false};
    std::atomic<long> work{0};
    goro::wait_group wg;
    for (int i = 0; i < 8; ++i) {
      wg.add(1);
      goro::go([&] {
        while (!stop.load()) {
          for (int k = 0; k < 1000; ++k) work.fetch_add(1, std::memory_order_relaxed);
          goro::preempt_point();  // long loops offer a safe point (a shrink waits for one)
          goro::yield();
        }
        wg.done();
      });
    }
    for (unsigned n : {4u, 1u, 2u}) {
      unsigned before = goro::gomaxprocs(n);  // returns the previous count
      std::printf("gomaxprocs %u -> %u\n", before, goro::gomaxprocs());
      goro::sleep_for(std::chrono::milliseconds(20));
    }
    stop.store(true);
    wg.wait();
    std::printf("work units: %s\n", work.load() > 0 ? "done" : "none");
  });
}
