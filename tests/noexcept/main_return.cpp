// options::on_main_return under -fno-exceptions: when main returns, the
// goroutines still alive end without running their destructors (as
// goro::exit() there), and run() returns once they are gone.
#include <goro/goro.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>

namespace {
std::atomic<int> destroyed{0}, after{0};
struct raii {
  ~raii() { destroyed.fetch_add(1); }
};
}  // namespace

int main() {
  goro::chan<int> c;
  goro::mutex mu;
  const auto t0 = std::chrono::steady_clock::now();
  goro::run([&] {
    mu.lock();
    goro::go([&] {
      raii r;
      (void)c.recv();
      after.fetch_add(1);
    });
    goro::go([&] {
      raii r;
      mu.lock();
      after.fetch_add(1);
    });
    goro::go([&] {
      raii r;
      for (;;) goro::yield();
    });
    goro::sleep_for(std::chrono::milliseconds(20));
  });
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("destroyed=%d after=%d took=%.3f\n", destroyed.load(), after.load(), took);
  return destroyed.load() == 0 && after.load() == 0 && took < 1.0 ? 0 : 1;
}
