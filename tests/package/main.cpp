// A goro user: a few goroutines and a wait_group, built against an installed
// or add_subdirectory'd goro::goro.
#include <goro/goro.hpp>

#include <atomic>
#include <cstdio>

int main() {
  int total = goro::run([] {
    std::atomic<int> sum{0};
    goro::wait_group wg;
    for (int i = 1; i <= 8; ++i) {
      wg.add(1);
      goro::go([&wg, &sum, i] {
        sum.fetch_add(i, std::memory_order_relaxed);
        wg.done();
      });
    }
    wg.wait();
    return sum.load();
  });
  if (total != 36) {
    std::fprintf(stderr, "goro_consumer: expected 36, got %d\n", total);
    return 1;
  }
  return 0;
}
