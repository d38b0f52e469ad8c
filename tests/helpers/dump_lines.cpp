// Child process for dump_test's file:line cases: prints the lines where its
// parked goroutine blocks and where it was created, then the goroutine dump,
// on stdout. Built twice from this file: goro_helper_dump_lines with -g
// (the dump shows file:line) and goro_helper_dump_lines_nog with -g0
// (dump_lines_nog.cpp: the dump shows none of this file's lines).
#include <chrono>
#include <cstdio>
#include <goro/goro.hpp>
#include <string>

namespace {

int recv_line = 0;  // the line of the blocking call in dump_lines_parked
int go_line = 0;    // the line of the go() call in dump_lines_spawner

[[gnu::noinline]] void dump_lines_parked(goro::chan<int>& c) {
  recv_line = __LINE__ + 1;
  (void)c.recv();
  asm volatile("" ::: "memory");
}

[[gnu::noinline]] void dump_lines_spawner(goro::chan<int>& c, goro::wait_group& started) {
  auto body = [&c, &started] {
    started.done();
    dump_lines_parked(c);
  };
  go_line = __LINE__ + 1;
  goro::go(body);
  asm volatile("" ::: "memory");
}

}  // namespace

int main() {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> c;
    goro::wait_group started;
    started.add(1);
    dump_lines_spawner(c, started);
    started.wait();
    std::string dump;
    for (int i = 0; i < 5000; ++i) {  // until it has parked in recv (bounded)
      dump = goro::goroutine_dump();
      if (dump.find(" [chan receive]:\n") != std::string::npos) break;
      goro::sleep_for(std::chrono::milliseconds(1));
    }
    std::printf("recv_line %d\ngo_line %d\n%s", recv_line, go_line, dump.c_str());
    c.send(1);
  });
}
