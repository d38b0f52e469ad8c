// goro::trace: the Chrome trace (JSON) of runs, steals, preemptions,
// blocking calls, blocks and wake-ups, on a track per P and per M. The
// file is parsed with a small JSON reader here, so a malformed trace fails.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <variant>
#include <vector>

#include "test_util.hpp"

using namespace std::chrono_literals;

namespace {

// ---- a minimal JSON reader (objects, arrays, strings, numbers, literals) ----

struct json;
using json_object = std::map<std::string, json>;
using json_array = std::vector<json>;
struct json {
  std::variant<std::nullptr_t, bool, double, std::string, json_array, json_object> v;
  const json_object& obj() const { return std::get<json_object>(v); }
  const json_array& arr() const { return std::get<json_array>(v); }
  const std::string& str() const { return std::get<std::string>(v); }
  double num() const { return std::get<double>(v); }
  bool has(const std::string& k) const { return std::holds_alternative<json_object>(v) && obj().count(k) != 0; }
  const json& operator[](const std::string& k) const { return obj().at(k); }
};

struct json_reader {
  const std::string& s;
  std::size_t i = 0;
  bool ok = true;

  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  json fail() {
    ok = false;
    return {};
  }
  json value() {
    ws();
    if (!ok || i >= s.size()) return fail();
    char c = s[i];
    if (c == '{') {
      ++i;
      json_object o;
      if (eat('}')) return {o};
      do {
        ws();
        json k = value();
        if (!ok || !std::holds_alternative<std::string>(k.v) || !eat(':')) return fail();
        o[k.str()] = value();
      } while (ok && eat(','));
      if (!eat('}')) return fail();
      return {o};
    }
    if (c == '[') {
      ++i;
      json_array a;
      if (eat(']')) return {a};
      do a.push_back(value());
      while (ok && eat(','));
      if (!eat(']')) return fail();
      return {a};
    }
    if (c == '"') {
      std::string out;
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\') {
          if (++i >= s.size()) return fail();
        } else if (static_cast<unsigned char>(s[i]) < 0x20) {
          return fail();  // raw control character
        }
        out += s[i];
      }
      if (i >= s.size()) return fail();
      ++i;
      return {out};
    }
    if (s.compare(i, 4, "true") == 0) return i += 4, json{true};
    if (s.compare(i, 5, "false") == 0) return i += 5, json{false};
    if (s.compare(i, 4, "null") == 0) return i += 4, json{nullptr};
    std::size_t used = 0;
    double d = 0;
    try {
      d = std::stod(s.substr(i, 32), &used);
    } catch (...) {
      return fail();
    }
    if (used == 0) return fail();
    i += used;
    return {d};
  }
};

// Parses a trace (Chrome's JSON array form); `cut_short`: a trace whose
// writer was killed, which may lack the closing bracket (Chrome and
// Perfetto add it). REQUIREs valid JSON.
json_array parse_trace(std::string text, bool cut_short = false) {
  if (cut_short) {
    std::size_t end = text.find_last_not_of(" \n\r\t");
    if (end == std::string::npos || text[end] != ']') text += "]";
  }
  json_reader r{text};
  json doc = r.value();
  r.ws();
  INFO(text.substr(0, 2000));
  REQUIRE(r.ok);
  REQUIRE(r.i == text.size());  // nothing after the document
  REQUIRE(std::holds_alternative<json_array>(doc.v));
  return doc.arr();
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Reads a finished trace file.
json_array read_trace(const std::string& path) { return parse_trace(read_file(path)); }

std::string temp_trace_path(const char* tag) {
  return "/tmp/goro_trace_test_" + std::to_string(::getpid()) + "_" + tag + ".json";
}

struct trace_file {
  std::string path;
  explicit trace_file(const char* tag) : path(temp_trace_path(tag)) {}
  ~trace_file() { std::remove(path.c_str()); }
};

bool is(const json& e, const char* cat, const char* ph) {
  return e.has("cat") && e["cat"].str() == cat && e["ph"].str() == ph;
}

// The track names: (pid, tid) -> name, from the metadata events.
std::map<std::pair<int, int>, std::string> track_names(const json_array& evs) {
  std::map<std::pair<int, int>, std::string> names;
  for (const json& e : evs)
    if (e["ph"].str() == "M" && e["name"].str() == "thread_name")
      names[{int(e["pid"].num()), int(e["tid"].num())}] = e["args"]["name"].str();
  return names;
}

}  // namespace

