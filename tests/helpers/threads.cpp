// Fatal thread errors (tests/threads_test.cpp), each ending this process:
//   max_threads   more goroutines in goro::blocking than options::max_threads
//                 allows Ms: "goro: program exceeds 3-thread limit"
//   bad_factory   an options::thread_factory that returns a std::thread not
//                 running the function it was given
#include <goro/goro.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  goro::options o;
  o.maxprocs = 1;
  if (std::strcmp(mode, "max_threads") == 0) {
    o.max_threads = 3;  // the run() caller and two more
  } else if (std::strcmp(mode, "bad_factory") == 0) {
    o.thread_factory = [](std::function<void()>) { return std::thread(); };
  } else {
    std::fprintf(stderr, "goro_helper_threads: unknown mode \"%s\"\n", mode);
    return 2;
  }
  goro::runtime rt(o);
  rt.run([] {
    goro::wait_group wg;
    for (int i = 0; i < 8; ++i) {
      wg.add(1);
      goro::go([&wg] {
        goro::blocking([] { usleep(200 * 1000); });  // each holds an M; sysmon hands the P on
        wg.done();
      });
    }
    wg.wait();
  });
  std::puts("goro_helper_threads: not stopped");
  return 0;
}
