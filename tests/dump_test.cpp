// The goroutine dump (goro::goroutine_dump / goro::goroutines): wait reasons
// at every park site, stacks of parked goroutines found without frame
// pointers (this file is built at -O2 like the rest), names from the
// program's own symbol table, "created by"; the deadlock error and SIGQUIT
// (in a child process) carrying it; GORO_DEBUG keys that are not understood.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <goro/goro.hpp>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"

using namespace std::chrono_literals;

namespace {

// Uniquely named, never inlined, never a tail call (the asm after the call):
// each must show up as a frame of its goroutine's stack.
#define GORO_DUMP_KEEP_FRAME() asm volatile("" ::: "memory")

struct parked {
  goro::chan<int> recv_c, send_c, sel_a, sel_b;
  goro::mutex mu;
  goro::wait_group wg;
  goro::mutex cond_mu;
  goro::cond cv;
  bool cond_go = false;
  goro::net::listener ln = goro::net::listen_tcp("127.0.0.1:0");
  std::atomic<bool> done{false};
  goro::wait_group finished;
};

[[gnu::noinline]] void dump_park_chan_recv(parked& s) {
  (void)s.recv_c.recv();
  GORO_DUMP_KEEP_FRAME();
}
[[gnu::noinline]] void dump_park_chan_send(parked& s) {
  s.send_c.send(1);
  GORO_DUMP_KEEP_FRAME();
}
[[gnu::noinline]] void dump_park_select(parked& s) {
  goro::select(goro::on_recv(s.sel_a, [](std::optional<int>) {}), goro::on_recv(s.sel_b, [](std::optional<int>) {}));
  GORO_DUMP_KEEP_FRAME();
}
[[gnu::noinline]] void dump_park_sleep(parked& s) {
  while (!s.done.load()) goro::sleep_for(20ms);
  GORO_DUMP_KEEP_FRAME();
}
[[gnu::noinline]] void dump_park_mutex(parked& s) {
  s.mu.lock();
  s.mu.unlock();
  GORO_DUMP_KEEP_FRAME();
}
[[gnu::noinline]] void dump_park_wait_group(parked& s) {
  s.wg.wait();
  GORO_DUMP_KEEP_FRAME();
}
[[gnu::noinline]] void dump_park_cond(parked& s) {
  std::unique_lock<goro::mutex> lk(s.cond_mu);
  while (!s.cond_go) s.cv.wait(lk);
  GORO_DUMP_KEEP_FRAME();
}
[[gnu::noinline]] void dump_park_io(parked& s) {
  auto c = s.ln.accept();
  GORO_DUMP_KEEP_FRAME();
}
[[gnu::noinline]] void dump_in_blocking_call(parked& s) {
  goro::blocking([&] {
    while (!s.done.load()) usleep(1000);
  });
  GORO_DUMP_KEEP_FRAME();
}

struct expectation {
  const char* function;
  const char* reason;
};
const expectation expected[] = {
    {"dump_park_chan_recv", "chan receive"}, {"dump_park_chan_send", "chan send"},
    {"dump_park_select", "select"},          {"dump_park_sleep", "sleep"},
    {"dump_park_mutex", "sync.Mutex.Lock"},  {"dump_park_wait_group", "sync.WaitGroup.Wait"},
    {"dump_park_cond", "sync.Cond.Wait"},    {"dump_park_io", "IO wait"},
};

// Spawns one goroutine per park site (and the blocking call): all are
// "created by" this function.
[[gnu::noinline]] void dump_spawner(parked& s) {
  void (*fns[])(parked&) = {dump_park_chan_recv, dump_park_chan_send, dump_park_select, dump_park_sleep,
                            dump_park_mutex,     dump_park_wait_group, dump_park_cond,  dump_park_io,
                            dump_in_blocking_call};
  for (auto fn : fns) {
    s.finished.add(1);
    goro::go([&s, fn] {
      fn(s);
      s.finished.done();
    });
  }
  GORO_DUMP_KEEP_FRAME();
}

bool has_frame(const goro::goroutine_info& gi, const char* fn) {
  for (const auto& f : gi.frames)
    if (f.find(fn) != std::string::npos) return true;
  return false;
}

// Frames are read for every build but TSan's (see dump.hpp).
constexpr bool frames_expected = !GORO_TSAN;

[[gnu::noinline]] std::vector<goro::goroutine_info> dump_self_caller() {
  auto gs = goro::goroutines();
  GORO_DUMP_KEEP_FRAME();
  return gs;
}

}  // namespace

