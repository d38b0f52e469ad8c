// Timed waits (beyond Go): wait_group::wait_for/until, cond::wait_for/until,
// mutex::try_lock_for/until -- false on timeout, true when satisfied in time,
// from goroutines and plain threads.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "test_util.hpp"

using namespace std::chrono_literals;
using goro_test::scale;

TEST_CASE("timed waits: wait_group::wait_for / wait_until", "[timed]") {
  goro::run([] {
    goro::wait_group wg;
    CHECK(wg.wait_for(1ms));  // zero counter: at once
    wg.add(1);
    auto start = std::chrono::steady_clock::now();
    CHECK(!wg.wait_for(20ms));
    CHECK(std::chrono::steady_clock::now() - start >= 20ms);
    CHECK(!wg.wait_until(std::chrono::system_clock::now() + 5ms));  // another clock
    goro::go([&] {
      goro::sleep_for(10ms);
      wg.done();
    });
    CHECK(wg.wait_for(10s));
    // The withdrawn registrations left no stray token: a new cycle waits.
    wg.add(1);
    CHECK(!wg.wait_for(5ms));
    wg.done();
    CHECK(wg.wait_for(0ms));
  });
}

TEST_CASE("timed waits: cond::wait_for re-locks and reports timeout vs notify", "[timed]") {
  goro::run([] {
    goro::mutex mu;
    goro::cond cv;
    bool ready = false;
    std::unique_lock<goro::mutex> lk(mu);
    CHECK(!cv.wait_for(lk, 10ms));
    CHECK(lk.owns_lock());
    CHECK(!mu.try_lock());  // re-locked
    goro::go([&] {
      goro::sleep_for(5ms);
      std::lock_guard<goro::mutex> g(mu);
      ready = true;
      cv.notify_one();
    });
    while (!ready) REQUIRE(cv.wait_for(lk, 10s));
    CHECK(ready);
    lk.unlock();
    std::unique_lock<goro::mutex> unlocked(mu, std::defer_lock);
    CHECK_THROWS_AS(cv.wait_for(unlocked, 1ms), goro::usage_error);
  });
}

TEST_CASE("timed waits: a cond wait_for already past its deadline leaves no ticket for notify_one to spend",
          "[timed]") {
  // A wait_for(0) took a ticket and returned false without queueing; had
  // it not given the ticket up, a later notify_one would spend itself on
  // it and the goroutine really waiting would never wake.
  goro::run(
      [] {
        goro::mutex mu;
        goro::cond cv;
        bool ready = false;
        {
          std::unique_lock<goro::mutex> lk(mu);
          CHECK(!cv.wait_for(lk, 0ms));
          CHECK(!cv.wait_until(lk, std::chrono::steady_clock::now() - 1s));
        }
        goro::wait_group wg;
        wg.add(1);
        goro::go([&] {
          std::unique_lock<goro::mutex> lk(mu);
          while (!ready) cv.wait(lk);
          wg.done();
        });
        goro::sleep_for(20ms);  // the waiter takes its ticket and parks
        {
          std::lock_guard<goro::mutex> g(mu);
          ready = true;
        }
        cv.notify_one();
        const bool woken = wg.wait_for(5s);
        CHECK(woken);
        if (!woken) {
          cv.notify_all();
          wg.wait();
        }
      },
      goro::options{2});
}

TEST_CASE("timed waits: timed-out cond waits do not pile up for notify_one to walk", "[timed]") {
  // A poller whose cond waits time out with nobody notifying: each gives up
  // a ticket. They used to pile up in a list that the next notify_one
  // walked under the lock, with a linear find and erase per ticket (300k
  // of them cost one notify_one 4.6 s); now they are passed over as they
  // are given up. The waits in between still behave.
  goro::run(
      [] {
        goro::mutex mu;
        goro::cond cv;
        const int n = scale(300000, 30000);
        std::unique_lock<goro::mutex> lk(mu);
        int timed_out = 0;
        for (int i = 0; i < n; ++i) timed_out += cv.wait_for(lk, 0ms) ? 0 : 1;
        CHECK(timed_out == n);
        const auto start = std::chrono::steady_clock::now();
        cv.notify_one();
        CHECK(std::chrono::steady_clock::now() - start < 1s);
        // A waiter behind a timed-out one is still the one notify_one wakes.
        CHECK(!cv.wait_for(lk, 1ms));
        bool ready = false;
        goro::go([&] {
          std::lock_guard<goro::mutex> g(mu);
          ready = true;
          cv.notify_one();
        });
        while (!ready) REQUIRE(cv.wait_for(lk, 10s));
      },
      goro::options{2});
}

TEST_CASE("timed waits: mutex::try_lock_for / try_lock_until", "[timed]") {
  goro::run([] {
    goro::mutex mu;
    CHECK(mu.try_lock_for(1ms));
    auto start = std::chrono::steady_clock::now();
    CHECK(!mu.try_lock_for(15ms));  // held by us
    CHECK(std::chrono::steady_clock::now() - start >= 15ms);
    goro::go([&] {
      goro::sleep_for(5ms);
      mu.unlock();
    });
    CHECK(mu.try_lock_until(std::chrono::steady_clock::now() + 10s));
    mu.unlock();
  });
}

