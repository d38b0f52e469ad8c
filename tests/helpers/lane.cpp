// thread_lane misuse that ends this process (tests/lane_test.cpp):
//   destroyed_alive   a lane destroyed while one of its goroutines waits:
//                     a usage_error naming it (printed here), then the
//                     runtime's destructor stops the program, since only
//                     the lane could have run that goroutine to its end;
//                     before that, another runtime's deadlock is reported
//   runtime_first     a runtime destroyed while a lane goroutine of it is
//                     alive (the lane outlives it): a fatal error
#include <goro/goro.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (std::strcmp(mode, "destroyed_alive") == 0) {
    goro::runtime rt({.maxprocs = 1});
    goro::chan<int> never;
#if defined(__cpp_exceptions)
    try {
#endif
      goro::thread_lane lane;
      lane.go(rt, [never]() mutable { (void)never.recv(); });
      lane.run_until_idle();
#if defined(__cpp_exceptions)
    } catch (const goro::usage_error& e) {
      std::printf("caught: %s\n", e.what());
      std::fflush(stdout);
    }
    {
      // The lane left behind can never be pumped: it is no external M
      // any more, and another runtime's deadlock is still reported (it
      // hung: SIGALRM).
      // On another thread: this one's own lanes do not count in its run().
      alarm(20);
      std::thread([] {
        goro::runtime rt2({.maxprocs = 1});
        goro::chan<int> c2;
        try {
          rt2.run([c2]() mutable { (void)c2.recv(); });
        } catch (const goro::deadlock_error&) {
          std::puts("second runtime: deadlock reported");
          std::fflush(stdout);
        }
      }).join();
      alarm(0);
    }
#endif
    return 0;  // ~runtime: fatal (without exceptions the usage_error itself ends it)
  }
  if (std::strcmp(mode, "runtime_first") == 0) {
    goro::thread_lane lane;
    auto rt = std::make_unique<goro::runtime>(goro::options{.maxprocs = 1});
    goro::chan<int> never;
    lane.go(*rt, [never]() mutable { (void)never.recv(); });
    lane.run_until_idle();
    rt.reset();
    std::puts("goro_helper_lane: not stopped");
    return 0;
  }
  std::fprintf(stderr, "goro_helper_lane: unknown mode \"%s\"\n", mode);
  return 2;
}