TEST_CASE("dump: every wait reason, with the parked function, its stack and its creator", "[dump]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    parked s;
    s.wg.add(1);
    s.mu.lock();
    dump_spawner(s);
    // Wait until every goroutine sits where expected (bounded), in the
    // snapshot and in the text dump taken after it: the sleeper wakes every
    // 20 ms and is runnable for a moment then.
    std::vector<goro::goroutine_info> gs;
    std::string text;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    for (;;) {
      gs = goro::goroutines();
      text = goro::goroutine_dump();
      std::size_t ok = 0;
      for (const auto& e : expected) {
        for (const auto& gi : gs)
          if (gi.wait_reason == e.reason && (!frames_expected || has_frame(gi, e.function))) {
            ++ok;
            break;
          }
      }
      bool blocking = false;
      for (const auto& gi : gs) {
        blocking = blocking || gi.wait_reason == "blocking call";
        if (gi.state == "waiting" &&
            text.find("goroutine " + std::to_string(gi.id) + " [" + gi.wait_reason) == std::string::npos)
          ok = 0;  // it moved between the two
      }
      if ((ok == std::size(expected) && blocking) || std::chrono::steady_clock::now() > deadline) break;
      goro::sleep_for(10ms);
    }
    INFO(text);
    for (const auto& e : expected) {
      CAPTURE(e.function, e.reason);
      const goro::goroutine_info* gi = nullptr;
      for (const auto& x : gs)
        if (x.wait_reason == e.reason && (!frames_expected || has_frame(x, e.function))) gi = &x;
      REQUIRE(gi != nullptr);
      CHECK(gi->state == "waiting");
      CHECK(gi->id > 1);
      CHECK(gi->created_by.find("dump_spawner") != std::string::npos);
      CHECK(gi->waiting_for >= 0ns);
      CHECK(gi->waiting_for < 1min);
      if (frames_expected) {
        // Innermost first: a function's own frame with its offset, one
        // inlined into it (-g) marked so; the goroutine's function last (the
        // lambda given to go(), inlined into goro's closure: with -g its own
        // frame, without it the closure's, which carries its type). goro's
        // runtime frames (park, goroutine_main, ...) are left out, as Go's are.
        for (const auto& f : gi->frames) {
          CAPTURE(f);
          CHECK((f.find(" +0x") != std::string::npos || f.find(" (inlined)") != std::string::npos));
          CHECK((!goro::detail::runtime_frame(f) || goro::detail::closure_frame(f)));
        }
        for (const auto& f : gi->frames)
          if (f.find(e.function) != std::string::npos) CHECK(f.find(" +0x") != std::string::npos);
        const std::string& last = gi->frames.back();
        CHECK((last.find("goro::detail::set_closure<") != std::string::npos ||
               (last.find("dump_spawner") != std::string::npos && last.find(" (inlined)") != std::string::npos)));
      }
      // Go's format: the header line, then the frames, then "created by".
      const std::string header = "goroutine " + std::to_string(gi->id) + " [" + e.reason + "]:\n";
      CHECK(text.find(header) != std::string::npos);
    }
    // Ids are unique.
    for (std::size_t i = 1; i < gs.size(); ++i) CHECK(gs[i - 1].id < gs[i].id);
    // The goroutine inside goro::blocking runs (no frames), and says so.
    bool blocking = false;
    for (const auto& gi : gs)
      if (gi.wait_reason == "blocking call") {
        blocking = true;
        CHECK(gi.state == "running");
        CHECK(gi.created_by.find("dump_spawner") != std::string::npos);
      }
    CHECK(blocking);
    // The calling goroutine: running, its own frames (the dump's dropped).
    auto mine = dump_self_caller();
    bool self_seen = false;
    for (const auto& gi : mine)
      if (gi.state == "running" && gi.wait_reason == "running") {
        self_seen = true;
        CHECK(gi.created_by.empty());  // main has no creator
        if (frames_expected) {
          REQUIRE(!gi.frames.empty());
          CHECK(gi.frames.front().find("dump_self_caller") != std::string::npos);
        }
      }
    CHECK(self_seen);
    // Release everyone.
    s.done.store(true);
    goro::go([&] { s.recv_c.send(1); });
    (void)s.send_c.recv();
    s.sel_a.close();
    s.mu.unlock();
    s.wg.done();
    {
      std::lock_guard<goro::mutex> lk(s.cond_mu);
      s.cond_go = true;
    }
    s.cv.notify_all();
    auto c = goro::net::dial_tcp("127.0.0.1:" + std::to_string(s.ln.port()));
    s.finished.wait();
  });
}

TEST_CASE("dump: the goroutines of every runtime in the process", "[dump]") {
  goro::runtime a{goro::options{1}}, b{goro::options{1}};
  goro::chan<int> ca, cb;
  a.go([&] { (void)ca.recv(); });
  b.go([&] { (void)cb.recv(); });
  std::size_t receivers = 0;
  for (int i = 0; i < 2000 && receivers < 2; ++i) {
    receivers = 0;
    for (const auto& gi : goro::goroutines()) receivers += gi.wait_reason == "chan receive";
    if (receivers < 2) usleep(1000);
  }
  CHECK(receivers == 2);
  ca.send(1);
  cb.send(1);
}

