// group: Go's errgroup -- first failure wins (error code or exception),
// ctx() cancelled on failure and when wait returns, set_limit, try_go.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#include "test_util.hpp"

using namespace std::chrono_literals;

TEST_CASE("group: all succeed; ctx() is cancelled when wait returns", "[group]") {
  goro::run([] {
    goro::group g;
    std::atomic<int> ran{0};
    for (int i = 0; i < 50; ++i) g.go([&] { ran.fetch_add(1); });
    for (int i = 0; i < 50; ++i)
      g.go([&]() -> std::error_code {
        ran.fetch_add(1);
        return {};
      });
    CHECK(g.ctx().err() == goro::cancel_reason::none);
    CHECK(!g.wait());
    CHECK(ran.load() == 100);
    CHECK(g.ctx().err() == goro::cancel_reason::canceled);
  });
}

TEST_CASE("group: the first error code wins and cancels ctx()", "[group]") {
  goro::run([] {
    goro::group g;
    std::atomic<int> saw_cancel{0};
    for (int i = 0; i < 10; ++i)
      g.go([&g, &saw_cancel]() -> std::error_code {
        // Every task but the failing one waits for the cancellation.
        (void)g.ctx().done().recv();
        saw_cancel.fetch_add(1);
        return std::make_error_code(std::errc::operation_canceled);
      });
    g.go([]() -> std::error_code { return std::make_error_code(std::errc::io_error); });
    std::error_code ec = g.wait();
    CHECK(ec == std::errc::io_error);  // not the later operation_canceled ones
    CHECK(saw_cancel.load() == 10);
  });
}

TEST_CASE("group: an exception is the failure, rethrown by wait", "[group]") {
  goro::run([] {
    goro::group g;
    g.go([&g] { (void)g.ctx().done().recv(); });
    g.go([] { throw std::runtime_error("boom"); });
    CHECK_THROWS_WITH(g.wait(), "boom");
    CHECK(g.ctx().err() == goro::cancel_reason::canceled);
    // goro::exit() in a task is not a failure.
    goro::group h;
    h.go([] { goro::exit(); });
    CHECK(!h.wait());
  });
}

TEST_CASE("group: a cancelled parent cancels ctx() but is not a failure", "[group]") {
  goro::run([] {
    auto [parent, cancel] = goro::with_cancel(goro::background());
    goro::group g(parent);
    g.go([&g] { (void)g.ctx().done().recv(); });  // returns nothing: no failure
    cancel();
    CHECK(!g.wait());
    CHECK(g.ctx().err() == goro::cancel_reason::canceled);
  });
}

TEST_CASE("group: set_limit bounds the running tasks; try_go does not block", "[group]") {
  goro::runtime rt{goro::options{4}};
  rt.run([] {
    goro::group g;
    g.set_limit(3);
    std::atomic<int> running{0}, peak{0}, done{0};
    for (int i = 0; i < 30; ++i)
      g.go([&] {
        int now = running.fetch_add(1) + 1;
        int p = peak.load();
        while (now > p && !peak.compare_exchange_weak(p, now)) {
        }
        goro::sleep_for(1ms);
        running.fetch_sub(1);
        done.fetch_add(1);
      });
    CHECK(peak.load() <= 3);
    CHECK(!g.wait());
    CHECK(done.load() == 30);
    CHECK(peak.load() <= 3);
    CHECK(peak.load() >= 1);

    goro::group t;
    t.set_limit(1);
    goro::chan<int> gate;
    CHECK(t.try_go([gate]() mutable { (void)gate.recv(); }));
    CHECK(!t.try_go([] {}));  // at the limit
    // set_limit while a task runs: usage_error.
    CHECK_THROWS_WITH(t.set_limit(5), Catch::Contains("modify limit while 1 tasks in the group are still active"));
    gate.send(1);
    CHECK(!t.wait());
    CHECK(t.try_go([] {}));  // a slot again
    CHECK(!t.wait());
    t.set_limit(-1);  // no limit
    for (int i = 0; i < 10; ++i) CHECK(t.try_go([] {}));
    CHECK(!t.wait());
  });
}

TEST_CASE("group: go / try_go outside a goroutine are usage_errors and leave the group usable", "[group]") {
  goro::runtime rt{goro::options{2}};
  goro::group g;  // owned by this plain thread
  g.set_limit(1);
  CHECK_THROWS_AS(g.go([] {}), goro::usage_error);
  CHECK_THROWS_AS(g.try_go([] {}), goro::usage_error);
  // Nothing is left counted: no slot taken, no task to wait for (wait()
  // and the destructor used to hang here), and the limit can change.
  CHECK(!g.wait());
  g.set_limit(2);
  std::atomic<int> ran{0};
  rt.run([&] {
    CHECK(g.try_go([&] { ran.fetch_add(1); }));
    CHECK(g.try_go([&] { ran.fetch_add(1); }));
    CHECK(!g.wait());
  });
  CHECK(ran.load() == 2);
}

TEST_CASE("group: main returning while a goroutine waits in a group's destructor ends it (no std::terminate)",
          "[group]") {
  struct count_on_exit {
    std::atomic<int>* n;
    ~count_on_exit() { n->fetch_add(1); }
  };
  std::atomic<int> task_unwound{0}, outer_unwound{0}, past_group{0};
  goro::chan<int> never;
  goro::run([&] {
    goro::go([&] {
      count_on_exit outer{&outer_unwound};
      {
        goro::group g;
        g.go([&] {
          count_on_exit t{&task_unwound};
          (void)never.recv();
        });
      }  // ~group (noexcept) waits for the task: main returns meanwhile
      past_group.fetch_add(1);
      goro::yield();  // ends here, outside the destructor
      past_group.fetch_add(100);
    });
    REQUIRE(goro_test::eventually([] { return goro::num_goroutine() == 3; }));
    goro::sleep_for(20ms);  // both parked
  });
  CHECK(task_unwound.load() == 1);
  CHECK(past_group.load() == 1);
  CHECK(outer_unwound.load() == 1);
}