TEST_CASE("trace: runs, blocks, wake-ups and blocking calls on P and M tracks", "[trace]") {
  trace_file tf("main");
  constexpr int n = 40;
  std::set<std::uint64_t> ids;
  std::uint64_t blocker = 0;
  goro::runtime rt{goro::options{2}};
  goro::trace::start(tf.path);
  CHECK(goro::trace::running());
  rt.run([&] {
    goro::chan<std::uint64_t> c;
    for (int i = 0; i < n; ++i)
      goro::go([c]() mutable {
        for (int k = 0; k < 3; ++k) goro::yield();
        c.send(goro::this_goroutine::id());
      });
    goro::chan<std::uint64_t> b;
    goro::go([b]() mutable {
      goro::blocking([] { std::this_thread::sleep_for(3ms); });
      b.send(goro::this_goroutine::id());
    });
    for (int i = 0; i < n; ++i) ids.insert(*c.recv());
    blocker = *b.recv();
  });
  // run() returns when main does: the senders may still be on their way
  // out, and their exit events must be in the trace.
  REQUIRE(goro_test::eventually_sleeping([&] { return rt.num_goroutine() == 0; }));
  goro::trace::stop();
  CHECK_FALSE(goro::trace::running());

  const json_array evs = read_trace(tf.path);
  std::set<std::uint64_t> ran_on_p, ran_on_m, exited;
  std::map<std::string, int> ends;
  int blocks = 0, wakes = 0, syscalls = 0;
  for (const json& e : evs) {
    if (e["ph"].str() == "M") continue;
    REQUIRE(e["ts"].num() >= 0);
    if (is(e, "run", "X")) {
      REQUIRE(e["dur"].num() >= 0);
      const auto g = static_cast<std::uint64_t>(e["args"]["g"].num());
      const int pid = int(e["pid"].num());
      (pid % 2 == 1 ? ran_on_p : ran_on_m).insert(g);
      const std::string end = e["args"]["end"].str();
      ++ends[end];
      if (end == "exit") exited.insert(g);
    } else if (is(e, "block", "i")) {
      ++blocks;
    } else if (is(e, "wake", "i")) {
      ++wakes;
    } else if (is(e, "syscall", "X")) {
      ++syscalls;
      CHECK(static_cast<std::uint64_t>(e["args"]["g"].num()) == blocker);
      CHECK(e["dur"].num() >= 3000.0);      // microseconds
      CHECK(int(e["pid"].num()) % 2 == 0);  // an M track
    }
  }
  for (std::uint64_t g : ids) {
    CHECK(ran_on_p.count(g) == 1);
    CHECK(ran_on_m.count(g) == 1);
    CHECK(exited.count(g) == 1);
  }
  CHECK(ends["yield"] >= 2 * 3 * n);  // each yield ends a slice, on both tracks
  CHECK(ends["blocked"] >= 2);        // main blocks in recv at least once
  CHECK(blocks >= 1);
  CHECK(wakes >= 1);
  CHECK(syscalls == 1);
  auto names = track_names(evs);
  std::set<std::string> name_set;
  for (auto& [k, v] : names) name_set.insert(v);
  CHECK(name_set.count("P0") == 1);
  CHECK(name_set.count("M0") == 1);  // the run() caller's thread
}