TEST_CASE("dump: a wait of a minute or more shows its duration, as in Go", "[dump]") {
  std::vector<goro::goroutine_info> gs(2);
  gs[0].id = 7;
  gs[0].wait_reason = "chan receive";
  gs[0].waiting_for = 3min + 10s;
  gs[0].frames = {"f() +0x1a", "g() +0x2b"};
  gs[0].created_by = "main_fn()";
  gs[1].id = 8;
  gs[1].wait_reason = "select";
  gs[1].waiting_for = 59s;
  CHECK(goro::detail::format_goroutines(gs) ==
        "goroutine 7 [chan receive, 3 minutes]:\nf() +0x1a\ng() +0x2b\ncreated by main_fn()\n\n"
        "goroutine 8 [select]:\n");
}

TEST_CASE("dump: file:line goes under its frame, tab-indented, as in Go", "[dump][lines]") {
  std::vector<goro::goroutine_info> gs(1);
  gs[0].id = 7;
  gs[0].wait_reason = "chan receive";
  gs[0].frames = {"f() +0x1a", "g() +0x2b", "h() +0x3c"};
  gs[0].files = {"/src/a.cpp:12", "", "/src/b.cpp:40"};
  gs[0].created_by = "main_fn()";
  gs[0].created_by_file = "/src/main.cpp:9";
  CHECK(goro::detail::format_goroutines(gs) ==
        "goroutine 7 [chan receive]:\nf() +0x1a\n\t/src/a.cpp:12\ng() +0x2b\nh() +0x3c\n\t/src/b.cpp:40\n"
        "created by main_fn()\n\t/src/main.cpp:9\n");
}

