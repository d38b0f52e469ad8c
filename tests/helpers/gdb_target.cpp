// Child process for gdb_test: goroutines parked in several wait reasons,
// each inside a uniquely named noinline function, and one in a blocking
// call (running on an M). Prints "goroutine ID FUNCTION" for each (from
// goro::goroutines()), then "ready", and waits to be killed: the test
// attaches gdb (tools/goro-gdb.py) to it and to a core file of it
// (argument "gcore": see main).
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
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
  std::atomic<std::uint64_t> ids[8] = {};  // each function's goroutine, by its index in fns
};

[[gnu::noinline]] void gdb_park_chan_recv(parked& s) {
  s.ids[0] = goro::this_goroutine::id();
  (void)s.recv_c.recv();
  GDB_KEEP_FRAME();
}
[[gnu::noinline]] void gdb_park_chan_send(parked& s) {
  s.ids[1] = goro::this_goroutine::id();
  s.send_c.send(1);
  GDB_KEEP_FRAME();
}
[[gnu::noinline]] void gdb_park_select(parked& s) {
  s.ids[2] = goro::this_goroutine::id();
  goro::select(goro::on_recv(s.sel_a, [](std::optional<int>) {}), goro::on_recv(s.sel_b, [](std::optional<int>) {}));
  GDB_KEEP_FRAME();
}
[[gnu::noinline]] void gdb_park_sleep(parked& s) {
  s.ids[3] = goro::this_goroutine::id();
  // One long sleep: a sleeper that woke now and then could be runnable at
  // the moment gdb stops the process (seen under ASan in CI).
  while (!s.done.load()) goro::sleep_for(24h);
  GDB_KEEP_FRAME();
}
[[gnu::noinline]] void gdb_park_mutex(parked& s) {
  s.ids[4] = goro::this_goroutine::id();
  s.mu.lock();
  s.mu.unlock();
  GDB_KEEP_FRAME();
}
[[gnu::noinline]] void gdb_park_wait_group(parked& s) {
  s.ids[5] = goro::this_goroutine::id();
  s.wg.wait();
  GDB_KEEP_FRAME();
}
[[gnu::noinline]] void gdb_park_cond(parked& s) {
  s.ids[6] = goro::this_goroutine::id();
  std::unique_lock<goro::mutex> lk(s.cond_mu);
  while (!s.cond_go) s.cv.wait(lk);
  GDB_KEEP_FRAME();
}
[[gnu::noinline]] void gdb_in_blocking_call(parked& s) {
  s.ids[7] = goro::this_goroutine::id();
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
  while (!s.done.load()) goro::sleep_for(24h);
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
    // Wait until all of them are parked (and the blocking call runs),
    // then print their ids. (By id, not by the dump's frames: under
    // ThreadSanitizer the dump shows none.)
    const char* fns[] = {"gdb_park_chan_recv", "gdb_park_chan_send",  "gdb_park_select", "gdb_park_sleep",
                         "gdb_park_mutex",     "gdb_park_wait_group", "gdb_park_cond",   "gdb_in_blocking_call"};
    for (int tries = 0; tries < 2000; ++tries) {
      goro::sleep_for(10ms);
      int ready = 0;
      const auto gs = goro::goroutines();
      for (int i = 0; i < 8; ++i)
        for (const auto& gi : gs)
          if (gi.id == s.ids[i].load() && gi.id != 0 &&
              (i == 7 ? gi.wait_reason.rfind("blocking call", 0) == 0 : gi.state == "waiting"))
            ++ready;
      if (ready == 8) break;
    }
    for (int i = 0; i < 8; ++i)
      std::printf("goroutine %llu %s\n", static_cast<unsigned long long>(s.ids[i].load()), fns[i]);
    std::printf("ready\n");
    std::fflush(stdout);
    gdb_main_wait(s);
  });
  return 0;
}
