// Deadlock detection inside run() (Go's checkdead) and
// lock_os_thread / unlock_os_thread (Go's LockOSThread).
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "goro/goro.hpp"
#include "test_util.hpp"

using goro_test::eventually_sleeping;

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

// The kernel thread id: never cached by the compiler across a goroutine
// switch (pthread_self() is declared const and may be).
pid_t tid() noexcept { return static_cast<pid_t>(::syscall(SYS_gettid)); }

bool thread_alive(pid_t t) { return ::access(("/proc/self/task/" + std::to_string(t)).c_str(), F_OK) == 0; }

const char* const deadlock_msg = "goro: all goroutines are asleep - deadlock!";

}  // namespace

// ---- deadlock detection ------------------------------------------------------

TEST_CASE("deadlock: main blocked on a channel nobody sends on", "[deadlock]") {
  const unsigned procs = GENERATE(1u, 2u, 4u);
  CAPTURE(procs);
  // The channel outlives rt: its destructor unlinks the blocked main from
  // the channel's queue (a channel destroyed first is a use after free).
  goro::chan<int> never;
  goro::runtime rt{goro::options{procs}};
  CHECK_THROWS_MATCHES(rt.run([&] { (void)never.recv(); }), goro::deadlock_error,
                       Catch::Matchers::Predicate<goro::deadlock_error>([](const goro::deadlock_error& e) {
                         return std::string(e.what()).rfind(deadlock_msg, 0) == 0;  // then the goroutine dump
                       }));
  // The runtime stays usable, and its destructor releases the blocked main.
  CHECK(rt.run([] { return 7; }) == 7);
}

TEST_CASE("deadlock: deadlock_error is a goro::error", "[deadlock]") {
  goro::runtime rt{goro::options{2}};
  try {
    rt.run([] {
      goro::mutex m;
      m.lock();
      m.lock();  // never unlocked
    });
    FAIL("run returned");
  } catch (const goro::error& e) {
    CHECK(std::string(e.what()).rfind(deadlock_msg, 0) == 0);
    CHECK(dynamic_cast<const goro::deadlock_error*>(&e) != nullptr);
  }
}

TEST_CASE("deadlock: every goroutine blocked on wait_groups", "[deadlock]") {
  goro::runtime rt{goro::options{2}};
  goro::wait_group gate, done;
  CHECK_THROWS_AS(rt.run([&] {
                    gate.add(1);
                    for (int i = 0; i < 4; ++i) {
                      done.add(1);
                      goro::go([&] {
                        gate.wait();  // nobody calls gate.done()
                        done.done();
                      });
                    }
                    done.wait();
                  }),
                  goro::deadlock_error);
}

TEST_CASE("deadlock: goroutines blocked in a channel cycle after running a while", "[deadlock]") {
  goro::runtime rt{goro::options{4}};
  goro::chan<int> a, b;
  std::atomic<int> passes{0};
  CHECK_THROWS_AS(rt.run([&] {
                    goro::go([&] {
                      for (;;) {
                        int v = *a.recv();
                        passes.fetch_add(1);
                        if (v == 1000) break;  // stops answering
                        b.send(v + 1);
                      }
                      (void)a.recv();
                    });
                    for (int v = 0; v < 1000;) {
                      a.send(v);
                      v = *b.recv() + 1;
                    }
                    a.send(1000);
                    (void)b.recv();
                  }),
                  goro::deadlock_error);
  CHECK(passes.load() == 501);
}

TEST_CASE("deadlock: not while a sleeper is pending", "[deadlock]") {
  goro::runtime rt{goro::options{2}};
  int got = rt.run([] {
    goro::chan<int> c;
    goro::go([c]() mutable {
      goro::sleep_for(50ms);
      c.send(42);
    });
    return *c.recv();
  });
  CHECK(got == 42);
}

TEST_CASE("deadlock: not while a goroutine waits on I/O", "[deadlock][net]") {
  // Go's checkdead does not fire while netpoll has waiters: the network (here
  // a plain thread writing a pipe) may still ready them.
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  std::thread writer([&] {
    std::this_thread::sleep_for(100ms);
    char b = 'x';
    CHECK(write(fds[1], &b, 1) == 1);
  });
  goro::runtime rt{goro::options{2}};
  bool ready = rt.run([&] { return goro::net::wait_readable(fds[0]); });
  writer.join();
  close(fds[0]);
  close(fds[1]);
  CHECK(ready);
}