namespace {
// The number after `key ` in the helper's output (0 if absent).
int helper_number(const std::string& out, const std::string& key) {
  const std::size_t at = out.find(key + " ");
  return at == std::string::npos ? 0 : std::atoi(out.c_str() + at + key.size() + 1);
}
// The line after the first line of `out` that starts with `prefix` and
// contains `inside` ("" if none).
std::string line_after(const std::string& out, const std::string& prefix, const std::string& inside = {}) {
  for (std::size_t at = 0; (at = out.find(prefix, at)) != std::string::npos; at += prefix.size()) {
    if (at != 0 && out[at - 1] != '\n') continue;
    const std::size_t eol = out.find('\n', at);
    if (eol == std::string::npos) return {};
    if (out.substr(at, eol - at).find(inside) == std::string::npos) continue;
    return out.substr(eol + 1, out.find('\n', eol + 1) - eol - 1);
  }
  return {};
}
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

// The helper of the -g cases, each case run with both where the build has
// the second (GCC): dump_lines, and dump_lines_lto, the same built with
// -flto, whose debug information names the inlined functions through
// references into other units (DW_FORM_ref_addr). Before the dump followed
// them, every inlined frame there was "?? (inlined)".
#if GORO_HELPER_DUMP_LINES_LTO
#define DUMP_LINES_HELPER() GENERATE(as<std::string>{}, "dump_lines", "dump_lines_lto")
#else
#define DUMP_LINES_HELPER() std::string("dump_lines")
#endif

TEST_CASE("dump: a program built with -g shows the file:line of each frame's call and of go()", "[dump][lines]") {
  // SPEC: "-g gives file:line where the dump can read it". The helper's
  // goroutine blocks in recv at a line it prints (__LINE__), called from a
  // goroutine it created with go() at another.
  const std::string helper = DUMP_LINES_HELPER();
  auto r = goro_test::run_helper(helper);
  INFO(helper << ":\n" << r.output);
  CHECK(r.exited);
  CHECK(r.exit_code == 0);
  const int recv_line = helper_number(r.output, "recv_line");
  const int go_line = helper_number(r.output, "go_line");
  REQUIRE(recv_line > 0);
  REQUIRE(go_line > 0);
  REQUIRE(r.output.find(" [chan receive]:\n") != std::string::npos);
  if (frames_expected) {
    // The frame of the function that called recv, then the line of that call
    // (recv and what it calls were inlined there: the call site, not chan.hpp).
    const std::string at = line_after(r.output, "(anonymous namespace)::dump_lines_parked(");
    CHECK(at.rfind("\t/", 0) == 0);
    CHECK(ends_with(at, "/dump_lines.cpp:" + std::to_string(recv_line)));
    CHECK(r.output.find("?? (inlined)") == std::string::npos);  // every inlined call named
    // The same in a frame of a function of a local type (as a lambda's
    // closure type is: inside the entry of the function defining it).
    const int lambda_line = helper_number(r.output, "lambda_line");
    REQUIRE(lambda_line > 0);
    // (At -O0 the lambda `body`'s own frame starts the same way: the
    // local type's frame is the one of own_frame.)
    const std::string in_lambda =
        line_after(r.output, "(anonymous namespace)::dump_lines_spawner(goro::chan<int", "::own_frame::operator()");
    CHECK(in_lambda.rfind("\t/", 0) == 0);
    CHECK(ends_with(in_lambda, "/dump_lines.cpp:" + std::to_string(lambda_line)));
  }
  // "created by", then the line of the go() call (no lines under
  // ThreadSanitizer, as no frames: symbolize.hpp).
  const std::string created = line_after(r.output, "created by (anonymous namespace)::dump_lines_spawner(");
  if (frames_expected) {
    CHECK(created.rfind("\t/", 0) == 0);
    CHECK(ends_with(created, "/dump_lines.cpp:" + std::to_string(go_line)));
  } else {
    CHECK(created.rfind('\t', 0) != 0);
  }
}

TEST_CASE("dump: rt.go and lane.go name their caller in created by as go() does", "[dump][lines]") {
  // SPEC: "created by <function> (the caller of go)". The pc that rt.go and
  // lane.go take sat, in the debug information, inside libstdc++'s inlined
  // unique_ptr::get: with -g the dump said "created by
  // std::__uniq_ptr_impl<...>::_M_ptr() const". Without -g it names the
  // function the code is in.
  const char* helper = GENERATE("dump_lines", "dump_lines_nog");
  CAPTURE(helper);
  auto r = goro_test::run_helper(helper);
  INFO(r.output);
  CHECK(r.exited);
  CHECK(r.exit_code == 0);
  int seen = 0;
  for (std::size_t at = 0; (at = r.output.find("outside_created_by ", at)) != std::string::npos; ++at) {
    const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
    CAPTURE(line);
    CHECK(line.find("dump_lines_outside_spawner(") != std::string::npos);
    ++seen;
  }
  CHECK(seen == 2);
}

TEST_CASE("dump: with -g, lambdas inlined into goro's closure are frames of their own, with their lines",
          "[dump][lines]") {
  // The common case at -O2: go([&] { ... c.recv(); }) inside main's lambda.
  // The goroutine's lambda, recv and goro's calls are all inlined into
  // goro's closure, and go() into main's lambda, itself inlined into the
  // closure of main: the dump shows the lambda and the line of its recv,
  // "created by" main's lambda and the line of the go() call, and nothing
  // of goro's closure (Go: main.main.func1, created by main.main).
  const std::string helper = DUMP_LINES_HELPER();
  auto r = goro_test::run_helper(helper);
  INFO(helper << ":\n" << r.output);
  CHECK(r.exited);
  CHECK(r.exit_code == 0);
  const int go_line = helper_number(r.output, "inline_go_line");
  REQUIRE(go_line > 0);
  if (!frames_expected) return;
  const std::string recv_at = "/dump_lines.cpp:" + std::to_string(go_line + 2) + "\n";
  const std::size_t at = r.output.find(recv_at);
  REQUIRE(at != std::string::npos);
  // The frame line above the file:line names the lambda.
  const std::size_t frame_end = r.output.rfind('\n', at);
  REQUIRE(frame_end != std::string::npos);
  const std::size_t frame_start = r.output.rfind('\n', frame_end - 1) + 1;
  const std::string frame = r.output.substr(frame_start, frame_end - frame_start);
  CAPTURE(frame);
  CHECK(frame.find("operator()") != std::string::npos);
  CHECK(frame.find("main") != std::string::npos);
  CHECK(!goro::detail::runtime_frame(frame));
  // Its creator: main's lambda, at the go() line.
  const std::size_t created = r.output.find("created by ", at);
  REQUIRE(created != std::string::npos);
  const std::size_t created_end = r.output.find('\n', created);
  CHECK(r.output.substr(created, created_end - created).find("main") != std::string::npos);
  CHECK(r.output.compare(created_end + 1, 2, "\t/") == 0);
  const std::size_t file_end = r.output.find('\n', created_end + 1);
  CHECK(ends_with(r.output.substr(created_end + 1, file_end - created_end - 1),
                  "/dump_lines.cpp:" + std::to_string(go_line)));
  // goro's closure stands for no goroutine here: each has a frame of its own code.
  CHECK(r.output.find("set_closure") == std::string::npos);
}

TEST_CASE("dump: a program built without -g shows no file:line of its own code", "[dump][lines]") {
  auto r = goro_test::run_helper("dump_lines_nog");
  INFO(r.output);
  CHECK(r.exited);
  CHECK(r.exit_code == 0);
  REQUIRE(r.output.find(" [chan receive]:\n") != std::string::npos);
  CHECK(r.output.find("dump_lines.cpp:") == std::string::npos);
  if (frames_expected) {
    CHECK(r.output.find("\n(anonymous namespace)::dump_lines_parked(") != std::string::npos);
    CHECK(line_after(r.output, "(anonymous namespace)::dump_lines_parked(").rfind('\t', 0) != 0);
  }
  CHECK(r.output.find("created by (anonymous namespace)::dump_lines_spawner(") != std::string::npos);
  CHECK(line_after(r.output, "created by (anonymous namespace)::dump_lines_spawner(").rfind('\t', 0) != 0);
}

namespace {
[[gnu::noinline]] void dump_deadlocked_main(goro::chan<int>& c) {
  (void)c.recv();
  GORO_DUMP_KEEP_FRAME();
}
}  // namespace

TEST_CASE("dump: deadlock_error carries the dump", "[dump][deadlock]") {
  goro::runtime rt{goro::options{1}};
  goro::chan<int> never;
  std::string what;
  try {
    rt.run([&] { dump_deadlocked_main(never); });
  } catch (const goro::deadlock_error& e) {
    what = e.what();
  }
  INFO(what);
  CHECK(what.rfind("goro: all goroutines are asleep - deadlock!\n\ngoroutine ", 0) == 0);
  CHECK(what.find(" [chan receive]:\n") != std::string::npos);
  if (frames_expected) CHECK(what.find("dump_deadlocked_main") != std::string::npos);
}

TEST_CASE("dump: SIGQUIT prints the dump on stderr and exits with status 2", "[dump][signal]") {
  auto r = goro_test::run_helper("dump_sigquit", {"dump"});
  INFO(r.output);
  CHECK(r.exited);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("SIGQUIT: quit\n\ngoroutine ") != std::string::npos);
  CHECK(r.output.find(" [chan receive]:\n") != std::string::npos);
  if (frames_expected) {
    CHECK(r.output.find("helper_parked_receiver") != std::string::npos);
    CHECK(r.output.find("created by (anonymous namespace)::helper_spawner(") != std::string::npos);
    // main (goroutine 1) sleeps when the signal comes: its stack too.
    const std::size_t main_at = r.output.find("goroutine 1 [");
    REQUIRE(main_at != std::string::npos);
    const std::size_t eol = r.output.find('\n', main_at);
    REQUIRE(eol != std::string::npos);
    // main's frames run to the blank line that ends its block; among them
    // the helper's lambda in main ("main::{lambda()#1}" from g++,
    // "main::$_1" from clang, below park's frames where they are not inlined)
    const std::size_t end = r.output.find("\n\n", eol + 1);
    const std::string g1 = r.output.substr(eol + 1, end == std::string::npos ? std::string::npos : end - eol - 1);
    CHECK((g1.find("main::{lambda") != std::string::npos || g1.find("main::$_") != std::string::npos));
  }
}

