// The threads a runtime starts (SPEC "Engine embedding", docs/api.md
// "Threads"): named "<thread_name>-m<N>" / "-sysmon", made by
// options::thread_factory when one is given, no more Ms than
// options::max_threads.
#include <catch2/catch.hpp>
#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <fstream>
#include <goro/goro.hpp>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "test_util.hpp"

namespace {

// The names of this process's threads (/proc/self/task/*/comm).
std::vector<std::string> thread_names() {
  std::vector<std::string> names;
  DIR* d = opendir("/proc/self/task");
  if (!d) return names;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    if (std::getline(f, name)) names.push_back(name);
  }
  closedir(d);
  return names;
}

std::size_t count_prefixed(const std::vector<std::string>& names, const std::string& prefix) {
  std::size_t n = 0;
  for (const auto& s : names) n += s.rfind(prefix, 0) == 0;
  return n;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  for (const auto& s : names)
    if (s == name) return true;
  return false;
}

// Goroutines in goro::blocking make the runtime start Ms beyond its Ps
// (sysmon hands their P on); returns the thread names seen while they block.
// m_prefix: what the runtime's Ms are called ("goro-m"). *ms: how many Ms
// the runtime had counted when the names were read (more may start after,
// as the blocked goroutines return).
std::vector<std::string> names_with_blocked_goroutines(goro::runtime& rt, int n, const std::string& m_prefix,
                                                       std::uint64_t* ms = nullptr) {
  std::vector<std::string> seen;
  rt.run([&] {
    goro::wait_group wg;
    std::atomic<int> inside{0};
    for (int i = 0; i < n; ++i) {
      wg.add(1);
      goro::go([&] {
        goro::blocking([&] {
          inside.fetch_add(1);
          while (inside.load() < n) usleep(1000);
          usleep(20 * 1000);
        });
        wg.done();
      });
    }
    while (inside.load() < n) goro::sleep_for(std::chrono::milliseconds(1));
    // A new thread bears its creator's name until it names itself (its
    // first step): look until every M this runtime made bears its own.
    for (int tries = 0; tries < 200; ++tries) {
      const std::uint64_t before = rt.stats().threads;
      seen = thread_names();
      const std::uint64_t made = rt.stats().threads;
      if (ms) *ms = made;
      // The count follows the start of a thread, which may already have
      // named itself: with ms, wait for equal counts, read twice (a
      // prefix cut to 15 bytes may also match sysmon: no ms there).
      const std::size_t named = count_prefixed(seen, m_prefix);
      if (before == made && (ms ? named == made : named >= made)) break;
      goro::sleep_for(std::chrono::milliseconds(5));
    }
    wg.wait();
  });
  return seen;
}

}  // namespace

TEST_CASE("threads: Ms and sysmon are named <thread_name>-m<N> and -sysmon", "[threads]") {
  goro::runtime rt{goro::options{.maxprocs = 2}};
  std::uint64_t ms = 0;
  auto names = names_with_blocked_goroutines(rt, 3, "goro-m", &ms);
  INFO(Catch::Detail::stringify(names));
  CHECK(contains(names, "goro-sysmon"));
  CHECK(contains(names, "goro-m1"));
  // Every M this runtime created carries the name (the run() caller is the
  // program's own thread and keeps its name). Compared with the Ms made
  // by the time the names were read: one may start after (qemu-user hit
  // that about once in 40 runs).
  CHECK(count_prefixed(names, "goro-m") == ms);
  CHECK(rt.stats().threads >= 3);  // three goroutines blocked at once, each on an M of its own
}

TEST_CASE("threads: options::thread_name, cut to Linux's 15 bytes", "[threads]") {
  goro::options o;
  o.maxprocs = 1;
  o.thread_name = "eng";
  goro::runtime rt(o);
  auto names = names_with_blocked_goroutines(rt, 2, "eng-m");
  INFO(Catch::Detail::stringify(names));
  CHECK(contains(names, "eng-sysmon"));
  CHECK(contains(names, "eng-m1"));
  CHECK(count_prefixed(names, "goro-m") == 0);

  goro::options l;
  l.maxprocs = 1;
  l.thread_name = "averyveryverylongname";
  goro::runtime long_rt(l);
  names = names_with_blocked_goroutines(long_rt, 2, "averyveryverylo");
  INFO(Catch::Detail::stringify(names));
  CHECK(contains(names, "averyveryverylo"));  // 15 bytes: "-m1" and "-sysmon" are cut off
}

