// hello: goro::run starts the main goroutine; goro::go starts more; a
// wait_group waits for them. Exits 0 on success.
#include <goro/goro.hpp>

#include <atomic>
#include <cstdio>

int main() {
  std::atomic<int> sum{0};
  int result = goro::run([&] {
    goro::wait_group wg;
    for (int i = 1; i <= 100; ++i) {
      wg.add(1);
      goro::go([&, i] {
        sum.fetch_add(i, std::memory_order_relaxed);
        wg.done();
      });
    }
    wg.wait();
    return sum.load();  // run() returns the main goroutine's result
  });
  std::printf("hello: sum of 1..100 computed by 100 goroutines = %d\n", result);
  return result == 5050 ? 0 : 1;
}