TEST_CASE("dump: SIGQUIT keeps the program's own handler, and GORO_DEBUG=sigquit=0", "[dump][signal]") {
  auto own = goro_test::run_helper("dump_sigquit", {"own"});
  INFO(own.output);
  CHECK(own.exited);
  CHECK(own.exit_code == 7);
  CHECK(own.output.find("goroutine ") == std::string::npos);

  setenv("GORO_DEBUG", "sigquit=0", 1);
  auto off = goro_test::run_helper("dump_sigquit", {"dump"});
  unsetenv("GORO_DEBUG");
  INFO(off.output);
  CHECK(off.signaled);
  CHECK(off.signal == SIGQUIT);
  CHECK(off.output.find("goroutine ") == std::string::npos);
}

TEST_CASE("dump: GORO_DEBUG keys that are not understood are reported", "[dump]") {
  setenv("GORO_DEBUG", "schedtrace=0,bogus=1", 1);
  auto r = goro_test::run_helper("dump_sigquit", {"quiet"});
  unsetenv("GORO_DEBUG");
  INFO(r.output);
  CHECK(r.exited);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("goro: GORO_DEBUG: unknown setting \"bogus=1\"") != std::string::npos);
  CHECK(r.output.find("unknown setting \"schedtrace") == std::string::npos);  // a known key is not reported
}

TEST_CASE("dump: SIGQUIT notified before the first runtime gets the dump back at stop", "[dump][signal]") {
  // The runtime took notify's relay handler for the program's own SIGQUIT
  // handler and left the dump off; stop then restored the default action.
  auto r = goro_test::run_helper("dump_sigquit", {"notified"});
  INFO(r.output);
  CHECK(r.exited);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("SIGQUIT: quit\n\ngoroutine ") != std::string::npos);
}

TEST_CASE("dump: a GORO_DEBUG key given twice takes its last valid value, as Go's GODEBUG", "[dump]") {
  // The first one won: GORO_DEBUG=sigquit=0 in a profile, then
  // ",sigquit=1" appended for one run, left the dump off.
  setenv("GORO_DEBUG", "sigquit=0,schedtrace=5,sigquit=1,schedtrace=7", 1);
  CHECK(goro::detail::debug_setting("sigquit", 1) == 1);
  CHECK(goro::detail::debug_setting("schedtrace", 0) == 7);
  // A later value that is not a number is ignored (reported at start-up):
  // the last valid one stays.
  setenv("GORO_DEBUG", "sigquit=0,sigquit=yes", 1);
  CHECK(goro::detail::debug_setting("sigquit", 1) == 0);
  unsetenv("GORO_DEBUG");
  CHECK(goro::detail::debug_setting("sigquit", 1) == 1);
}

