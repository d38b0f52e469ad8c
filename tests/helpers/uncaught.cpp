// A goroutine (not main) lets an exception escape: goro must print
// "goro: goroutine N: uncaught exception: boom" and terminate.
#include <goro/goro.hpp>

#include <stdexcept>

#include <cstdio>

int main() {
#if !defined(__cpp_exceptions)
  // Built by the -fno-exceptions preset too, where nothing can be thrown.
  std::fputs("goro_helper_uncaught: built without exceptions\n", stderr);
  return 2;
#else
  goro::run([] {
    goro::wait_group wg;
    wg.add(1);
    goro::go([] { throw std::runtime_error("boom"); });
    wg.wait();  // never done: the process dies first
  });
  return 0;  // not reached
#endif
}
