// Child process for dump_test's file:line cases: prints the lines where its
// parked goroutine blocks and where it was created, then the goroutine dump,
// on stdout. Built twice from this file: goro_helper_dump_lines with -g
// (the dump shows file:line) and goro_helper_dump_lines_nog with -g0
// (dump_lines_nog.cpp: the dump shows none of this file's lines).
#include <chrono>
#include <cstdio>
#include <goro/goro.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

int recv_line = 0;  // the line of the blocking call in dump_lines_parked
int go_line = 0;    // the line of the go() call in dump_lines_spawner
int lambda_line = 0;  // the line of the blocking call in own_frame (a local type's function)
int inline_go_line = 0;  // the line of the go() call in main's lambda; its goroutine's recv is 2 lines on

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
  // A function object with a frame of its own, local to this function as
  // a lambda's closure type is (its function is in the type, inside this
  // function's entry), recv inlined into it.
  struct own_frame {
    goro::chan<int>* c;
    goro::wait_group* started;
    [[gnu::noinline]] void operator()() const {
      started->done();
      lambda_line = __LINE__ + 1;
      (void)c->recv();
      asm volatile("" ::: "memory");
    }
  };
  goro::go(own_frame{&c, &started});
  asm volatile("" ::: "memory");
}

// rt.go and lane.go from a plain thread: "created by" names this function,
// as for goro::go (the pc taken inside them sat in libstdc++'s inlined
// unique_ptr::get, which the dump named instead).
[[gnu::noinline]] void dump_lines_outside_spawner(goro::runtime& rt, goro::thread_lane& lane, goro::chan<int>& c) {
  rt.go([&c] { (void)c.recv(); });
  lane.go(rt, [&c] { (void)c.recv(); });
  asm volatile("" ::: "memory");
}

}  // namespace

int main() {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> c;
    goro::wait_group started;
    started.add(3);
    dump_lines_spawner(c, started);
    // A lambda goroutine, its recv inlined into it and it into goro's
    // closure (at -O2), created by main's lambda (itself inlined into the
    // closure of main): the dump names both lambdas from the debug
    // information, with their lines.
    inline_go_line = __LINE__ + 1;
    goro::go([&c, &started] {
      started.done();
      (void)c.recv();
    });
    started.wait();
    std::string dump;
    for (int i = 0; i < 5000; ++i) {  // until both have parked in recv (bounded)
      const auto gs = goro::goroutines();
      int parked = 0;
      for (const auto& gi : gs) parked += gi.wait_reason == "chan receive";
      dump = goro::goroutine_dump();
      if (parked == 3) break;
      goro::sleep_for(std::chrono::milliseconds(1));
    }
    std::printf("recv_line %d\ngo_line %d\nlambda_line %d\ninline_go_line %d\n%s", recv_line, go_line, lambda_line,
                inline_go_line, dump.c_str());
    c.send(1);
    c.send(2);
    c.send(3);
  });
  {
    goro::thread_lane lane;  // after rt: destroyed first
    goro::chan<int> c;
    dump_lines_outside_spawner(rt, lane, c);
    lane.run_until_idle();
    std::vector<goro::goroutine_info> gs;
    for (int i = 0; i < 5000; ++i) {  // until both have parked in recv (bounded)
      gs = goro::goroutines();
      int parked = 0;
      for (const auto& gi : gs) parked += gi.wait_reason.rfind("chan receive", 0) == 0;
      if (parked == 2) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (const auto& gi : gs) std::printf("outside_created_by %s\n", gi.created_by.c_str());
    c.close();
    while (lane.goroutines() != 0) {
      lane.run_until_idle();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}
