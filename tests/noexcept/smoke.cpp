// Built with -fno-exceptions -fno-rtti (preset noexcept): a runtime, a few
// goroutines and a wait_group work without exceptions. Exit 0 on success.
#include <goro/goro.hpp>

#include <atomic>
#include <cstdio>

int main() {
  std::atomic<int> sum{0};
  int result = goro::run([&sum] {
    goro::wait_group wg;
    for (int i = 1; i <= 16; ++i) {
      wg.add(1);
      goro::go([&sum, &wg, i] {
        goro::yield();
        sum.fetch_add(i, std::memory_order_relaxed);
        wg.done();
      });
    }
    wg.wait();
    return sum.load();
  });
  if (result != 16 * 17 / 2) {
    std::fprintf(stderr, "noexcept smoke: expected %d, got %d\n", 16 * 17 / 2, result);
    return 1;
  }
  return 0;
}