TEST_CASE("trace: preemptions and steals are marked", "[trace]") {
  trace_file tf("preempt");
  goro::runtime rt{goro::options{2}};
  goro::trace::start(tf.path);
  std::uint64_t hog = 0;
  rt.run([&] {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    // A hog that runs for 60 ms, six 10 ms slices (and on until some
    // preemption has happened), so sysmon preempts it at least once ...
    goro::chan<std::uint64_t> done;
    goro::go([&, done]() mutable {
      const auto before = rt.stats().preemptions;
      const auto min_end = std::chrono::steady_clock::now() + 60ms;
      while ((std::chrono::steady_clock::now() < min_end || rt.stats().preemptions == before) &&
             std::chrono::steady_clock::now() < deadline)
        goro::preempt_point();
      done.send(goro::this_goroutine::id());
    });
    // ... and, from this goroutine, batches of work for the other P to steal.
    const auto steals_before = rt.stats().steals;
    while (rt.stats().steals == steals_before && std::chrono::steady_clock::now() < deadline) {
      goro::wait_group wg;
      wg.add(64);
      for (int i = 0; i < 64; ++i)
        goro::go([&wg] {
          const auto until = std::chrono::steady_clock::now() + 20us;
          while (std::chrono::steady_clock::now() < until) {
          }
          wg.done();
        });
      wg.wait();
    }
    hog = *done.recv();
  });
  goro::trace::stop();
  const json_array evs = read_trace(tf.path);
  int preempts = 0, preempted_slices = 0, steals = 0;
  for (const json& e : evs) {
    if (is(e, "preempt", "i") && static_cast<std::uint64_t>(e["args"]["g"].num()) == hog) ++preempts;
    if (is(e, "run", "X") && e["args"]["end"].str() == "preempted" &&
        static_cast<std::uint64_t>(e["args"]["g"].num()) == hog)
      ++preempted_slices;
    if (is(e, "steal", "i")) {
      ++steals;
      CHECK(e["args"]["from"].num() != e["tid"].num());  // from another P
    }
  }
  CHECK(preempts >= 1);
  CHECK(preempted_slices >= 2);  // its P track and its M track
  CHECK(steals >= 1);
}

TEST_CASE("trace: a long trace is written as it goes and stays valid", "[trace]") {
  // More events than a thread's buffer holds (4,096): written mid-trace.
  // One proc: every run slice is recorded by the one M.
  trace_file tf("long");
  constexpr int n = goro_test::scale(4000, 2000);
  goro::runtime rt{goro::options{1}};
  goro::trace::start(tf.path);
  rt.run([] {
    goro::wait_group wg;
    wg.add(n);
    for (int i = 0; i < n; ++i)
      goro::go([&wg] {
        for (int k = 0; k < 3; ++k) goro::yield();
        wg.done();
      });
    wg.wait();
  });
  REQUIRE(goro_test::eventually_sleeping([&] { return rt.num_goroutine() == 0; }));  // exits traced
  goro::trace::stop();
  const json_array evs = read_trace(tf.path);
  std::set<std::uint64_t> exited;
  for (const json& e : evs)
    if (is(e, "run", "X") && e["args"]["end"].str() == "exit") exited.insert(std::uint64_t(e["args"]["g"].num()));
  CHECK(exited.size() >= std::size_t{n});  // every spawned goroutine (and main)
}

TEST_CASE("trace: a plain thread's wake-up goes on the 'other threads' track", "[trace]") {
  trace_file tf("plain");
  goro::runtime rt{goro::options{.maxprocs = 1, .detect_deadlock = false}};  // fed by a plain thread
  goro::chan<int> c;
  std::uint64_t receiver = 0;
  goro::trace::start(tf.path);
  std::thread feeder([c]() mutable {
    std::this_thread::sleep_for(20ms);  // the receiver is parked by then
    c.send(1);
  });
  rt.run([&] {
    receiver = goro::this_goroutine::id();
    CHECK(*c.recv() == 1);
  });
  feeder.join();
  goro::trace::stop();
  const json_array evs = read_trace(tf.path);
  auto names = track_names(evs);
  int outside_wakes = 0;
  for (const json& e : evs)
    if (is(e, "wake", "i") && static_cast<std::uint64_t>(e["args"]["g"].num()) == receiver &&
        names[{int(e["pid"].num()), int(e["tid"].num())}] == "other threads")
      ++outside_wakes;
  CHECK(outside_wakes == 1);
}

TEST_CASE("trace: a second trace holds only its own events", "[trace]") {
  trace_file first("first"), second("second");
  goro::runtime rt{goro::options{2}};
  std::uint64_t a = 0, b = 0;
  goro::trace::start(first.path);
  rt.run([&] { a = goro::this_goroutine::id(); });
  goro::trace::stop();
  rt.run([&] { goro::go([] {}); });  // untraced
  goro::trace::start(second.path);
  rt.run([&] { b = goro::this_goroutine::id(); });
  goro::trace::stop();
  std::set<std::uint64_t> in_second;
  for (const json& e : read_trace(second.path))
    if (is(e, "run", "X")) in_second.insert(std::uint64_t(e["args"]["g"].num()));
  CHECK(in_second.count(b) == 1);
  CHECK(in_second.count(a) == 0);
}

