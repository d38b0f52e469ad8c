// A second user translation unit: goroutines, channels and sync objects
// cross files in a separately compiled program.
#include <goro/goro.hpp>

#include "worker.hpp"

int sum_squares(int n) {
  goro::chan<int> out(n);
  goro::wait_group wg;
  for (int i = 1; i <= n; ++i) {
    wg.add(1);
    goro::go([&, i] {
      out.send(i * i);
      wg.done();
    });
  }
  wg.wait();
  out.close();
  int sum = 0;
  for (int v : out) sum += v;
  return sum;
}

void park_forever(goro::chan<int>& c) { (void)c.recv(); }
