// plain_thread: a std::thread outside the runtime feeds it goroutines with
// rt.go while run()'s main goroutine waits on a wait_group. Exits 0 on
// success.
#include <goro/goro.hpp>

#include <atomic>
#include <cstdio>
#include <thread>

int main() {
  constexpr int n = 10'000;
  // Fed by a plain thread: the runtime cannot see those goroutines coming,
  // but the thread counts as a live external M once it calls rt.go (and the
  // deadlock check waits a grace period before that), so main waiting for
  // them is not "deadlocked" (docs/api.md, "Deadlock detection").
  goro::runtime rt;
  goro::wait_group wg;
  std::atomic<long> sum{0};
  wg.add(n);  // before the feeder starts, so wait() cannot return early

  std::thread feeder([&] {
    for (int i = 0; i < n; ++i) {
      rt.go([&, i] {  // from a plain thread: into the global run queue
        sum.fetch_add(i, std::memory_order_relaxed);
        wg.done();
      });
    }
  });

  rt.run([&] { wg.wait(); });  // the main goroutine parks; its M runs the others
  feeder.join();

  std::printf("plain_thread: %d goroutines from a std::thread, sum = %ld\n", n, sum.load());
  return sum == long{n} * (n - 1) / 2 ? 0 : 1;
}
