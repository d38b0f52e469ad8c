// A goroutine (not main) lets an exception escape: goro must print
// "goro: goroutine N: uncaught exception: boom" and terminate.
#include <goro/goro.hpp>

#include <stdexcept>

int main() {
  goro::run([] {
    goro::wait_group wg;
    wg.add(1);
    goro::go([] { throw std::runtime_error("boom"); });
    wg.wait();  // never done: the process dies first
  });
  return 0;  // not reached
}
