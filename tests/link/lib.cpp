// One of three translation units that include the amalgamation (see main.cpp).
#include <goro.hpp>

#include <atomic>

#include "link.hpp"

int link_lib() {
  return goro::run([] {
    std::atomic<int> sum{0};
    goro::wait_group wg;
    for (int i = 1; i <= 30; ++i) {
      wg.add(1);
      goro::go([&sum, &wg, i] {
        goro::yield();
        sum.fetch_add(1000 + i, std::memory_order_relaxed);
        wg.done();
      });
    }
    wg.wait();
    return sum.load();
  });
}