TEST_CASE("trace: slices that began before a restarted trace start at its start", "[trace]") {
  // A goroutine running (or in goro::blocking) across stop() and start()
  // had its slice written into the second trace with the first one's
  // start time: negative ts, and a flow head whose tail is in the first.
  trace_file first("restart1"), second("restart2");
  goro::runtime rt{goro::options{2}};
  rt.run([&] {
    goro::trace::start(first.path);
    goro::chan<int> done;
    std::atomic<bool> in_call{false};
    goro::go([done, &in_call]() mutable {
      goro::blocking([&] {
        in_call = true;
        std::this_thread::sleep_for(30ms);
      });
      done.send(1);
    });
    goro::yield();                                      // main's slice now begins inside the first trace
    while (!in_call) std::this_thread::sleep_for(1ms);  // no goro call: the slice goes on
    std::this_thread::sleep_for(5ms);
    goro::trace::stop();
    goro::trace::start(second.path);
    (void)done.recv();
    goro::trace::stop();
  });
  int runs = 0, syscalls = 0;
  for (const json& e : read_trace(second.path)) {
    if (e["ph"].str() == "M") continue;
    INFO(e["name"].str());
    CHECK(e["ts"].num() >= 0);
    if (is(e, "flow", "f")) CHECK(e["ts"].num() > 0);  // not a head cut from its tail
    if (is(e, "run", "X")) ++runs;
    if (is(e, "syscall", "X")) {
      ++syscalls;
      CHECK(e["dur"].num() < 30000.0);  // only its part inside this trace
    }
  }
  CHECK(runs >= 2);
  CHECK(syscalls == 1);
}

TEST_CASE("trace: a P's slices do not overlap when a blocking call hands the P off", "[trace]") {
  // A goroutine in goro::blocking keeps running on its M but not on its
  // P, which sysmon hands to another M: its slice on the P's track must
  // not cover the call, or it overlaps the slices the P ran meanwhile
  // (the viewers need the slices of a track nested).
  trace_file tf("handoff");
  goro::runtime rt{goro::options{2}};
  goro::trace::start(tf.path);
  rt.run([&] {
    std::atomic<bool> stop{false};
    goro::wait_group wg;
    wg.add(3);
    goro::go([&] {
      goro::blocking([] { std::this_thread::sleep_for(50ms); });
      wg.done();
    });
    for (int i = 0; i < 2; ++i)
      goro::go([&] {
        while (!stop.load(std::memory_order_relaxed)) goro::preempt_point();
        wg.done();
      });
    goro::sleep_for(80ms);
    stop = true;
    wg.wait();
  });
  goro::trace::stop();
  REQUIRE(rt.stats().syscall_handoffs >= 1);
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> tracks;  // (pid, tid) -> slices
  for (const json& e : read_trace(tf.path))
    if (is(e, "run", "X"))
      tracks[{int(e["pid"].num()), int(e["tid"].num())}].push_back({e["ts"].num(), e["dur"].num()});
  for (auto& [track, slices] : tracks) {
    std::sort(slices.begin(), slices.end());
    for (std::size_t i = 1; i < slices.size(); ++i) {
      INFO("track pid " << track.first << " tid " << track.second << ": slice at " << slices[i].first
                        << " begins inside the one at " << slices[i - 1].first << " (dur " << slices[i - 1].second
                        << ")");
      CHECK(slices[i].first >= slices[i - 1].first + slices[i - 1].second - 0.001);
    }
  }
}

#if GORO_EXCEPTIONS
TEST_CASE("trace: misuse and bad paths are clear errors", "[trace]") {
  trace_file tf("misuse");
  CHECK_THROWS_WITH(goro::trace::stop(), Catch::Contains("goro: trace::stop: no trace is running"));
  try {
    goro::trace::start("/nonexistent-goro-dir/trace.json");
    FAIL("no error");
  } catch (const std::system_error& e) {
    CHECK(e.code().value() == ENOENT);
    CHECK(std::string(e.what()).find("/nonexistent-goro-dir/trace.json") != std::string::npos);
  }
  CHECK_FALSE(goro::trace::running());
  goro::trace::start(tf.path);
  CHECK_THROWS_AS(goro::trace::start(tf.path), goro::usage_error);
  CHECK_THROWS_WITH(goro::trace::start(tf.path), Catch::Contains("a trace is already running"));
  goro::trace::stop();
  CHECK(read_trace(tf.path).size() == 0);  // nothing ran: an empty but valid trace
}
#endif

