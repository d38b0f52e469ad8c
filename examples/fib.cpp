// fib: a spawn tree. Each call runs fib(n - 1) in a new goroutine and
// fib(n - 2) itself, then waits for the child. Exits 0 on success.
#include <goro/goro.hpp>

#include <cstdio>

long fib(int n) {
  if (n < 2) return n;
  long a = 0;
  goro::wait_group wg;  // on this goroutine's stack: safe, wait() outlives done()
  wg.add(1);
  goro::go([&] {
    a = fib(n - 1);
    wg.done();
  });
  long b = fib(n - 2);
  wg.wait();
  return a + b;
}

int main() {
  constexpr int n = 25;
  long result = goro::run([] { return fib(n); });
  long x = 0, y = 1;  // the same, sequentially
  for (int i = 0; i < n; ++i) {
    long t = x + y;
    x = y;
    y = t;
  }
  std::printf("fib(%d) = %ld\n", n, result);
  return result == x ? 0 : 1;
}