TEST_CASE("group: an exception unwinding past a group cancels ctx() first, so tasks watching it end", "[group]") {
  std::atomic<int> ended{0};
  CHECK_THROWS_AS(goro::run([&] {
                    goro::group g;
                    for (int i = 0; i < 3; ++i)
                      g.go([&] {
                        (void)g.ctx().done().recv();
                        ended.fetch_add(1);
                      });
                    REQUIRE(goro_test::eventually([] { return goro::num_goroutine() == 4; }));
                    throw std::runtime_error("failed before wait()");
                  }),
                  std::runtime_error);
  CHECK(ended.load() == 3);
  // Not unwinding: the destructor waits for the tasks without cancelling.
  std::atomic<bool> cancelled{true};
  goro::run([&] {
    goro::group g;
    g.go([&] {
      goro::sleep_for(20ms);
      cancelled = g.ctx().err() != goro::cancel_reason::none;
    });
  });
  CHECK_FALSE(cancelled.load());
}

TEST_CASE("group: a task with a limit that ends after main returned frees its slot without std::terminate", "[group]") {
  std::atomic<bool> started{false}, finish{false};
  std::atomic<int> task_done{0};
  std::thread releaser([&] {
    while (!started.load()) std::this_thread::yield();
    std::this_thread::sleep_for(100ms);  // main has returned by now
    finish = true;
  });
  goro::run([&] {
    goro::go([&] {
      goro::group g;
      g.set_limit(1);
      g.go([&] {
        started = true;
        while (!finish.load()) {  // no goro call: main's return waits for it
        }
        task_done.fetch_add(1);
      });  // its end frees the slot (a goro call) in a destructor
      (void)g.wait();
    });
    while (!started.load()) goro::yield();
  });
  releaser.join();
  CHECK(task_done.load() == 1);
}

TEST_CASE("group: a task discarded unrun because main returned still counts as done", "[group]") {
  std::atomic<bool> spawned{false}, go_on{false};
  std::atomic<int> ran{0}, past_group{0};
  std::thread releaser([&] {
    while (!spawned.load()) std::this_thread::yield();
    std::this_thread::sleep_for(100ms);  // main has returned: the task is discarded
    go_on = true;
  });
  {
    goro::runtime rt({.maxprocs = 2});
    rt.run([&] {
      goro::go([&] {
        {
          goro::group g;
          g.go([&] { ran.fetch_add(1); });  // queued on this P, which stays busy
          spawned = true;
          while (!go_on.load()) {  // no goro call
          }
        }  // ~group: the unrun task must not keep it waiting
        past_group.fetch_add(1);
      });
      while (!spawned.load()) {  // no goro call either: this P takes nothing
      }
    });
  }
  releaser.join();
  CHECK(ran.load() == 0);
  CHECK(past_group.load() == 1);
}

TEST_CASE("group: wait() again, or from several goroutines at once, reports the same failure", "[group]") {
  // wait() took the exception out of the group as it rethrew it: a second
  // wait() returned {} (no failure) after a task had thrown, and two
  // concurrent waits both wrote the exception_ptr (a data race). Go's Wait
  // returns the same error every time, from any number of waiters.
  goro::run(
      [] {
        goro::group g;
        g.go([] { throw std::runtime_error("boom"); });
        CHECK_THROWS_WITH(g.wait(), "boom");
        CHECK_THROWS_WITH(g.wait(), "boom");
        goro::group e;
        e.go([] { return std::make_error_code(std::errc::io_error); });
        CHECK(e.wait() == std::errc::io_error);
        CHECK(e.wait() == std::errc::io_error);
        // Concurrent waiters, while the failing task is still running.
        goro::group c;
        goro::chan<int> go_on;
        c.go([go_on]() mutable {
          (void)go_on.recv();
          throw std::runtime_error("late");
        });
        std::atomic<int> saw{0};
        goro::wait_group waiters;
        for (int i = 0; i < 4; ++i) {
          waiters.add(1);
          goro::go([&] {
            try {
              (void)c.wait();
            } catch (const std::runtime_error& ex) {
              if (std::string(ex.what()) == "late") saw.fetch_add(1);
            }
            waiters.done();
          });
        }
        goro::sleep_for(5ms);
        go_on.close();
        waiters.wait();
        CHECK(saw.load() == 4);
      },
      goro::options{2});
}

TEST_CASE("group: go outside a goroutine is a usage_error at once (also at the limit)", "[group]") {
  // go() took its slot first, blocking the plain thread while the group
  // was at its limit -- for good with set_limit(0) -- and only then found
  // it could not start the task.
  auto* g = new goro::group;
  g->set_limit(0);
  std::atomic<bool> raised{false}, returned{false};
  std::thread t([&raised, &returned, g] {
    try {
      g->go([] {});
    } catch (const goro::usage_error&) {
      raised = true;
    }
    returned = true;
  });
  for (int i = 0; i < 200 && !returned; ++i) std::this_thread::sleep_for(10ms);
  CHECK(raised);
  if (!returned) {  // blocked for good on the group's slot channel: leave both behind
    t.detach();
    return;
  }
  t.join();
  delete g;
}