TEST_CASE("timed waits: polling with a deadline already past is a safe point", "[timed][preempt]") {
  // One P, cooperative preemption (the default): a goroutine polling
  // mu.try_lock_for(0) or wg.wait_for(0) makes no other goro call. Those
  // calls must honour sysmon's preemption request (as try_recv does), or
  // the goroutine it polls for, asleep on a timer that only runs when the P
  // schedules, never runs: the poll used to spin for good.
  goro::run(
      [] {
        for (int which = 0; which < 2; ++which) {
          goro::mutex mu;
          goro::wait_group wg, helper;
          mu.lock();
          wg.add(1);
          helper.add(1);
          goro::go([&] {
            goro::sleep_for(1ms);
            mu.unlock();
            wg.done();
            helper.done();
          });
          const auto give_up = std::chrono::steady_clock::now() + 3s;
          bool got = false;
          while (!got && std::chrono::steady_clock::now() < give_up)
            got = which == 0 ? mu.try_lock_for(0ms) : wg.wait_for(0ms);
          CHECK(got);
          helper.wait();  // a failed poll: parking lets the helper finish
          if (which == 0 && got) mu.unlock();
        }
      },
      goro::options{1});
}

TEST_CASE("timed waits: extreme durations and instants saturate (hours::max() waits, min() does not)", "[timed]") {
  // As sleep_for: hours::max() is "forever" and nanoseconds::min() / a
  // time_point's min() "already past". The waits computed now() + d in
  // nanoseconds (hours::max() overflowed: false at once) and tp - now()
  // (min() overflowed to a huge wait: blocked until woken).
  goro::run(
      [] {
        using steady = std::chrono::steady_clock;
        // A long wait that is satisfied after 10 ms.
        goro::wait_group wg;
        wg.add(1);
        goro::mutex mu, cmu;
        goro::cond cv;
        bool ready = false;
        mu.lock();
        goro::go([&] {
          goro::sleep_for(10ms);
          wg.done();
          mu.unlock();
          std::lock_guard<goro::mutex> g(cmu);
          ready = true;
          cv.notify_one();
        });
        CHECK(wg.wait_for(std::chrono::hours::max()));
        const bool locked = mu.try_lock_for(std::chrono::hours::max());
        CHECK(locked);
        if (locked) mu.unlock();
        {
          std::unique_lock<goro::mutex> lk(cmu);
          bool notified = true;
          while (!ready && notified) notified = cv.wait_for(lk, std::chrono::hours::max());
          CHECK(notified);
          while (!ready) cv.wait(lk);
        }
        wg.wait();
        // Waits already past: false at once (a helper releases them after
        // 2 s, or as soon as the checks are done).
        goro::wait_group never;
        never.add(1);
        goro::mutex held;
        held.lock();
        goro::chan<int> release;
        goro::go([&] {
          goro::select(goro::on_recv(release, [](std::optional<int>) {}), goro::on_recv(goro::after(2s), [](auto) {}));
          never.done();
          held.unlock();
          std::lock_guard<goro::mutex> g(cmu);
          cv.notify_all();
        });
        const auto start = steady::now();
        CHECK(!never.wait_for(std::chrono::nanoseconds::min()));
        CHECK(!never.wait_until(steady::time_point::min()));
        CHECK(!held.try_lock_for(std::chrono::nanoseconds::min()));
        CHECK(!held.try_lock_until(steady::time_point::min()));
        {
          std::unique_lock<goro::mutex> lk(cmu);
          CHECK(!cv.wait_for(lk, std::chrono::nanoseconds::min()));
          CHECK(!cv.wait_until(lk, steady::time_point::min()));
        }
        CHECK(steady::now() - start < 1s);
        release.close();
        never.wait();
      },
      goro::options{2});
}