TEST_CASE("threads: every thread of the runtime comes from options::thread_factory", "[threads]") {
  std::mutex mu;
  std::set<std::thread::id> made;
  std::set<std::thread::id> ran_on;
  int calls = 0;
  goro::options o;
  o.maxprocs = 2;
  o.thread_factory = [&](std::function<void()> f) {
    std::lock_guard<std::mutex> lk(mu);
    ++calls;
    std::thread t(std::move(f));
    made.insert(t.get_id());
    return t;
  };
  const auto caller = std::this_thread::get_id();
  {
    goro::runtime rt(o);
    rt.run([&] {
      goro::wait_group wg;
      for (int i = 0; i < 16; ++i) {
        wg.add(1);
        goro::go([&] {
          for (int k = 0; k < 5; ++k) {
            {
              std::lock_guard<std::mutex> lk(mu);
              ran_on.insert(std::this_thread::get_id());
            }
            goro::blocking([] { usleep(2000); });  // the goroutine may come back on another M
          }
          wg.done();
        });
      }
      wg.wait();
      // Until the others have exited: main returning while one is still
      // alive (past wg.done) makes the factory start the main-return
      // ender thread too, which stats().threads does not count (seen
      // under qemu-riscv64: factory_calls was threads + 2).
      while (goro::num_goroutine() > 1) goro::yield();
    });
    // The Ms and sysmon. An M that a goroutine's return from a blocking
    // call started just before run() returned may have been made by the
    // factory but not yet counted (the count follows the factory's
    // return): wait a little for the two to agree.
    std::uint64_t factory_calls = 0;
    for (int tries = 0; tries < 2000; ++tries) {
      {
        std::lock_guard<std::mutex> lk(mu);
        factory_calls = static_cast<std::uint64_t>(calls);
      }
      if (factory_calls == rt.stats().threads + 1) break;
      usleep(1000);
    }
    INFO("factory calls " << factory_calls << ", Ms " << rt.stats().threads);
    CHECK(factory_calls == rt.stats().threads + 1);
  }
  std::lock_guard<std::mutex> lk(mu);
  CHECK(calls >= 2);
  for (auto id : ran_on) {
    INFO("a goroutine ran on a thread the factory did not make");
    CHECK((id == caller || made.count(id) == 1));
  }
}

TEST_CASE("threads: a thread_factory that throws std::system_error: the runtime goes on and tries again later",
          "[threads]") {
  std::atomic<int> refusals{3}, calls{0};
  goro::options o;
  o.maxprocs = 2;
  o.thread_factory = [&](std::function<void()> f) {
    calls.fetch_add(1);
    if (refusals.fetch_sub(1) > 0) throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
    return std::thread(std::move(f));
  };
  goro::runtime rt(o);
  std::atomic<int> done{0};
  rt.run([&] {
    goro::wait_group wg;
    for (int i = 0; i < 8; ++i) {
      wg.add(1);
      goro::go([&] {
        goro::blocking([] { usleep(5000); });
        done.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
  });
  CHECK(done.load() == 8);
  CHECK(calls.load() > 3);  // refused three times, then asked again
}

TEST_CASE("threads: past options::max_threads the program ends with Go's thread-limit error", "[threads][death]") {
  auto r = goro_test::run_helper("threads", {"max_threads"});
  INFO(r.output);
  CHECK(r.signaled);
  CHECK(r.signal == SIGABRT);
  CHECK_THAT(r.output, Catch::Matchers::Contains("goro: program exceeds 3-thread limit"));
}

TEST_CASE("threads: a thread_factory returning a thread that is not running is a clear fatal error", "[threads][death]") {
  auto r = goro_test::run_helper("threads", {"bad_factory"});
  INFO(r.output);
  CHECK(r.signaled);
  CHECK(r.signal == SIGABRT);
  CHECK_THAT(r.output, Catch::Matchers::Contains("options::thread_factory returned a std::thread that is not joinable"));
}

TEST_CASE("threads: max_threads of 0 is a usage error", "[threads]") {
  goro::options o;
  o.max_threads = 0;
  CHECK_THROWS_WITH(goro::runtime(o), Catch::Matchers::Contains("max_threads"));
}

namespace {
// Lines of /proc/self/maps: an exited thread that nobody joined keeps its
// stack and guard page mapped (two lines).
std::size_t mapping_count() {
  std::ifstream f("/proc/self/maps");
  std::size_t n = 0;
  for (std::string line; std::getline(f, line);) ++n;
  return n;
}
}  // namespace

TEST_CASE("threads: threads that exited with a locked goroutine are joined before the runtime ends", "[threads]") {
  // Go frees the thread of a goroutine that exits locked (mexit); a program
  // that does so per request must not pile up exited threads' stacks until
  // shutdown (~64k of them exhaust vm.max_map_count, then no thread starts).
  goro::options o;
  o.maxprocs = 2;
  goro::runtime rt(o);
  std::size_t before = 0, after = 0;
  rt.run([&] {
    auto exit_locked = [](int n) {
      for (int i = 0; i < n; ++i) {
        goro::chan<int> c(1);
        goro::go([c]() mutable {
          goro::lock_os_thread();
          c.send(1);
        });
        c.recv();
      }
    };
    exit_locked(20);  // warm-up: the allocator's and the stack cache's mappings
    before = mapping_count();
    exit_locked(200);
    after = mapping_count();
  });
  INFO("mappings before " << before << ", after 200 exits " << after);
  CHECK(after < before + 100);  // unjoined: about 400 more
}
