// Child process for gdb_test: goroutines parked in several wait reasons,
// each inside a uniquely named noinline function, and one in a blocking
// call (running on an M). Prints "goroutine ID FUNCTION" for each (from
// goro::goroutines()), then "ready", and waits to be killed: the test
// attaches gdb (tools/goro-gdb.py) to it and to a core file of it
// (argument "gcore": see main).
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <goro/goro.hpp>
#include <mutex>
#include <optional>
#include <string>

using namespace std::chrono_literals;

#define GDB_KEEP_FRAME() asm volatile("" ::: "memory")

namespace {

struct parked {
  goro::chan<int> recv_c, send_c, sel_a, sel_b;
  goro::mutex mu;
  goro::wait_group wg;
  goro::mutex cond_mu;
  goro::cond cv;
  bool cond_go = false;
  std::atomic<bool> done{false};
};

[[gnu::noinline]] void gdb_park_chan_recv(parked& s) {
  (void)s.recv_c.recv();
  GDB_KEEP_FRAME();
}
[[gnu::noinline]] void gdb_park_chan_send(parked& s) {
  s.send_c.send(1);
  GDB_KEEP_FRAME();
}
[[gnu::noinline]] void gdb_park_select(parked& s) {
  goro::select(goro::on_recv(s.sel_a, [](std::optional<int>) {}), goro::on_recv(s.sel_b, [](std::optional<int>) {}));
  GDB_KEEP_FRAME();
}
[[gnu::noinline]] void gdb_park_sleep(parked& s) {
  while (!s.done.load()) goro::sleep_for(50ms);
  GDB_KEEP_FRAME();
}
[[gnu::noinline]] void gdb_park_mutex(parked& s) {
  s.mu.lock();
  s.mu.unlock();
  GDB_KEEP_FRAME();
}
[[gnu::noinline]] void gdb_park_wait_group(parked& s) {
  s.wg.wait();
  GDB_KEEP_FRAME();
}
[[gnu::noinline]] void gdb_park_cond(parked& s) {
  std::unique_lock<goro::mutex> lk(s.cond_mu);
  while (!s.cond_go) s.cv.wait(lk);
  GDB_KEEP_FRAME();
}
[[gnu::noinline]] void gdb_in_blocking_call(parked& s) {
  goro::blocking([&] {
    while (!s.done.load()) usleep(1000);
  });
  GDB_KEEP_FRAME();
}

[[gnu::noinline]] void gdb_spawner(parked& s) {
  void (*fns[])(parked&) = {gdb_park_chan_recv, gdb_park_chan_send,  gdb_park_select, gdb_park_sleep,
                            gdb_park_mutex,     gdb_park_wait_group, gdb_park_cond,   gdb_in_blocking_call};
  for (auto fn : fns) goro::go([&s, fn] { fn(s); });
  GDB_KEEP_FRAME();
}

[[gnu::noinline]] void gdb_main_wait(parked& s) {
  while (!s.done.load()) goro::sleep_for(100ms);
  GDB_KEEP_FRAME();
}

}  // namespace

int main(int argc, char** argv) {
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  // "gcore": stacks without MADV_GUARD_INSTALL guard pages. gdb's gcore
  // (13) cannot read a mapping that holds such pages and writes it as
  // zeros; PROT_NONE guards are separate mappings, which it skips.
  if (argc > 1 && std::string(argv[1]) == "gcore") goro::detail::guard_install_test_disable = true;
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    static parked s;  // lives on: the process is killed while goroutines wait
    s.mu.lock();
    s.wg.add(1);
    gdb_spawner(s);
    // Wait until all of them are parked where expected (and the blocking
    // call runs), then print their ids.
    const char* fns[] = {"gdb_park_chan_recv", "gdb_park_chan_send",  "gdb_park_select", "gdb_park_sleep",
                         "gdb_park_mutex",     "gdb_park_wait_group", "gdb_park_cond"};
    for (int tries = 0; tries < 1000; ++tries) {
      goro::sleep_for(10ms);
      int found = 0;
      for (const auto& gi : goro::goroutines())
        for (const char* fn : fns)
          for (const auto& f : gi.frames)
            if (gi.state == "waiting" && f.find(fn) != std::string::npos) ++found;
      if (found == 7) break;
    }
    for (const auto& gi : goro::goroutines()) {
      std::string fn = gi.frames.empty() ? "-" : "";
      for (const auto& f : gi.frames)
        if (f.find("::gdb_") != std::string::npos) {  // "(anonymous namespace)::gdb_park_...(...) +0x.."
          const std::size_t at = f.find("::gdb_") + 2;
          fn = f.substr(at, f.find('(', at) - at);
          break;
        }
      if (gi.wait_reason.rfind("blocking call", 0) == 0) fn = "gdb_in_blocking_call";
      std::printf("goroutine %llu %s\n", static_cast<unsigned long long>(gi.id), fn.empty() ? "-" : fn.c_str());
    }
    std::printf("ready\n");
    std::fflush(stdout);
    gdb_main_wait(s);
  });
  return 0;
}