TEST_CASE("timed waits: a coarse instant's max() waits, its min() does not", "[timed]") {
  // time_point<steady_clock, seconds>::max() ("forever") converted to the
  // clock's nanoseconds with an overflow (UB) and read as long past: every
  // wait_until / try_lock_until returned false at once. The same instants
  // of another clock (system_clock, hours) too.
  using namespace std::chrono;
  const auto forever = time_point<steady_clock, seconds>::max();
  const auto forever_sys = time_point<system_clock, hours>::max();
  const auto past = time_point<steady_clock, seconds>::min();
  goro::run(
      [&] {
        goro::wait_group wg;
        wg.add(1);
        goro::mutex mu, mu2, cmu;
        goro::cond cv;
        bool ready = false;
        mu.lock();
        mu2.lock();
        goro::go([&] {
          goro::sleep_for(10ms);
          wg.done();
          mu.unlock();
          mu2.unlock();
          std::lock_guard<goro::mutex> g(cmu);
          ready = true;
          cv.notify_one();
        });
        CHECK(wg.wait_until(forever));
        const bool locked = mu.try_lock_until(forever);
        CHECK(locked);
        if (locked) mu.unlock();
        const bool locked2 = mu2.try_lock_until(forever_sys);
        CHECK(locked2);
        if (locked2) mu2.unlock();
        {
          std::unique_lock<goro::mutex> lk(cmu);
          bool notified = true;
          while (!ready && notified) notified = cv.wait_until(lk, forever);
          CHECK(notified);
        }
        // Already past: false at once.
        goro::wait_group never;
        never.add(1);
        CHECK(!never.wait_until(past));
        CHECK(!never.wait_until(time_point<system_clock, hours>::min()));
        never.done();
      },
      goro::options{2});
  // From a plain thread.
  goro::wait_group wg;
  wg.add(1);
  std::thread t([&] {
    std::this_thread::sleep_for(10ms);
    wg.done();
  });
  CHECK(wg.wait_until(forever));
  t.join();
}

TEST_CASE("timed waits: racing timeouts and wakes, goroutines and threads", "[timed]") {
  goro::runtime rt{goro::options{4}};
  const int n = scale(300, 50);
  std::atomic<int> ok{0}, timed_out{0};
  goro::wait_group wg;
  std::atomic<bool> thread_timed_out{false};
  std::thread t([&] {
    // A plain thread: the futex timeout path.
    goro::wait_group never;
    never.add(1);
    thread_timed_out = !never.wait_for(5ms);
    never.done();
  });
  rt.run([&] {
    goro::wait_group all;
    for (int i = 0; i < n; ++i) {
      all.add(1);
      goro::go([&, i] {
        goro::wait_group w;
        w.add(1);
        goro::go([&w, i] {
          if (i % 3) goro::sleep_for(std::chrono::microseconds(i % 200));
          w.done();
        });
        if (w.wait_for(std::chrono::microseconds(100))) {
          ok.fetch_add(1);
        } else {
          timed_out.fetch_add(1);
          w.wait();  // the helper still refers to w
        }
        all.done();
      });
    }
    all.wait();
  });
  t.join();
  CHECK(thread_timed_out.load());
  CHECK(ok.load() + timed_out.load() == n);
}

#if GORO_EXCEPTIONS
TEST_CASE("timed waits, rw_mutex and nil channels inside goro::blocking are usage_errors", "[timed][blocking]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::wait_group wg;
    wg.add(1);
    goro::mutex mu, mu2;
    mu.lock();
    goro::cond cv;
    goro::rw_mutex rw;
    rw.lock();
    goro::chan<int> nil = nullptr;
    auto message = [](auto f) {
      std::string what;
      goro::blocking([&] {
        try {
          f();
        } catch (const goro::usage_error& e) {
          what = e.what();
        }
      });
      return what;
    };
    // Each names the call made (wait_for said wait_until).
    CHECK(message([&] { (void)wg.wait_for(1s); }) == "goro: wait_group wait_for inside goro::blocking");
    CHECK(message([&] { (void)wg.wait_until(std::chrono::steady_clock::now() + 1s); }) ==
          "goro: wait_group wait_until inside goro::blocking");
    CHECK(message([&] { (void)mu.try_lock_for(1s); }) == "goro: mutex try_lock_for inside goro::blocking");
    CHECK(message([&] { (void)mu.try_lock_until(std::chrono::steady_clock::now() + 1s); }) ==
          "goro: mutex try_lock_until inside goro::blocking");
    CHECK(message([&] { rw.lock_shared(); }) == "goro: rw_mutex lock_shared inside goro::blocking");
    CHECK(message([&] { rw.lock(); }) == "goro: rw_mutex lock inside goro::blocking");
    CHECK(message([&] { (void)nil.recv(); }) == "goro: chan recv inside goro::blocking");
    CHECK(message([&] { nil.send(1); }) == "goro: chan send inside goro::blocking");
    {
      std::unique_lock<goro::mutex> lk(mu2);
      CHECK(message([&] { (void)cv.wait_for(lk, 1s); }) == "goro: cond wait_for inside goro::blocking");
      CHECK(message([&] { (void)cv.wait_until(lk, std::chrono::steady_clock::now() + 1s); }) ==
            "goro: cond wait_until inside goro::blocking");
    }
    {
      std::unique_lock<goro::mutex> lk(mu2, std::defer_lock);
      CHECK_THROWS_WITH(cv.wait_for(lk, 1ms), "goro: cond wait_for without the lock held");
      CHECK_THROWS_WITH(cv.wait_until(lk, std::chrono::steady_clock::now()),
                        "goro: cond wait_until without the lock held");
    }
    // Everything was left as it was.
    wg.done();
    CHECK(wg.wait_for(1s));
    mu.unlock();
    CHECK(mu.try_lock_for(1s));
    mu.unlock();
    rw.unlock();
    CHECK(rw.try_lock_shared());
    rw.unlock_shared();
  });
}
#endif
