// wait_group: counting, waking every waiter, plain threads, misuse, and the
// lifetime rule (it may live on the waiter's stack).
#define GORO_TESTING 1  // detail::testing::wait_group_before_reset
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"

TEST_CASE("wait_group: wait returns at once when the counter is zero", "[wait_group]") {
  goro::wait_group wg;
  wg.wait();  // plain thread, nothing to wait for
  goro::run([&] { wg.wait(); });
}

TEST_CASE("wait_group: every waiter wakes when the counter reaches zero", "[wait_group]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::wait_group wg, waiters_done;
    wg.add(3);
    std::atomic<int> woke{0};
    const int waiters = 20;
    waiters_done.add(waiters);
    for (int i = 0; i < waiters; ++i)
      goro::go([&] {
        wg.wait();
        woke.fetch_add(1);
        waiters_done.done();
      });
    for (int i = 0; i < 5; ++i) goro::yield();
    CHECK(woke.load() == 0);
    wg.done();
    wg.done();
    for (int i = 0; i < 5; ++i) goro::yield();
    CHECK(woke.load() == 0);
    wg.done();
    waiters_done.wait();
    CHECK(woke.load() == waiters);
  });
}

TEST_CASE("wait_group: negative counter is a usage error", "[wait_group][errors]") {
  goro::wait_group wg;
  CHECK_THROWS_WITH(wg.done(), "goro: wait_group counter went negative");
  wg.add(1);  // the failed done() left the counter at zero
  wg.done();
  wg.wait();
}

TEST_CASE("wait_group: reuse before the previous wait returned is a usage error", "[wait_group][errors]") {
  // Go's "WaitGroup is reused before previous Wait has returned". At one P
  // the waiter released by done() does not run before the next add().
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    goro::wait_group wg, fin;
    wg.add(1);
    fin.add(1);
    std::string outcome = "none";
    goro::go([&] {
      try {
        wg.wait();
        outcome = "returned";
      } catch (const goro::usage_error& e) {
        outcome = e.what();
      }
      fin.done();
    });
    goro::yield();  // the waiter parks in wait()
    wg.done();      // releases it: runnable, not running yet
    wg.add(1);      // reused before its wait() returned
    fin.wait();
    CHECK(outcome == "goro: wait_group misuse: wait_group is reused before previous wait has returned");
    wg.done();
    wg.wait();
  });
}

namespace {
std::atomic<int> nested_add_errors{0};
std::string nested_add_message;
}  // namespace

// Go's "WaitGroup misuse: Add called concurrently with Wait": an add() that
// lands between the last done() bringing the counter to zero and that
// done() releasing the waiters. The hook runs the add() exactly there.
TEST_CASE("wait_group: add concurrent with the releasing done is a usage error", "[wait_group][errors]") {
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    goro::wait_group wg, fin;
    wg.add(1);
    fin.add(1);
    std::atomic<bool> waiter_returned{false};
    goro::go([&] {
      try {
        wg.wait();
      } catch (const goro::usage_error&) {
      }
      waiter_returned = true;
      fin.done();
    });
    goro::yield();  // the waiter parks in wait()
    goro::detail::testing::wait_group_before_reset.store(+[](goro::wait_group* w) {
      goro::detail::testing::wait_group_before_reset.store(nullptr);
      try {
        w->add(1);
      } catch (const goro::usage_error& e) {
        nested_add_errors.fetch_add(1);
        nested_add_message = e.what();
      }
    });
    std::string outer = "none";
    try {
      wg.done();
    } catch (const goro::usage_error& e) {
      outer = e.what();
    }
    CHECK(nested_add_errors.load() == 1);  // the add that raced
    CHECK(nested_add_message == "goro: wait_group misuse: add called concurrently with wait");
    CHECK(outer == "goro: wait_group misuse: add called concurrently with wait");  // the done that saw it
    fin.wait();  // the waiter was still released
    CHECK(waiter_returned.load());
  });
}

TEST_CASE("wait_group: may live on the waiter's stack (last done races the return)", "[wait_group]") {
  // Under ASan this catches a done() that touches the object after the
  // waiter could return and pop its frame.
  goro::runtime rt{goro::options{2}};
  const int rounds = goro_test::scale(20000, 2000);
  rt.run([&] {
    for (int i = 0; i < rounds; ++i) {
      goro::wait_group wg;
      wg.add(2);
      goro::go([&wg] { wg.done(); });
      goro::go([&wg] { wg.done(); });
      wg.wait();
    }
  });
  // Plain thread waiting on a stack wait_group fed by goroutines.
  for (int i = 0; i < rounds / 10; ++i) {
    goro::wait_group wg;
    wg.add(1);
    rt.go([&wg] { wg.done(); });
    wg.wait();
  }
}

TEST_CASE("wait_group: goroutines and threads wait together", "[wait_group]") {
  goro::runtime rt{goro::options{.maxprocs = 2, .detect_deadlock = false}};  // fed by plain threads
  goro::wait_group gate, finished;
  gate.add(1);
  finished.add(4);
  std::atomic<int> passed{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&] {
      gate.wait();
      passed.fetch_add(1);
      finished.done();
    });
  rt.run([&] {
    for (int i = 0; i < 2; ++i)
      goro::go([&] {
        gate.wait();
        passed.fetch_add(1);
        finished.done();
      });
    for (int i = 0; i < 3; ++i) goro::yield();
    CHECK(passed.load() == 0);
    gate.done();
    finished.wait();
  });
  for (auto& t : threads) t.join();
  CHECK(passed.load() == 4);
}