TEST_CASE("trace: flow arrows from waker to woken and from creator to created", "[trace]") {
  trace_file tf("flow");
  std::uint64_t parent = 0, child = 0;
  goro::runtime rt{goro::options{2}};
  goro::trace::start(tf.path);
  rt.run([&] {
    parent = goro::this_goroutine::id();
    goro::chan<int> c;
    goro::chan<std::uint64_t> ids;
    goro::go([c, ids]() mutable {
      ids.send(goro::this_goroutine::id());
      (void)c.recv();  // blocks until main sends: a wake-up
    });
    child = *ids.recv();
    goro::sleep_for(5ms);
    c.send(1);
  });
  REQUIRE(goro_test::eventually_sleeping([&] { return rt.num_goroutine() == 0; }));
  goro::trace::stop();

  const json_array evs = read_trace(tf.path);
  std::map<std::uint64_t, const json*> starts, finishes;  // flow id -> event
  for (const json& e : evs) {
    if (e["ph"].str() == "M") continue;
    if (is(e, "flow", "s")) {
      const auto id = static_cast<std::uint64_t>(e["id"].num());
      CHECK(starts.count(id) == 0);  // one id per wake-up / creation
      starts[id] = &e;
    } else if (is(e, "flow", "f")) {
      const auto id = static_cast<std::uint64_t>(e["id"].num());
      CHECK(finishes.count(id) == 0);
      CHECK(e["bp"].str() == "e");
      finishes[id] = &e;
    }
  }
  // Every arrow's head is the start of a run slice on its track, named
  // as its tail.
  for (auto& [id, f] : finishes) {
    INFO("flow " << id);
    REQUIRE(starts.count(id) == 1);
    CHECK((*starts[id])["name"].str() == (*f)["name"].str());
    bool on_slice = false;
    for (const json& e : evs)
      if (is(e, "run", "X") && e["pid"].num() == (*f)["pid"].num() && e["tid"].num() == (*f)["tid"].num() &&
          e["ts"].num() == (*f)["ts"].num())
        on_slice = true;
    CHECK(on_slice);
  }
  // The creation: a "go" marker by the parent, an arrow to the child's
  // first slice; the wake-up: an arrow from main to the child.
  bool go_marker = false, go_arrow = false, wake_arrow = false;
  for (const json& e : evs) {
    if (is(e, "go", "i") && std::uint64_t(e["args"]["g"].num()) == child) {
      go_marker = true;
      CHECK(std::uint64_t(e["args"]["parent"].num()) == parent);
    }
    if (is(e, "run", "X") && std::uint64_t(e["args"]["g"].num()) == child && int(e["pid"].num()) % 2 == 1) {
      for (auto& [id, f] : finishes)
        if ((*f)["ts"].num() == e["ts"].num() && (*f)["tid"].num() == e["tid"].num() &&
            (*f)["pid"].num() == e["pid"].num())
          ((*f)["name"].str() == "go" ? go_arrow : wake_arrow) = true;
    }
  }
  CHECK(go_marker);
  CHECK(go_arrow);
  CHECK(wake_arrow);
}

TEST_CASE("trace: the trace of a killed program stays loadable", "[trace]") {
  trace_file tf("killed");
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const std::string helper = std::string(GORO_HELPERS_DIR) + "/goro_helper_trace_killed";
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl(helper.c_str(), helper.c_str(), tf.path.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  char buf[16] = {};
  const ssize_t n = read(fds[0], buf, sizeof buf - 1);  // "ready": the trace is flushed
  close(fds[0]);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(n > 0);
  CHECK(std::string(buf).rfind("ready", 0) == 0);
  CHECK(WIFSIGNALED(status));
  const std::string text = read_file(tf.path);
  REQUIRE(text.rfind("[", 0) == 0);
  const json_array evs = parse_trace(text, true);
  int runs = 0, flows = 0;
  for (const json& e : evs) {
    if (is(e, "run", "X")) ++runs;
    if (is(e, "flow", "s")) ++flows;
  }
  CHECK(runs >= 400);  // the ping-pong's slices
  CHECK(flows >= 200);
  CHECK(track_names(evs).size() >= 2);  // written as tracks appear, not at stop
}
