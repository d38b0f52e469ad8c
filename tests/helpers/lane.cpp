// thread_lane misuse that ends this process (tests/lane_test.cpp):
//   destroyed_alive   a lane destroyed while one of its goroutines waits:
//                     a usage_error naming it (printed here), then the
//                     runtime's destructor stops the program, since only
//                     the lane could have run that goroutine to its end;
//                     before that, another runtime's deadlock is reported
//   runtime_first     a runtime destroyed while a lane goroutine of it is
//                     alive (the lane outlives it): a fatal error
//   wait_mode         main_return::wait: the runtime's destructor waits for
//                     a lane goroutine that its lane (pumped by another
//                     thread) runs to its end, as for any goroutine
//   overflow_two_lanes  two lanes on this thread, the first destroyed:
//                     a goroutine of the second that overflows its stack
//                     is still reported (the thread keeps its signal stack)
#include <goro/goro.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

namespace {
// ~1 MiB of frames: far past a 32 KiB stack.
int deep(int n) {
  volatile char pad[1024];
  pad[0] = static_cast<char>(n);
  return n == 0 ? pad[0] : deep(n - 1) + (pad[0] & 1);
}
}  // namespace

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
  if (std::strcmp(mode, "wait_mode") == 0) {
    goro::thread_lane* lp = nullptr;
    std::atomic<bool> ready{false}, stop{false};
    std::thread owner([&] {
      goro::thread_lane lane;
      lp = &lane;
      ready = true;
      while (!stop.load() || lane.goroutines() > 0) {
        if (lane.run_for(std::chrono::milliseconds(1)) == 0)
          std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    });
    while (!ready.load()) std::this_thread::yield();
    {
      goro::runtime rt({.maxprocs = 1, .on_main_return = goro::main_return::wait});
      rt.run([&] {
        lp->go(rt, [] {
          goro::sleep_for(std::chrono::milliseconds(100));
          std::puts("lane goroutine done");
          std::fflush(stdout);
        });
      });
    }
    std::puts("runtime destroyed");
    stop = true;
    owner.join();
    return 0;
  }
  if (std::strcmp(mode, "overflow_two_lanes") == 0) {
    goro::runtime rt({.maxprocs = 1});
    auto first = std::make_unique<goro::thread_lane>();
    goro::thread_lane second;
    first.reset();
    second.go(rt, goro::spawn_options{.stack_size = 32 << 10}, [] { std::printf("%d\n", deep(1000)); });
    second.run_until_idle();
    std::puts("goro_helper_lane: not stopped");
    return 0;
  }
  std::fprintf(stderr, "goro_helper_lane: unknown mode \"%s\"\n", mode);
  return 2;
}
