// Misuse and failure paths that must end in a clear error or keep working,
// never in a crash or a hang: go() when no OS thread can be created,
// parking or yielding inside goro::blocking, and sync objects that outlive
// the runtime whose goroutines waited on them. Each case runs in a forked
// child with an alarm, so a regression shows up as a failed check instead
// of a crashed or hung test binary.
#define GORO_TESTING 1  // detail::testing: the thread-creation fault injection
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "test_util.hpp"

using namespace std::chrono_literals;

namespace {

struct child_status {
  bool exited = false;
  int code = -1;
  int signal = 0;
};

// Runs body() in a forked child killed after `seconds` (SIGALRM); the
// child's exit code is body()'s result (0: every check passed). With
// `err`, the child's stderr is collected there.
child_status in_child(const std::function<int()>& body, unsigned seconds = goro_test::scale(20, 60),
                      std::string* err = nullptr) {
  std::cout.flush();  // nothing buffered is written twice
  std::cerr.flush();
  std::fflush(nullptr);
  char path[] = "/tmp/goro_misuse_XXXXXX";
  const int fd = err ? mkstemp(path) : -1;
  pid_t pid = fork();
  if (pid == 0) {
    if (fd >= 0) {
      dup2(fd, 2);
      std::signal(SIGABRT, SIG_DFL);  // an abort is what is checked: not Catch's report of it
    }
    alarm(seconds);
    int rc = 1;
#if GORO_EXCEPTIONS
    try {
      rc = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: unexpected exception: %s\n", e.what());
      rc = 2;
    }
#else
    rc = body();
#endif
    std::fflush(nullptr);
    _exit(rc);
  }
  child_status s;
  int status = 0;
  const bool waited = pid >= 0 && waitpid(pid, &status, 0) == pid;
  if (fd >= 0) {
    std::ifstream in(path);
    err->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    close(fd);
    unlink(path);
  }
  if (!waited) return s;
  s.exited = WIFEXITED(status);
  if (s.exited) s.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) s.signal = WTERMSIG(status);
  return s;
}

// The process's address space limit (RLIMIT_AS) set `headroom` above what
// it maps now, for the scope: mmap then fails with ENOMEM beyond it.
class address_space_headroom {
 public:
  explicit address_space_headroom(std::size_t headroom) {
    getrlimit(RLIMIT_AS, &old_);
    std::size_t pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    rlimit lim = old_;
    lim.rlim_cur = pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) + headroom;
    setrlimit(RLIMIT_AS, &lim);
  }
  ~address_space_headroom() { setrlimit(RLIMIT_AS, &old_); }
  address_space_headroom(const address_space_headroom&) = delete;
  address_space_headroom& operator=(const address_space_headroom&) = delete;

 private:
  rlimit old_{};
};

#define CHILD_CHECK(cond)                                                                  \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "child: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

void require_clean_exit(const child_status& s) {
  INFO("exited " << s.exited << " code " << s.code << " signal " << s.signal
                 << (s.signal == SIGALRM ? " (hung: killed by the alarm)" : ""));
  CHECK(s.exited);
  CHECK(s.code == 0);
}

struct fail_threads {
  explicit fail_threads(int n) { goro::detail::testing::fail_thread_creations.store(n); }
  ~fail_threads() { goro::detail::testing::fail_thread_creations.store(0); }
};

// Waits (as a plain OS thread) until flag is set, at most `limit`.
bool wait_for(const std::atomic<bool>& flag, std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

}  // namespace

// ---- go() when no OS thread can be created ----------------------------

