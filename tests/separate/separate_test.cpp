// Separate compilation (SPEC, "Build"; docs/api.md): this program's files
// are compiled with -DGORO_SEPARATE_COMPILATION and the runtime only in
// impl.cpp. Each call below reaches a part compiled there: the scheduler
// (default and custom policy), the goroutine dump, the tracer, num_cpu.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <cstdio>
#include <string>
#include <unistd.h>

#include "small_policy.hpp"
#include "worker.hpp"

static_assert(!GORO_COMPILE_RUNTIME, "this file must not compile the runtime");

TEST_CASE("a separately compiled program runs goroutines across files") {
  int sum = goro::run([] { return sum_squares(20); });
  CHECK(sum == 2870);
}

TEST_CASE("a custom policy's runtime instantiated in the implementation file") {
  goro::basic_runtime<small_policy> rt{goro::options{.maxprocs = 2}};
  CHECK(rt.gomaxprocs() == 2);
  int sum = rt.run([] { return sum_squares(10); });
  CHECK(sum == 385);
  CHECK(rt.stats().spawns >= 11);
}

TEST_CASE("the goroutine dump, num_cpu and the tracer from a user file") {
  CHECK(goro::num_cpu() >= 1);
  goro::run([] {
    goro::chan<int> c;
    goro::wait_group started;
    started.add(1);
    goro::go([&] {
      started.done();
      park_forever(c);
    });
    started.wait();
    std::string dump;
    for (int i = 0; i < 200 && dump.find("[chan receive") == std::string::npos; ++i) {
      goro::sleep_for(std::chrono::milliseconds(5));
      dump = goro::goroutine_dump();
    }
    CHECK(dump.find("[chan receive") != std::string::npos);
    // Frames: not under ThreadSanitizer (the dump does not unwind other
    // goroutines there; dump_test.cpp, frames_expected).
    if (!GORO_TSAN) CHECK(dump.find("park_forever") != std::string::npos);
    CHECK(goro::goroutines().size() >= 2);
    c.close();
  });

  char path[] = "/tmp/goro_separate_trace_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  goro::trace::start(path);
  CHECK(goro::trace::running());
  goro::run([] { CHECK(sum_squares(5) == 55); });
  goro::trace::stop();
  CHECK_FALSE(goro::trace::running());
  std::FILE* f = std::fopen(path, "r");
  REQUIRE(f);
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  ::unlink(path);
  CHECK(text.find("\"ph\"") != std::string::npos);
}
