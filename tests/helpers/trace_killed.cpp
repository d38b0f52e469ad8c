// Child process for trace_test: starts a trace into argv[1], runs
// goroutines that create and wake each other, then waits in a blocking
// call (the trace's flusher writes meanwhile) and prints "ready"; the test
// kills it with SIGKILL and reads the trace, which was never stopped.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <goro/goro.hpp>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  goro::runtime rt{goro::options{2}};
  goro::trace::start(argv[1]);
  rt.run([] {
    goro::chan<int> ping, pong;
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      for (int i = 0; i < 200; ++i) {
        (void)ping.recv();
        pong.send(i);
      }
      wg.done();
    });
    for (int i = 0; i < 200; ++i) {
      ping.send(i);
      (void)pong.recv();
    }
    wg.wait();
    // Quiet from here on: everything recorded so far reaches the file
    // within a flush period; then the test kills the process.
    goro::blocking([] {
      usleep(500 * 1000);
      std::printf("ready\n");
      std::fflush(stdout);
      for (;;) pause();
    });
  });
  return 0;
}
