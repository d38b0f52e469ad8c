// trace: records an execution trace of a small pipeline (a producer, four
// workers, a goroutine in goro::blocking) and writes it as a Chrome trace.
// Open the file in https://ui.perfetto.dev or chrome://tracing: a track per
// P and per M (OS thread) shows which goroutine ran where and why it
// stopped (yield, blocked, preempted, exit), with steals, blocks and
// wake-ups as markers. See docs/debugging.md.
//
//   goro_example_trace [path]   (default: a file in /tmp, removed again)
#include <goro/goro.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  const bool keep = argc > 1;
  const std::string path = keep ? argv[1] : "/tmp/goro_example_trace_" + std::to_string(::getpid()) + ".json";

  goro::runtime rt{goro::options{.maxprocs = 2}};
  goro::trace::start(path);
  long total = 0;
  rt.run([&] {
    goro::chan<int> jobs(16), results(16);
    goro::go([jobs]() mutable {
      for (int i = 1; i <= 200; ++i) jobs.send(i);
      jobs.close();
    });
    goro::wait_group workers;
    workers.add(4);
    for (int w = 0; w < 4; ++w)
      goro::go([jobs, results, &workers]() mutable {
        for (int j : jobs) results.send(j * j);
        workers.done();
      });
    goro::go([results, &workers]() mutable {
      workers.wait();
      results.close();
    });
    goro::go([] { goro::blocking([] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }); });
    for (int r : results) total += r;
  });
  goro::trace::stop();

  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return 1;
  std::fseek(f, 0, SEEK_END);
  const long bytes = std::ftell(f);
  std::fclose(f);
  std::printf("sum of squares 1..200 = %ld; trace: %s (%ld bytes)\n", total, path.c_str(), bytes);
  if (!keep) std::remove(path.c_str());
  return total == 2686700 && bytes > 0 ? 0 : 1;
}