TEST_CASE("dump: GORO_DEBUG values that are not numbers are reported and ignored", "[dump][signal]") {
  // strtol read "sigquit=yes" as 0: the SIGQUIT dump was silently off.
  setenv("GORO_DEBUG", "sigquit=yes", 1);
  auto r = goro_test::run_helper("dump_sigquit", {"dump"});
  unsetenv("GORO_DEBUG");
  INFO(r.output);
  CHECK(r.output.find("goro: GORO_DEBUG: invalid value in \"sigquit=yes\"") != std::string::npos);
  CHECK(r.exited);
  CHECK(r.exit_code == 2);  // the dump is on, as without the setting
  CHECK(r.output.find("SIGQUIT: quit\n\ngoroutine ") != std::string::npos);

  setenv("GORO_DEBUG", "schedtrace=10ms,sigquit=", 1);
  auto q = goro_test::run_helper("dump_sigquit", {"quiet"});
  unsetenv("GORO_DEBUG");
  INFO(q.output);
  CHECK(q.exited);
  CHECK(q.exit_code == 0);
  CHECK(q.output.find("invalid value in \"schedtrace=10ms\"") != std::string::npos);
  CHECK(q.output.find("invalid value in \"sigquit=\"") != std::string::npos);
  CHECK(q.output.find("SCHED ") == std::string::npos);  // schedtrace ignored

  // A known key without a value: reported as such, not as an unknown key.
  setenv("GORO_DEBUG", "sigquit", 1);
  auto k = goro_test::run_helper("dump_sigquit", {"quiet"});
  unsetenv("GORO_DEBUG");
  INFO(k.output);
  CHECK(k.exit_code == 0);
  CHECK(k.output.find("invalid value in \"sigquit\"") != std::string::npos);
  CHECK(k.output.find("unknown setting") == std::string::npos);
}

TEST_CASE("dump: the shutdown report lists the goroutines blocked forever", "[dump]") {
  auto r = goro_test::run_helper("dump_sigquit", {"shutdown"});
  INFO(r.output);
  CHECK(r.exited);
  CHECK(r.output.find("goro: 1 goroutine blocked forever at shutdown\n\ngoroutine ") != std::string::npos);
  CHECK(r.output.find(" [sync.WaitGroup.Wait]:\n") != std::string::npos);
  if (frames_expected) CHECK(r.output.find("helper_forever") != std::string::npos);
}

TEST_CASE("dump: goroutines blocked on nil channels show Go's wait reasons", "[dump][nil]") {
  // Go prints [chan receive (nil chan)], [chan send (nil chan)] and
  // [select (no cases)]: a hang on a nil channel is then read off the dump.
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> nil_c = nullptr;
    goro::wait_group started;
    started.add(3);
    goro::go([&] {
      started.done();
      (void)nil_c.recv();
    });
    goro::go([&] {
      started.done();
      nil_c.send(1);
    });
    goro::go([&] {
      started.done();
      goro::select(goro::on_recv(nil_c, [](std::optional<int>) {}));
    });
    started.wait();
    const char* reasons[] = {"chan receive (nil chan)", "chan send (nil chan)", "select (no cases)"};
    std::vector<goro::goroutine_info> gs;
    std::string text;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    std::size_t seen = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      gs = goro::goroutines();
      text = goro::goroutine_dump();
      seen = 0;
      for (const char* r : reasons)
        for (const auto& gi : gs)
          if (gi.wait_reason == r && gi.state == "waiting" &&
              text.find("goroutine " + std::to_string(gi.id) + " [" + r + "]:\n") != std::string::npos) {
            ++seen;
            break;
          }
      if (seen == std::size(reasons)) break;
      goro::sleep_for(5ms);
    }
    INFO(text);
    CHECK(seen == std::size(reasons));
    // main returns: main_return::unwind ends the three.
  });
}

TEST_CASE("dump: taken from a plain thread while goroutines spawn and exit", "[dump][churn]") {
  // G records are freed and reused by spawns while the dump reads them:
  // under ThreadSanitizer the dump's reads of a record's id, runtime and
  // creator raced with the spawn writing them (3 of 3 runs reported it).
  goro::runtime rt{goro::options{3}};
  std::atomic<bool> stop{false};
  std::atomic<int> dumps{0};
  std::atomic<int> bad{0};
  std::thread dumper([&] {
    while (!stop.load()) {
      auto gs = goro::goroutines();
      for (std::size_t i = 1; i < gs.size(); ++i)
        if (gs[i - 1].id >= gs[i].id) bad.fetch_add(1);
      for (const auto& gi : gs)
        if (gi.state != "running" && gi.state != "runnable" && gi.state != "waiting") bad.fetch_add(1);
      (void)goro::goroutine_dump();
      dumps.fetch_add(1);
    }
  });
  rt.run([&] {
    goro::chan<int> c(4);
    goro::wait_group wg;
    const auto until = std::chrono::steady_clock::now() + 300ms;
    for (int w = 0; w < 3; ++w) {
      wg.add(1);
      goro::go([&] {
        while (std::chrono::steady_clock::now() < until || dumps.load() < 3) {
          goro::wait_group one;
          one.add(1);
          goro::go([&] {
            c.send(1);
            one.done();
          });
          (void)c.recv();
          one.wait();
        }
        wg.done();
      });
    }
    wg.wait();
  });
  stop = true;
  dumper.join();
  CHECK(dumps.load() >= 3);
  CHECK(bad.load() == 0);
}