#if GORO_EXCEPTIONS
TEST_CASE("misuse: go() with no M and no thread to be had throws and leaves nothing queued", "[misuse][newm]") {
  require_clean_exit(in_child([] {
    std::atomic<int> first{0}, second{0};
    {
      goro::runtime rt{goro::options{.maxprocs = 2, .on_main_return = goro::main_return::wait}};
      {
        fail_threads f(INT_MAX);
        bool threw = false;
        try {
          rt.go([&] { first.fetch_add(1); });
        } catch (const std::system_error& e) {
          threw = true;
          CHILD_CHECK(std::string(e.what()).find("goro: ") == 0);
          CHILD_CHECK(std::string(e.what()).find("thread") != std::string::npos);
          CHILD_CHECK(e.code().value() == EAGAIN);
        }
        CHILD_CHECK(threw);
        CHILD_CHECK(rt.num_goroutine() == 0);
      }
      // Threads can be created again: the runtime works, and the rolled-back
      // goroutine never runs.
      std::atomic<bool> done{false};
      rt.go([&] {
        second.fetch_add(1);
        done = true;
      });
      CHILD_CHECK(wait_for(done, 10s));
      rt.go([&] { second.fetch_add(1); });
    }  // the destructor waits for the goroutines (it hung here)
    CHILD_CHECK(first.load() == 0);
    CHILD_CHECK(second.load() == 2);
    return 0;
  }));
}
#endif

TEST_CASE("misuse: work queued while no thread could be created runs once one can", "[misuse][newm]") {
  require_clean_exit(in_child([] {
    goro::runtime rt{goro::options{1}};
    bool ran_in_time = rt.run([&] {
      goro::go([] {});  // starts sysmon
      goro::yield();    // ... and lets that goroutine finish: the one P is main's, no other M exists
      fail_threads f(INT_MAX);
      std::atomic<bool> ran{false};
      return goro::blocking(goro::long_call, [&] {
        // The P was handed off, but no M could be started for it. This
        // goroutine goes to the global queue and its wake-up fails too.
        goro::go([&] { ran = true; });
        goro::detail::testing::fail_thread_creations.store(0);
        // Nobody must wait for this call to end: the runtime retries.
        return wait_for(ran, 5s);
      });
    });
    CHILD_CHECK(ran_in_time);
    return 0;
  }));
}

TEST_CASE("misuse: go() from a goroutine when no thread can be created still runs it", "[misuse][newm]") {
  require_clean_exit(in_child([] {
    goro::runtime rt{goro::options{4}};
    int n = rt.run([] {
      fail_threads f(INT_MAX);
      goro::wait_group wg;
      std::atomic<int> count{0};
      for (int i = 0; i < 20; ++i) {
        wg.add(1);
        goro::go([&] {
          count.fetch_add(1);
          wg.done();
        });
      }
      wg.wait();
      return count.load();
    });
    CHILD_CHECK(n == 20);
    return 0;
  }));
}

// ---- options::max_threads: which threads count ------------------------

TEST_CASE("misuse: max_threads counts the run() caller only while run() is active", "[misuse][newm]") {
  // Go counts every M, m0 included; outside run() a runtime has no m0:
  // goroutines go() starts from a plain thread run on the runtime's own
  // Ms. The limit counted the run() caller all the same, so with
  // max_threads = 1 the first M such a go() needed ended the program
  // ("exceeds 1-thread limit") with one M alive.
  require_clean_exit(in_child([] {
    goro::options o;
    o.maxprocs = 1;
    o.max_threads = 1;
    goro::runtime rt(o);
    std::atomic<bool> ran{false};
    rt.go([&] { ran = true; });  // one M: the runtime's only thread
    CHILD_CHECK(wait_for(ran, 10s));
    return 0;
  }));
  // While run() is active its caller is an M: with max_threads = 1 it is
  // the only one, and goroutines run on it.
  require_clean_exit(in_child([] {
    goro::options o;
    o.maxprocs = 1;
    o.max_threads = 1;
    goro::runtime rt(o);
    int sum = 0;
    rt.run([&] {
      goro::wait_group wg;
      for (int i = 1; i <= 10; ++i) {
        wg.add(1);
        goro::go([&, i] {
          sum += i;
          wg.done();
        });
      }
      wg.wait();
    });
    CHILD_CHECK(sum == 55);
    return 0;
  }));
  // An M started outside run() stays (idle, as Go keeps its Ms): run()'s
  // caller is then one M more than max_threads = 1 allows.
  std::string err;
  auto s = in_child(
      [] {
        goro::options o;
        o.maxprocs = 1;
        o.max_threads = 1;
        goro::runtime rt(o);
        std::atomic<bool> ran{false};
        rt.go([&] { ran = true; });
        CHILD_CHECK(wait_for(ran, 10s));
        rt.run([] {});
        return 0;
      },
      goro_test::scale(20, 60), &err);
  INFO(err);
  CHECK(s.signal == SIGABRT);
  CHECK(err.find("goro: program exceeds 1-thread limit (options::max_threads)") != std::string::npos);
}

