// single_header: the whole library from the amalgamation. In your own
// project copy single_include/goro.hpp (it embeds the context switch; the
// .S files in single_include/goro/arch/ are for reference) and build with
//   g++ -std=c++20 -O2 -pthread -I single_include main.cpp
// Exits 0 on success.
#include "../single_include/goro.hpp"

#include <atomic>
#include <cstdio>

int main() {
  std::atomic<int> done{0};
  goro::run([&] {
    goro::wait_group wg;
    for (int i = 0; i < 4; ++i) {
      wg.add(1);
      goro::go(  // a callable and its arguments, decay-copied like std::thread
          [&](int rounds) {
            for (int r = 0; r < rounds; ++r) goro::yield();  // Gosched
            done.fetch_add(1);
            wg.done();
          },
          10 * i);
    }
    wg.wait();
    std::printf("single_header: goroutine %llu saw %d goroutines finish on %u Ps\n",
                (unsigned long long)goro::this_goroutine::id(), done.load(), goro::gomaxprocs());
  });
  return done == 4 ? 0 : 1;
}