TEST_CASE("dump: timed waits show their wait reasons, as the untimed ones", "[dump][timed]") {
  // cond::wait_for, wait_group::wait_for, mutex::try_lock_for and
  // semaphore::try_acquire_for: a goroutine stuck in one showed [waiting].
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::mutex mu, cv_mu;
    goro::cond cv;
    goro::wait_group never, started;
    never.add(1);
    mu.lock();
    started.add(3);
    goro::go([&] {
      std::unique_lock<goro::mutex> lk(cv_mu);
      started.done();
      (void)cv.wait_for(lk, 1h);
    });
    goro::go([&] {
      started.done();
      (void)never.wait_for(1h);
    });
    goro::go([&] {
      started.done();
      if (mu.try_lock_for(1h)) mu.unlock();
    });
    started.wait();
    const char* reasons[] = {"sync.Cond.Wait", "sync.WaitGroup.Wait", "sync.Mutex.Lock"};
    std::string text;
    std::size_t seen = 0;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      const auto gs = goro::goroutines();
      text = goro::goroutine_dump();
      seen = 0;
      for (const char* r : reasons)
        for (const auto& gi : gs)
          if (gi.id != 1 && gi.state == "waiting" && gi.wait_reason == r) {
            ++seen;
            break;
          }
      if (seen == std::size(reasons)) break;
      goro::sleep_for(5ms);
    }
    INFO(text);
    CHECK(seen == std::size(reasons));
    mu.unlock();
    never.done();
    cv.notify_all();
  });
}

TEST_CASE("dump: SIGQUIT to a forked child ends the child, not its parent", "[dump][signal]") {
  // The child inherited the handler and the pipe to the parent's dump
  // thread: its SIGQUIT dumped the parent, which exited 2, and the child
  // lived on.
  auto r = goro_test::run_helper("dump_sigquit", {"forked"});
  INFO(r.output);
  CHECK(r.exited);
  CHECK(r.exit_code == 0);
  // Under ThreadSanitizer (which defers handlers) the forked child never
  // runs one: it exits on its own, and only the parent's side is checked.
  if (!GORO_TEST_TSAN) CHECK(r.output.find("child: signal " + std::to_string(SIGQUIT) + "\n") != std::string::npos);
  CHECK(r.output.find("parent alive") != std::string::npos);
  CHECK(r.output.find("SIGQUIT: quit") == std::string::npos);
}

namespace {
// Polls the dump (bounded) until every reason in `reasons` is shown by a
// waiting goroutine other than main; returns the last text dump.
std::string wait_for_reasons(const std::vector<std::string>& reasons) {
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  for (;;) {
    const auto gs = goro::goroutines();
    text = goro::goroutine_dump();
    std::size_t seen = 0;
    for (const auto& r : reasons)
      for (const auto& gi : gs)
        if (gi.id != 1 && gi.state == "waiting" && gi.wait_reason == r &&
            text.find("goroutine " + std::to_string(gi.id) + " [" + r) != std::string::npos) {
          ++seen;
          break;
        }
    if (seen == reasons.size() || std::chrono::steady_clock::now() > deadline) return text;
    goro::sleep_for(5ms);
  }
}
}  // namespace

TEST_CASE("dump: rw_mutex waits show Go's sync.RWMutex.Lock and sync.RWMutex.RLock", "[dump][rw_mutex]") {
  // Go 1.20 names the two semaphores of an RWMutex; goro showed both as
  // semacquire.
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::rw_mutex rw;
    goro::wait_group done;
    rw.lock_shared();  // main reads: a writer must wait for it
    done.add(2);
    goro::go([&] {
      rw.lock();  // waits for main to leave: sync.RWMutex.Lock
      rw.unlock();
      done.done();
    });
    std::string text = wait_for_reasons({"sync.RWMutex.Lock"});
    goro::go([&] {
      rw.lock_shared();  // behind the pending writer: sync.RWMutex.RLock
      rw.unlock_shared();
      done.done();
    });
    text = wait_for_reasons({"sync.RWMutex.Lock", "sync.RWMutex.RLock"});
    INFO(text);
    CHECK(text.find(" [sync.RWMutex.Lock]:\n") != std::string::npos);
    CHECK(text.find(" [sync.RWMutex.RLock]:\n") != std::string::npos);
    CHECK(text.find("[semacquire]") == std::string::npos);
    rw.unlock_shared();
    done.wait();
  });
}