// ---- parking or yielding inside goro::blocking -------------------------

#if GORO_EXCEPTIONS
namespace {

// Runs `call` inside goro::blocking in a goroutine (main of a 2-P runtime)
// and checks it raises usage_error with exactly `message`; then the
// runtime must still shut down cleanly.
int expect_inside_blocking_error(
    const std::function<void()>& setup, const std::function<void()>& call, const std::string& message,
    const std::function<void()>& cleanup = [] {}) {
  std::string what;
  {
    goro::runtime rt{goro::options{2}};
    rt.run([&] {
      setup();
      try {
        goro::blocking([&] { call(); });
      } catch (const goro::usage_error& e) {
        what = e.what();
      }
      cleanup();
    });
  }
  if (what != message) {
    std::fprintf(stderr, "child: got \"%s\", expected \"%s\"\n", what.c_str(), message.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

TEST_CASE("misuse: chan recv inside goro::blocking is a usage_error", "[misuse][blocking]") {
  require_clean_exit(in_child([] {
    goro::chan<int> c;
    int rc = expect_inside_blocking_error([] {}, [&] { (void)c.recv(); }, "goro: chan recv inside goro::blocking");
    if (rc) return rc;
    // The channel was left as it was: a send and a receive still pair up.
    goro::run([&] {
      goro::go([c]() mutable { c.send(7); });
      CHILD_CHECK(c.recv() == 7);
      return 0;
    });
    return 0;
  }));
}

TEST_CASE("misuse: chan send inside goro::blocking is a usage_error", "[misuse][blocking]") {
  require_clean_exit(in_child([] {
    goro::chan<int> c;
    return expect_inside_blocking_error([] {}, [&] { c.send(1); }, "goro: chan send inside goro::blocking");
  }));
}

TEST_CASE("misuse: a blocking select inside goro::blocking is a usage_error", "[misuse][blocking]") {
  require_clean_exit(in_child([] {
    goro::chan<int> a, b;
    return expect_inside_blocking_error(
        [] {},
        [&] { goro::select(goro::on_recv(a, [](std::optional<int>) {}), goro::on_recv(b, [](std::optional<int>) {})); },
        "goro: select inside goro::blocking");
  }));
}

TEST_CASE("misuse: sleep inside goro::blocking is a usage_error", "[misuse][blocking]") {
  require_clean_exit(in_child([] {
    return expect_inside_blocking_error([] {}, [] { goro::sleep_for(1ms); }, "goro: sleep inside goro::blocking");
  }));
}

TEST_CASE("misuse: a contended mutex lock inside goro::blocking is a usage_error", "[misuse][blocking]") {
  require_clean_exit(in_child([] {
    goro::mutex mu;
    return expect_inside_blocking_error([&] { mu.lock(); }, [&] { mu.lock(); },
                                        "goro: mutex lock inside goro::blocking", [&] { mu.unlock(); });
  }));
}

TEST_CASE("misuse: wait_group wait inside goro::blocking is a usage_error", "[misuse][blocking]") {
  require_clean_exit(in_child([] {
    goro::wait_group wg;
    return expect_inside_blocking_error([&] { wg.add(1); }, [&] { wg.wait(); },
                                        "goro: wait_group wait inside goro::blocking", [&] { wg.done(); });
  }));
}

TEST_CASE("misuse: cond wait and semaphore acquire inside goro::blocking are usage_errors", "[misuse][blocking]") {
  require_clean_exit(in_child([] {
    goro::mutex mu;
    goro::cond cv;
    int rc = expect_inside_blocking_error([] {},
                                          [&] {
                                            std::unique_lock<goro::mutex> lk(mu);
                                            cv.wait(lk);
                                          },
                                          "goro: cond wait inside goro::blocking");
    if (rc) return rc;
    goro::semaphore sem;
    return expect_inside_blocking_error([] {}, [&] { sem.acquire(); }, "goro: semaphore acquire inside goro::blocking");
  }));
}

TEST_CASE("misuse: yield inside goro::blocking is a usage_error", "[misuse][blocking]") {
  require_clean_exit(in_child([] {
    return expect_inside_blocking_error([] {}, [] { goro::yield(); }, "goro: yield() inside goro::blocking");
  }));
}

TEST_CASE("misuse: goro calls that do not park still work inside goro::blocking", "[misuse][blocking]") {
  require_clean_exit(in_child([] {
    goro::runtime rt{goro::options{2}};
    return rt.run([] {
      goro::chan<int> c(1);
      goro::mutex mu;
      goro::wait_group wg;
      goro::semaphore sem(1);
      std::atomic<bool> ran{false};
      goro::blocking([&] {
        c.send(1);                   // room in the buffer
        CHILD_CHECK(c.recv() == 1);  // a value is there
        mu.lock();                   // uncontended
        mu.unlock();
        wg.wait();  // counter zero
        sem.acquire();
        goro::go([&] { ran = true; });
        goro::sleep_for(0ms);
        goro::sleep_until(std::chrono::steady_clock::now() - 1ms);  // past: no sleep either
        return 0;
      });
      while (!ran) goro::yield();
      return 0;
    });
  }));
}
#endif

// ---- the default stack allocator refusing a stack ------------------------

// The default allocator's stacks are mapped as late as it can: main's as
// run() starts, the others' as they first run. The sanitizers reserve
// terabytes of shadow memory, and qemu-user the guest's address space up
// front: no address space limit under them.
#if GORO_EXCEPTIONS && !GORO_TEST_SANITIZED && !defined(GORO_CROSS_TESTS)
TEST_CASE("misuse: main's stack refused by the default allocator: run() throws bad_alloc, the runtime stays usable",
          "[misuse][stack]") {
  // main's stack was mapped as main first ran, on run()'s thread already
  // made the runtime's M: the bad_alloc left it so, and the destructor
  // aborted ("runtime destroyed from inside one of its own goroutines").
  require_clean_exit(in_child([] {
    goro::runtime rt{goro::options{.maxprocs = 1, .main_stack_size = std::size_t{1} << 30}};
    bool threw = false, ran = false;
    {
      address_space_headroom limit(std::size_t{256} << 20);  // room for threads, not for a 1 GiB stack
      try {
        rt.run([&] { ran = true; });
      } catch (const std::bad_alloc&) {
        threw = true;
      }
    }
    CHILD_CHECK(threw);
    CHILD_CHECK(!ran);
    CHILD_CHECK(rt.run([] {
      goro::chan<int> c(1);
      goro::go([c]() mutable { c.send(2); });
      return *c.recv();
    }) == 2);
    return 0;
  }));
}

TEST_CASE("misuse: a goroutine's stack refused by the default allocator as it first runs is a clear fatal error",
          "[misuse][stack]") {
  // The spawn returned long before: nobody is left to throw to. The
  // bad_alloc unwound the scheduler loop on g0 instead (std::terminate on
  // an M's thread; out of run() on the caller's, which then aborted with
  // "runtime destroyed from inside one of its own goroutines").
  std::string err;
  child_status s = in_child(
      [] {
        goro::runtime rt{goro::options{1}};
        address_space_headroom limit(std::size_t{256} << 20);
        rt.run([] {
          goro::wait_group wg;
          wg.add(1);
          goro::go(goro::spawn_options{.stack_size = std::size_t{1} << 30}, [&wg] { wg.done(); });
          wg.wait();
        });
        return 0;
      },
      goro_test::scale(20, 60), &err);
  INFO("exited " << s.exited << " code " << s.code << " signal " << s.signal << "\n" << err);
  CHECK(s.signal == SIGABRT);
  CHECK_THAT(err, Catch::Matchers::Matches(
                      "(.|\n)*goro: out of memory \\(goroutine [0-9]+'s 1073741824-byte stack\\)(.|\n)*"));
}
#endif

// ---- objects outliving the runtime whose goroutines waited on them -----

TEST_CASE("misuse: a channel outliving a runtime with goroutines blocked on it still works", "[misuse][outlive]") {
  require_clean_exit(in_child([] {
    goro::chan<int> c;    // receivers blocked forever
    goro::chan<int> s;    // a sender blocked forever
    goro::chan<int> sel;  // a select blocked forever
    {
      goro::runtime rt{goro::options{2}};
      rt.run([&] {
        for (int i = 0; i < 3; ++i) goro::go([c]() mutable { (void)c.recv(); });
        goro::go([s]() mutable { s.send(1); });
        goro::go([sel, c]() {
          goro::select(goro::on_recv(sel, [](std::optional<int>) {}), goro::on_recv(c, [](std::optional<int>) {}));
        });
        goro::sleep_for(20ms);  // they block
      });
    }  // "5 goroutines blocked forever at shutdown": released
    // A send finds no receiver left (a dangling one was a use-after-free).
    CHILD_CHECK(!c.try_send(1));
    CHILD_CHECK(!sel.try_send(2));
    CHILD_CHECK(!s.try_recv());
    // And the channels work between plain threads.
    std::thread t([&] { c.send(3); });
    CHILD_CHECK(c.recv() == 3);
    t.join();
    std::thread u([&] { s.send(4); });
    CHILD_CHECK(s.recv() == 4);
    u.join();
    c.close();
    s.close();
    sel.close();
    return 0;
  }));
}

TEST_CASE("misuse: a mutex, wait_group and cond outliving a runtime with goroutines blocked on them work",
          "[misuse][outlive]") {
  require_clean_exit(in_child([] {
    goro::mutex mu;
    goro::wait_group wg;
    goro::mutex cmu;
    goro::cond cv;
    {
      goro::runtime rt{goro::options{2}};
      rt.run([&] {
        mu.lock();
        wg.add(1);
        for (int i = 0; i < 2; ++i) {
          goro::go([&] {
            mu.lock();
            mu.unlock();
          });
          goro::go([&] { wg.wait(); });
          goro::go([&] {
            std::unique_lock<goro::mutex> lk(cmu);
            cv.wait(lk);
          });
        }
        goro::sleep_for(20ms);  // they block
      });
    }
    // Plain threads now: nothing touches a released goroutine.
    mu.unlock();
    mu.lock();
    std::atomic<bool> got{false};
    std::thread t([&] {
      mu.lock();
      got = true;
      mu.unlock();
    });
    std::this_thread::sleep_for(5ms);
    mu.unlock();
    t.join();
    CHILD_CHECK(got.load());
    wg.done();  // counter 0: the released waiters are not woken (nor counted)
    wg.wait();
    wg.add(1);  // reused: a wait must not return before done() (on a token kept for a released waiter)
    std::atomic<bool> returned{false};
    std::thread w([&] {
      wg.wait();
      returned = true;
    });
    std::this_thread::sleep_for(20ms);
    CHILD_CHECK(!returned.load());
    wg.done();
    w.join();
    CHILD_CHECK(returned.load());
    cv.notify_all();
    cv.notify_one();
    return 0;
  }));
}
