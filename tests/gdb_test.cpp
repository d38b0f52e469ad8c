// tools/goro-gdb.py driven by `gdb -batch`: `info goroutines` and
// `goroutine N bt` on a live process (the helper gdb_target, goroutines
// parked in named functions) and on a core file of it made by gcore,
// loaded the second time from the program's .debug_gdb_scripts section.
// Skipped (with a message) where gdb is missing, ptrace is not allowed,
// or the tests run under qemu-user (gdb cannot attach there); the core
// file case also under sanitizers (gcore would write their shadow memory).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace {

std::string gdbt_run(const std::string& cmd) {
  std::string out;
  if (std::FILE* p = popen((cmd + " 2>&1").c_str(), "r")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

bool gdbt_have(const char* tool) { return gdbt_run(std::string("command -v ") + tool).find('/') != std::string::npos; }

// The helper, started with its stdout on a pipe; its lines up to "ready".
struct gdbt_target {
  pid_t pid = -1;
  std::map<std::string, std::string> ids;  // function -> goroutine id
  explicit gdbt_target(const char* arg) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const std::string path = std::string(GORO_HELPERS_DIR) + "/goro_helper_gdb_target";
    const pid_t parent = getpid();
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // The helper sleeps until killed: if this test dies first (a failed
      // REQUIRE elsewhere, an interrupted run), the kernel ends it too.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      dup2(fds[1], 1);
      close(fds[0]);
      close(fds[1]);
      execl(path.c_str(), path.c_str(), arg, static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    std::FILE* in = fdopen(fds[0], "r");
    char line[512];
    while (std::fgets(line, sizeof line, in)) {
      std::string l(line);
      if (l.rfind("ready", 0) == 0) break;
      char fn[256];
      unsigned long long id;
      if (std::sscanf(line, "goroutine %llu %255s", &id, fn) == 2) ids[fn] = std::to_string(id);
    }
    std::fclose(in);
  }
  ~gdbt_target() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

struct gdbt_expect {
  const char* function;
  const char* reason;
};
const gdbt_expect gdbt_expected[] = {
    {"gdb_park_chan_recv", "chan receive"}, {"gdb_park_chan_send", "chan send"},
    {"gdb_park_select", "select"},          {"gdb_park_sleep", "sleep"},
    {"gdb_park_mutex", "sync.Mutex.Lock"},  {"gdb_park_wait_group", "sync.WaitGroup.Wait"},
    {"gdb_park_cond", "sync.Cond.Wait"},
};

std::string gdbt_line_of(const std::string& out, const std::string& id) {
  // info goroutines rows: "  ID  STATE  REASON  FRAME"
  std::size_t pos = 0;
  while ((pos = out.find("\n  " + id + " ", pos)) != std::string::npos) {
    const std::size_t end = out.find('\n', pos + 1);
    return out.substr(pos + 1, end == std::string::npos ? std::string::npos : end - pos - 1);
  }
  return "";
}

// The checks shared by the live and the core run.
void gdbt_check(const std::string& out, const gdbt_target& t, const std::string& bt_id) {
  INFO(out);
  CHECK(out.find("Wait reason") != std::string::npos);
  for (const auto& e : gdbt_expected) {
    INFO(e.function);
    auto it = t.ids.find(e.function);
    REQUIRE(it != t.ids.end());
    const std::string row = gdbt_line_of(out, it->second);
    INFO(row);
    CHECK(row.find("waiting") != std::string::npos);
    CHECK(row.find(e.reason) != std::string::npos);
    CHECK(row.find(std::string(e.function) + " at ") != std::string::npos);
    CHECK(row.find("gdb_target.cpp:") != std::string::npos);
  }
  // The goroutine in a blocking call runs on an M: its thread's frames.
  auto running = t.ids.find("gdb_in_blocking_call");
  REQUIRE(running != t.ids.end());
  const std::string row = gdbt_line_of(out, running->second);
  CHECK(row.find("running, thread ") != std::string::npos);
  CHECK(row.find("gdb_target.cpp:") != std::string::npos);
  // goroutine N bt: from the park site down to the goroutine's closure.
  const std::size_t bt = out.find("goroutine " + bt_id + " [chan receive]:\n#0  ");
  REQUIRE(bt != std::string::npos);
  const std::string text = out.substr(bt);
  CHECK(text.find("gdb_park_chan_recv (s=...) at ") != std::string::npos);
  CHECK(text.find("tests/helpers/gdb_target.cpp:") != std::string::npos);
  CHECK(text.find("goro_v0_1_start") == std::string::npos);  // cut at the goroutine's entry
  CHECK(text.find("created by ") != std::string::npos);
  CHECK(text.find("gdb_spawner") != std::string::npos);
}

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GDBT_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(GDBT_TSAN)
#define GDBT_TSAN 1
#endif

bool gdbt_skip(const char* what) {
#if defined(GDBT_TSAN)
  // The helper's blocking call then sits in TSan's interceptors, whose
  // frames have no line information: the row checks cannot hold (CI).
  std::printf("gdb_test: %s skipped under TSan (ASan and plain builds run it)\n", what);
  return true;
#elif defined(GORO_CROSS_TESTS)
  std::printf("gdb_test: %s skipped: cross build (qemu-user: gdb cannot attach)\n", what);
  return true;
#else
  if (!gdbt_have("gdb")) {
    std::printf("gdb_test: %s skipped: gdb is not installed\n", what);
    return true;
  }
  return false;
#endif
}

bool gdbt_no_ptrace(const std::string& out) {
  if (out.find("ptrace: Operation not permitted") == std::string::npos &&
      out.find("Could not attach") == std::string::npos && out.find("ptrace: ") == std::string::npos)
    return false;
  std::printf("gdb_test: skipped: ptrace is not permitted here:\n%s\n", out.c_str());
  return true;
}

// Under sanitizers the helper is instrumented too; a mismatch is reported,
// not failed, if gdb could not read the goroutines at all.
bool gdbt_sanitizer_excuse(const std::string& out) {
  if (!GORO_TEST_SANITIZED || out.find("Wait reason") != std::string::npos) return false;
  std::printf("gdb_test: skipped under a sanitizer: gdb saw no goroutines:\n%s\n", out.c_str());
  return true;
}

}  // namespace

TEST_CASE("gdb: info goroutines and goroutine N bt on a live process", "[gdb]") {
  if (gdbt_skip("live process")) return;
  gdbt_target t("live");
  REQUIRE(t.ids.count("gdb_park_chan_recv"));
  const std::string id = t.ids["gdb_park_chan_recv"];
  const std::string out = gdbt_run("timeout 120 gdb -batch -nx -p " + std::to_string(t.pid) + " -ex 'source " +
                                   GORO_SOURCE_DIR + "/tools/goro-gdb.py' -ex 'info goroutines' -ex 'goroutine " +
                                   id + " bt' -ex 'goroutine " + id + " bt 2'");
  if (gdbt_no_ptrace(out) || gdbt_sanitizer_excuse(out)) return;
  gdbt_check(out, t, id);
  // bt N counts the goroutine's own frames: a second, two-frame backtrace.
  const std::size_t second = out.find("goroutine " + id + " [chan receive]:", out.find("created by") + 1);
  REQUIRE(second != std::string::npos);
  const std::string two = out.substr(second);
  CHECK(two.find("\n#1 ") != std::string::npos);
  CHECK(two.find("\n#2 ") == std::string::npos);
  // The process goes on after gdb detached.
  CHECK(kill(t.pid, 0) == 0);
}

TEST_CASE("gdb: the same on a gcore core file, the script auto-loaded from the program", "[gdb]") {
  if (gdbt_skip("core file")) return;
  if (GORO_TEST_SANITIZED) {  // the sanitizers' shadow mappings would make a core of tens of GB
    std::printf("gdb_test: core file skipped under a sanitizer (its shadow memory would go into the core)\n");
    return;
  }
  if (!gdbt_have("gcore")) {
    std::printf("gdb_test: core file skipped: gcore is not installed\n");
    return;
  }
  gdbt_target t("gcore");
  REQUIRE(t.ids.count("gdb_park_chan_recv"));
  const std::string id = t.ids["gdb_park_chan_recv"];
  char dir[] = "/tmp/goro_gdb_test.XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string core = std::string(dir) + "/core";
  const std::string made = gdbt_run("timeout 120 gcore -o " + core + " " + std::to_string(t.pid));
  if (gdbt_no_ptrace(made)) return;
  const std::string core_file = core + "." + std::to_string(t.pid);
  INFO(made);
  REQUIRE(access(core_file.c_str(), R_OK) == 0);
  const std::string out =
      gdbt_run("timeout 120 gdb -batch -nx -iex 'set auto-load safe-path /' " + std::string(GORO_HELPERS_DIR) +
               "/goro_helper_gdb_target " + core_file + " -ex 'info goroutines' -ex 'goroutine " + id + " bt'");
  unlink(core_file.c_str());
  rmdir(dir);
  if (gdbt_sanitizer_excuse(out)) return;
  gdbt_check(out, t, id);
}