TEST_CASE("deadlock: not while a goroutine is in blocking()", "[deadlock]") {
  const unsigned procs = GENERATE(1u, 2u);
  goro::runtime rt{goro::options{procs}};
  int got = rt.run([] {
    goro::chan<int> c;
    goro::go([c]() mutable {
      goro::blocking([] { ::usleep(50'000); });
      c.send(1);
    });
    goro::go([c]() mutable {
      goro::blocking(goro::long_call, [] { ::usleep(30'000); });
      c.send(2);
    });
    return *c.recv() + *c.recv();
  });
  CHECK(got == 3);
}

TEST_CASE("deadlock: not while main waits for a goroutine that yields a lot", "[deadlock]") {
  const unsigned procs = GENERATE(1u, 2u, 4u);
  goro::runtime rt{goro::options{procs}};
  const int yields = goro_test::scale(20000, 2000);
  int got = rt.run([&] {
    goro::chan<int> c;
    goro::go([c]() mutable {  // yields: a constant, not captured
      for (int i = 0; i < yields; ++i) goro::yield();
      c.send(5);
    });
    return *c.recv();
  });
  CHECK(got == 5);
}

// Many short hand-offs between goroutines on several Ps, with timers and
// blocking calls mixed in: every M keeps going idle and checking.
TEST_CASE("deadlock: no false positive under churn", "[deadlock]") {
  goro::runtime rt{goro::options{4}};
  const int rounds = goro_test::scale(300, 40);
  rt.run([&] {
    for (int r = 0; r < rounds; ++r) {
      goro::chan<int> c;
      goro::wait_group wg;
      for (int i = 0; i < 4; ++i) {
        wg.add(1);
        goro::go([&, c, i]() mutable {
          if (i == 1) goro::sleep_for(std::chrono::microseconds(100));
          if (i == 2) goro::blocking([] { ::usleep(50); });
          c.send(i);
          wg.done();
        });
      }
      int sum = 0;
      for (int i = 0; i < 4; ++i) sum += *c.recv();
      wg.wait();
      REQUIRE(sum == 6);
    }
  });
}

TEST_CASE("deadlock: off, run() waits for a plain thread", "[deadlock]") {
  goro::runtime rt{goro::options{.maxprocs = 2, .detect_deadlock = false}};
  goro::chan<int> c;
  std::thread feeder([&] {
    std::this_thread::sleep_for(100ms);
    c.send(9);
  });
  int got = rt.run([&] { return *c.recv(); });
  feeder.join();
  CHECK(got == 9);
}

TEST_CASE("deadlock: a goroutine spawned from a plain thread is seen", "[deadlock]") {
  // rt.go() from outside before main blocks: the goroutine is queued (global
  // run queue) and must not be missed by the check.
  goro::runtime rt{goro::options{2}};
  goro::chan<int> c;
  for (int i = 0; i < goro_test::scale(50, 10); ++i) {
    std::thread t([&] { rt.go([c]() mutable { c.send(1); }); });
    t.join();
    CHECK(rt.run([&] { return *c.recv(); }) == 1);
  }
}

TEST_CASE("deadlock: a locked main goroutine blocked forever", "[deadlock][lock_os_thread]") {
  goro::runtime rt{goro::options{2}};
  goro::chan<int> never;
  CHECK_THROWS_AS(rt.run([&] {
                    goro::lock_os_thread();
                    goro::go([] {
                      goro::lock_os_thread();
                      goro::sleep_for(1ms);
                    });
                    (void)never.recv();
                  }),
                  goro::deadlock_error);
}

// ---- lock_os_thread ------------------------------------------------------

TEST_CASE("lock_os_thread: outside a goroutine is a usage error", "[lock_os_thread][errors]") {
  CHECK_THROWS_AS(goro::lock_os_thread(), goro::usage_error);
  CHECK_THROWS_AS(goro::unlock_os_thread(), goro::usage_error);
}

TEST_CASE("lock_os_thread: main starts on, and stays locked to, the run() caller's thread", "[lock_os_thread]") {
  goro::runtime rt{goro::options{4}};
  const pid_t caller = tid();
  const int rounds = goro_test::scale(50, 10);
  bool started_here = false, stayed = true;
  rt.run([&] {
    started_here = tid() == caller;
    goro::lock_os_thread();
    goro::chan<int> c;
    std::atomic<bool> stop{false};
    goro::wait_group wg;
    for (int i = 0; i < 4; ++i) {  // busy neighbours on every P
      wg.add(1);
      goro::go([&] {
        while (!stop.load()) goro::yield();
        wg.done();
      });
    }
    for (int r = 0; r < rounds; ++r) {
      goro::yield();
      stayed = stayed && tid() == caller;
      goro::sleep_for(std::chrono::microseconds(200));
      stayed = stayed && tid() == caller;
      goro::go([c]() mutable { c.send(1); });
      (void)c.recv();
      stayed = stayed && tid() == caller;
      goro::blocking([] { ::usleep(100); });
      stayed = stayed && tid() == caller;
    }
    stop = true;
    wg.wait();
    stayed = stayed && tid() == caller;
    goro::unlock_os_thread();
  });
  CHECK(started_here);
  CHECK(stayed);
}

// While a goroutine is locked, its thread runs nothing else: other
// goroutines check the thread they run on against the locked one during
// the locked window (set after locking, cleared before unlocking).
TEST_CASE("lock_os_thread: the locked goroutine keeps its thread, and the thread runs nothing else",
          "[lock_os_thread]") {
  const unsigned procs = GENERATE(2u, 4u);
  CAPTURE(procs);
  goro::runtime rt{goro::options{procs}};
  const int rounds = goro_test::scale(200, 20);
  std::atomic<pid_t> locked_tid{0};
  std::atomic<bool> window{false};
  std::atomic<int> moved{0}, intruders{0}, checks{0};
  rt.run([&] {
    std::atomic<bool> stop{false};
    goro::wait_group wg;
    goro::chan<int> ping, pong;
    for (int i = 0; i < static_cast<int>(procs) * 2; ++i) {
      wg.add(1);
      goro::go([&] {
        while (!stop.load()) {
          if (window.load() && tid() == locked_tid.load()) intruders.fetch_add(1);
          checks.fetch_add(1);
          goro::yield();
        }
        wg.done();
      });
    }
    wg.add(1);
    goro::go([&] {  // the echo partner
      for (;;) {
        int v = *pong.recv();
        if (v < 0) break;
        ping.send(v);
      }
      wg.done();
    });
    wg.add(1);
    goro::go([&] {
      goro::lock_os_thread();
      const pid_t me = tid();
      locked_tid = me;
      window = true;
      for (int r = 0; r < rounds; ++r) {
        goro::yield();
        if (tid() != me) moved.fetch_add(1);
        pong.send(r);
        (void)ping.recv();
        if (tid() != me) moved.fetch_add(1);
        if (r % 10 == 0) {
          goro::sleep_for(std::chrono::microseconds(300));
          if (tid() != me) moved.fetch_add(1);
          goro::blocking([] { ::usleep(200); });
          if (tid() != me) moved.fetch_add(1);
        }
      }
      window = false;
      goro::unlock_os_thread();
      pong.send(-1);
      wg.done();
    });
    // Let the others finish their checks after the locked one is done.
    while (window.load() || locked_tid.load() == 0) goro::sleep_for(1ms);
    stop = true;
    wg.wait();
  });
  CHECK(moved.load() == 0);
  CHECK(intruders.load() == 0);
  CHECK(checks.load() > 0);
}

TEST_CASE("lock_os_thread: nests; unlock of an unlocked goroutine is a no-op", "[lock_os_thread]") {
  goro::runtime rt{goro::options{4}};
  int moved = 0;
  rt.run([&] {
    goro::unlock_os_thread();  // not locked: nothing happens
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      goro::unlock_os_thread();  // no-op
      goro::lock_os_thread();
      goro::lock_os_thread();
      goro::unlock_os_thread();  // still locked once
      const pid_t me = tid();
      std::atomic<bool> stop{false};
      goro::wait_group others;
      for (int i = 0; i < 6; ++i) {
        others.add(1);
        goro::go([&] {
          while (!stop.load()) goro::yield();
          others.done();
        });
      }
      for (int r = 0; r < goro_test::scale(200, 30); ++r) {
        goro::yield();
        if (r % 20 == 0) goro::sleep_for(std::chrono::microseconds(100));
        if (tid() != me) ++moved;
      }
      stop = true;
      others.wait();
      goro::unlock_os_thread();
      goro::unlock_os_thread();  // one too many: no-op
      wg.done();
    });
    wg.wait();
  });
  CHECK(moved == 0);
}

TEST_CASE("lock_os_thread: a goroutine that exits locked takes its thread with it", "[lock_os_thread]") {
  goro::runtime rt{goro::options{2}};
  pid_t locked_exit = 0, unlocked_exit = 0;
  const pid_t caller = tid();
  rt.run([&] {
    goro::lock_os_thread();  // keep main (and only main) on the caller's thread
    goro::chan<pid_t> c;
    goro::go([c]() mutable {
      goro::lock_os_thread();
      goro::lock_os_thread();
      goro::unlock_os_thread();
      c.send(tid());
    });  // ends locked
    locked_exit = *c.recv();
    goro::go([c]() mutable {
      goro::lock_os_thread();
      goro::unlock_os_thread();
      c.send(tid());
    });  // ends unlocked
    unlocked_exit = *c.recv();
    // The runtime goes on with a new thread where it needs one.
    goro::wait_group wg;
    std::atomic<int> n{0};
    for (int i = 0; i < 8; ++i) {
      wg.add(1);
      goro::go([&] {
        goro::sleep_for(1ms);
        n.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
    CHECK(n.load() == 8);
    goro::unlock_os_thread();
  });
  REQUIRE(locked_exit != 0);
  CHECK(locked_exit != caller);
  CHECK(eventually_sleeping([&] { return !thread_alive(locked_exit); }));
  // A thread is not torn down otherwise: the other goroutine's thread lives
  // on (in the runtime's idle pool) unless it was the one that exited.
  if (unlocked_exit != locked_exit && unlocked_exit != caller) CHECK(thread_alive(unlocked_exit));
}

TEST_CASE("lock_os_thread: a goroutine exiting locked on the run() caller's thread", "[lock_os_thread]") {
  // The caller's thread cannot exit: it sits out until main finishes, and
  // run() returns as usual.
  goro::runtime rt{goro::options{2}};
  const int rounds = goro_test::scale(20, 5);
  for (int r = 0; r < rounds; ++r) {
    int got = rt.run([] {
      goro::chan<int> c;
      goro::go([c]() mutable {  // likely runs next on this thread (runnext)
        goro::lock_os_thread();
        c.send(1);
      });
      int v = *c.recv();
      goro::sleep_for(std::chrono::microseconds(100));
      return v;
    });
    CHECK(got == 1);
  }
}

// Go's TestYieldLockedProgress: a locked goroutine yielding in a loop must
// let the others make progress (one P: its M has to hand it away).
TEST_CASE("lock_os_thread: a locked goroutine that yields lets others progress", "[lock_os_thread]") {
  const unsigned procs = GENERATE(1u, 2u);
  goro::runtime rt{goro::options{procs}};
  rt.run([] {
    std::atomic<int> progress{0};
    goro::chan<bool> done;
    goro::go([&, done]() mutable {
      goro::lock_os_thread();
      while (progress.load() < 100) goro::yield();
      goro::unlock_os_thread();
      done.send(true);
    });
    for (int i = 0; i < 100; ++i) {
      progress.fetch_add(1);
      goro::yield();
    }
    CHECK(*done.recv());
  });
}

TEST_CASE("lock_os_thread: preemption of a locked goroutine keeps it on its thread", "[lock_os_thread]") {
  goro::runtime rt{goro::options{2}};
  int moved = 0;
  rt.run([&] {
    goro::chan<int> c;
    goro::go([&, c]() mutable {
      goro::lock_os_thread();
      const pid_t me = tid();
      auto until = steady::now() + 60ms;
      while (steady::now() < until) {
        goro::preempt_point();
        if (tid() != me) ++moved;
      }
      c.send(1);
    });
    goro::go([] {  // competes for the Ps
      auto until = steady::now() + 60ms;
      while (steady::now() < until) goro::preempt_point();
    });
    (void)c.recv();
  });
  CHECK(moved == 0);
  if (!GORO_TEST_SANITIZED) CHECK(rt.stats().preemptions > 0);  // the path was taken
}

TEST_CASE("lock_os_thread: main starts on the caller's thread even when every P is busy", "[lock_os_thread]") {
  // Goroutines started before run() hold both Ps: main waits in the global
  // queue, and the M that picks it hands its P to the run() caller's thread.
  std::atomic<int> started{0};
  std::atomic<bool> stop{false};  // before rt: the spinners may outlive run()
  goro::runtime rt{goro::options{2}};
  for (int i = 0; i < 2; ++i)
    rt.go([&] {
      started.fetch_add(1);
      while (!stop.load()) goro::yield();
    });
  REQUIRE(eventually_sleeping([&] { return started.load() == 2; }));
  const pid_t caller = tid();
  bool here = false;
  rt.run([&] {
    here = tid() == caller;
    stop = true;
  });
  CHECK(here);
}