TEST_CASE("dump: a goroutine locked to its thread says so, as in Go", "[dump][lock_os_thread]") {
  // Go's header line ends with ", locked to thread" (after the minutes)
  // for a goroutine inside runtime.LockOSThread.
  std::vector<goro::goroutine_info> fmt(1);
  fmt[0].id = 7;
  fmt[0].wait_reason = "chan receive";
  fmt[0].waiting_for = 3min;
  fmt[0].locked_to_thread = true;
  CHECK(goro::detail::format_goroutines(fmt) == "goroutine 7 [chan receive, 3 minutes, locked to thread]:\n");

  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> c;
    goro::wait_group done;
    done.add(1);
    goro::go([&] {
      goro::lock_os_thread();
      (void)c.recv();
      goro::unlock_os_thread();
      done.done();
    });
    const std::string text = wait_for_reasons({"chan receive"});
    INFO(text);
    CHECK(text.find(" [chan receive, locked to thread]:\n") != std::string::npos);
    // main (which did not lock itself) is not marked, even where the runtime
    // keeps it on the run() caller's thread; it is once it locks itself.
    for (const auto& gi : goro::goroutines())
      if (gi.id == 1) CHECK(!gi.locked_to_thread);
    goro::lock_os_thread();
    bool self_locked = false;
    for (const auto& gi : goro::goroutines())
      if (gi.id == 1) self_locked = gi.locked_to_thread;
    goro::unlock_os_thread();
    CHECK(self_locked);
    CHECK(goro::goroutine_dump().find("goroutine 1 [running]:\n") != std::string::npos);
    c.send(1);
    done.wait();
  });
}

TEST_CASE("dump: goro's runtime frames are left out, as Go leaves out runtime.*", "[dump][frames]") {
  // The names: goro::detail functions (also after a template's return
  // type) are the runtime's, but for the goroutine's closure; a
  // goro::detail type among the parameters does not count.
  using goro::detail::runtime_frame;
  CHECK(runtime_frame("goro::detail::park(goro::detail::m_base*, bool (*)(void*), void*) +0x7c"));
  CHECK(runtime_frame("goro::detail::scheduler<goro::default_policy>::goroutine_main(void*) +0x47"));
  CHECK(runtime_frame("std::optional<int> goro::detail::chan_recv<int>(goro::chan<int>&) +0x1a"));
  // The closure is goro's too (the dump keeps it only where nothing else
  // names the goroutine's function).
  const std::string closure =
      "goro::detail::set_closure<main::{lambda()#1}>(goro::detail::g*, main::{lambda()#1}&&)::"
      "{lambda(goro::detail::g*, bool)#1}::_FUN(goro::detail::g*, bool) +0x42";
  CHECK(runtime_frame(closure));
  CHECK(goro::detail::closure_frame(closure));
  CHECK(!goro::detail::closure_frame("goro::detail::park(goro::detail::m_base*, bool (*)(void*), void*) +0x7c"));
  // A lambda of goro's public templates (run()'s wrapper of main), and the
  // standard library's call plumbing between the closure and the callable.
  CHECK(
      runtime_frame("goro::basic_runtime<goro::default_policy>::run<main::{lambda()#1}>(main::{lambda()#1}&&)::"
                    "{lambda(goro::detail::g*)#1}::operator()(goro::detail::g*) const (inlined)"));
  CHECK(runtime_frame("std::__invoke_impl<void, main()::<lambda()> > (inlined)"));
  CHECK(runtime_frame("decltype(auto) std::apply<F&, std::tuple<int>&>(F&, std::tuple<int>&) +0x1f"));
  CHECK(!runtime_frame("worker(goro::detail::g*, goro::chan<int>) +0xce"));
  CHECK(!runtime_frame("(anonymous namespace)::fetch(goro::chan<int>) +0x1a"));
  CHECK(!runtime_frame("goro::wait_group::wait() +0x10"));
  CHECK(!runtime_frame("goro::chan<int, std::allocator<int> >::recv() (inlined)"));
  CHECK(!runtime_frame("main::{lambda}::operator()::{lambda}::operator() (inlined)"));
  CHECK(!runtime_frame("void run_all<goro::chan<int>>(std::vector<goro::chan<int>>&) +0x2c"));
  // A parked goroutine's dump: its own frames, its closure, nothing of
  // goro's runtime (its park, the channel's internals, goroutine_main).
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> c;
    goro::go([&] { dump_deadlocked_main(c); });
    const std::string text = wait_for_reasons({"chan receive"});
    INFO(text);
    if (frames_expected) {
      CHECK(text.find("dump_deadlocked_main(") != std::string::npos);
      // Below it the goroutine's function: the lambda (with -g, inlined
      // into the closure or not; GCC's "{lambda", clang's "$_N") or the
      // closure, which carries its type (without -g).
      const std::size_t at = text.find("dump_deadlocked_main(");
      const std::string below = at == std::string::npos ? std::string() : text.substr(at);
      CHECK((below.find("goro::detail::set_closure<") != std::string::npos ||
             below.find("{lambda") != std::string::npos || below.find("$_") != std::string::npos));
      CHECK(text.find("\ngoro::detail::park") == std::string::npos);
      CHECK(text.find("goroutine_main") == std::string::npos);
      CHECK(text.find("run_goroutine") == std::string::npos);
    }
    CHECK(text.find("created by ") != std::string::npos);  // kept, as in Go
    c.send(1);
  });
}
