// time: sleep_for / sleep_until on the per-P timer heaps — never early,
// late by a bounded amount, many sleepers, idle Ps, plain threads, an idle
// runtime that sleeps without burning CPU, shutdown with sleepers.
// Wall-clock bounds are generous (a shared, loaded machine, sanitizers):
// tests check ordering and "never early", not speed.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "test_util.hpp"

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

// Generous lateness bound: scheduling noise on a shared 2-core machine.
constexpr auto late_bound = goro_test::scale(500, 2000) * 1ms;

std::int64_t process_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return std::int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Makes every P run something, so that the runtime has several Ms that
// later go idle.
void warm_up_ms(int n) {
  goro::wait_group wg;
  wg.add(n);
  for (int i = 0; i < n; ++i)
    goro::go([&wg] {
      volatile std::uint64_t x = 0;
      for (int k = 0; k < 20000; ++k) x = x + static_cast<std::uint64_t>(k);
      wg.done();
    });
  wg.wait();
}

}  // namespace

TEST_CASE("time: sleep_for is never early", "[time]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    for (auto d : {1ms, 2ms, 5ms, 20ms, 50ms}) {
      auto t0 = steady::now();
      goro::sleep_for(d);
      auto dt = steady::now() - t0;
      CHECK(dt >= d);
      CHECK(dt < d + late_bound);
    }
    // Finer than a nanosecond rounds up, not down.
    auto t0 = steady::now();
    goro::sleep_for(std::chrono::duration<double, std::milli>(1.5));
    CHECK(steady::now() - t0 >= 1500us);
  });
}

TEST_CASE("time: sleep_until waits for the instant", "[time]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto deadline = steady::now() + 15ms;
    goro::sleep_until(deadline);
    CHECK(steady::now() >= deadline);
    auto coarse = std::chrono::time_point_cast<std::chrono::milliseconds>(steady::now() + 10ms);
    goro::sleep_until(coarse);
    CHECK(steady::now() >= coarse);
  });
}

TEST_CASE("time: non-positive durations and past instants return at once", "[time]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto t0 = steady::now();
    goro::sleep_for(0ms);
    goro::sleep_for(-5s);
    goro::sleep_for(std::chrono::nanoseconds::min());
    goro::sleep_until(steady::now() - 1h);
    goro::sleep_until(steady::time_point{});
    CHECK(steady::now() - t0 < late_bound);
  });
  goro::sleep_for(-1ms);  // plain thread too
}

TEST_CASE("time: a loop of zero sleeps is preempted", "[time][preempt]") {
  // One P, cooperative preemption (the default): sleep_for(0) returns at
  // once, but as a goro call it honours sysmon's preemption request (as a
  // sleep_until in the past did). A loop of them used to keep the P for
  // good: the goroutine it waited for, asleep on that P's timer heap,
  // never ran.
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    for (int which = 0; which < 2; ++which) {
      std::atomic<bool> ready{false};
      goro::wait_group helper;
      helper.add(1);
      goro::go([&] {
        goro::sleep_for(1ms);
        ready = true;
        helper.done();
      });
      const auto give_up = steady::now() + 3s;
      while (!ready && steady::now() < give_up) {
        if (which == 0)
          goro::sleep_for(0ms);
        else
          goro::sleep_until(steady::time_point{});
      }
      CHECK(ready.load());
      helper.wait();  // a loop that gave up: parking lets the helper finish
    }
  });
}

TEST_CASE("time: sleepers wake in deadline order", "[time]") {
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    std::mutex mu;
    std::vector<int> order;
    goro::wait_group wg;
    const int n = 5;
    wg.add(n);
    for (int i = n - 1; i >= 0; --i)  // spawned in reverse order
      goro::go([&, i] {
        goro::sleep_for(std::chrono::milliseconds(5 + 25 * i));
        {
          std::lock_guard<std::mutex> lk(mu);
          order.push_back(i);
        }
        wg.done();
      });
    wg.wait();
    REQUIRE(order.size() == n);
    CHECK(std::is_sorted(order.begin(), order.end()));
  });
}

TEST_CASE("time: thousands of sleepers of 1-10 ms all wake, none early", "[time]") {
  const int n = goro_test::scale(10000, 300);
  goro::runtime rt{goro::options{4}};
  rt.run([&] {
    std::atomic<int> early{0}, late{0};
    std::atomic<std::int64_t> worst_ns{0};
    goro::wait_group wg;
    wg.add(n);
    std::mt19937 rng(12345);
    auto start = steady::now();
    for (int i = 0; i < n; ++i) {
      auto d = std::chrono::microseconds(1000 + rng() % 9001);
      goro::go([&, d] {
        auto t0 = steady::now();
        goro::sleep_for(d);
        auto dt = steady::now() - t0;
        if (dt < d) early.fetch_add(1);
        if (dt > d + late_bound) late.fetch_add(1);
        std::int64_t over = std::chrono::duration_cast<std::chrono::nanoseconds>(dt - d).count();
        std::int64_t w = worst_ns.load();
        while (over > w && !worst_ns.compare_exchange_weak(w, over)) {
        }
        wg.done();
      });
    }
    wg.wait();
    auto total = steady::now() - start;
    INFO("worst lateness " << worst_ns.load() / 1000 << " us; all done in "
                           << std::chrono::duration_cast<std::chrono::milliseconds>(total).count() << " ms");
    CHECK(early.load() == 0);
    CHECK(late.load() == 0);
    CHECK(total < 10ms + late_bound + goro_test::scale(1000, 5000) * 1ms);  // spawning included
  });
}

TEST_CASE("time: sleep from a plain thread sleeps the thread", "[time]") {
  auto t0 = steady::now();
  goro::sleep_for(10ms);
  CHECK(steady::now() - t0 >= 10ms);
  auto deadline = steady::now() + 5ms;
  goro::sleep_until(deadline);
  CHECK(steady::now() >= deadline);
  // Also while a runtime runs on other threads.
  goro::runtime rt{goro::options{2}};
  std::thread th([] {
    auto t1 = steady::now();
    goro::sleep_for(10ms);
    CHECK(steady::now() - t1 >= 10ms);
  });
  rt.run([] { goro::sleep_for(5ms); });
  th.join();
}

TEST_CASE("time: a plain thread in goro::sleep_for counts as live for deadlock detection", "[time][deadlock]") {
  // docs/api.md: a plain thread that has used goro counts as a live
  // external M, however long it sleeps. Sleeping with goro::sleep_for /
  // sleep_until did not register it: main, waiting for the thread's send,
  // was declared deadlocked once the grace period (250 ms) passed.
  goro::chan<int> c(2);  // outlives run() (a deadlock leaves main parked); room for both sends
  std::thread a([c]() mutable {
    goro::sleep_for(1500ms);
    c.send(1);
  });
  std::thread b([c]() mutable {
    goro::sleep_until(steady::now() + 1500ms);
    c.send(2);
  });
  int sum = 0;
  CHECK_NOTHROW(goro::run([&] { sum = *c.recv() + *c.recv(); }));
  CHECK(sum == 3);
  a.join();
  b.join();
}

TEST_CASE("time: a timer on a P whose M went idle still fires", "[time]") {
  // Every P idle (main waits on a wait_group) while one goroutine sleeps:
  // some idle M must wake for its timer.
  for (unsigned procs : {1u, 2u, 4u}) {
    goro::runtime rt{goro::options{procs}};
    rt.run([] {
      warm_up_ms(16);
      goro::wait_group wg;
      wg.add(1);
      auto t0 = steady::now();
      steady::duration slept{};
      goro::go([&] {
        goro::sleep_for(30ms);
        slept = steady::now() - t0;
        wg.done();
      });
      wg.wait();
      CHECK(slept >= 30ms);
      CHECK(slept < 30ms + late_bound);
    });
  }
}

TEST_CASE("time: a long-running goroutine does not hold up another P's sleeper", "[time]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    std::atomic<bool> stop{false};
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {  // keeps one P busy without scheduling
      while (!stop.load(std::memory_order_relaxed)) {
      }
      wg.done();
    });
    auto t0 = steady::now();
    goro::sleep_for(20ms);  // main's timer is on main's P
    auto dt = steady::now() - t0;
    stop.store(true);
    wg.wait();
    CHECK(dt >= 20ms);
    CHECK(dt < 20ms + late_bound);
  });
}

TEST_CASE("time: sleepers wake on time while outside threads keep waking idle Ms", "[time]") {
  // Spawns from a plain thread take idle Ms off the idle list, the one
  // sleeping until the next timer included when it is the only one.
  std::atomic<bool> stop{false};
  std::atomic<int> ran{0};  // before rt: late goroutines may run in rt's destructor
  goro::runtime rt{goro::options{2}};
  std::thread feeder([&] {
    while (!stop.load()) {
      rt.go([&] { ran.fetch_add(1); });
      std::this_thread::sleep_for(1ms);
    }
  });
  rt.run([] {
    for (int i = 0; i < 5; ++i) {
      auto t0 = steady::now();
      goro::sleep_for(20ms);
      auto dt = steady::now() - t0;
      CHECK(dt >= 20ms);
      CHECK(dt < 20ms + late_bound);
    }
  });
  stop.store(true);
  feeder.join();
  CHECK(ran.load() > 0);
}

TEST_CASE("time: an idle runtime waiting for a timer uses almost no CPU", "[time]") {
  goro::runtime rt{goro::options{4}};
  rt.run([] {
    warm_up_ms(32);
    goro::sleep_for(20ms);  // let spinning Ms settle
    std::int64_t c0 = process_cpu_ns();
    auto t0 = steady::now();
    goro::sleep_for(200ms);
    auto wall = steady::now() - t0;
    std::int64_t cpu = process_cpu_ns() - c0;
    INFO("CPU " << cpu / 1000 << " us over a 200 ms sleep");
    CHECK(wall >= 200ms);
    // Busy polling would cost ~200 ms or more; a few wake-ups cost microseconds.
    CHECK(cpu < goro_test::scale(20, 100) * 1'000'000);
  });
}

TEST_CASE("time: shutdown waits for sleeping goroutines", "[time]") {
  std::atomic<int> woke{0};
  {
    goro::runtime rt{goro::options{.maxprocs = 2, .on_main_return = goro::main_return::wait}};
    rt.run([&] {
      for (int i = 0; i < 10; ++i)
        goro::go([&, i] {
          goro::sleep_for(std::chrono::milliseconds(20 + 5 * i));
          woke.fetch_add(1);
        });
    });
    // run() returned with ten goroutines asleep: not "blocked forever".
  }
  CHECK(woke.load() == 10);
}

TEST_CASE("time: sleepers mixed with busy goroutines on every P", "[time]") {
  const int n = goro_test::scale(2000, 100);
  goro::runtime rt{goro::options{4}};
  rt.run([&] {
    std::atomic<int> early{0};
    goro::wait_group wg;
    wg.add(2 * n);
    for (int i = 0; i < n; ++i) {
      goro::go([&, i] {
        for (int k = 0; k < 3; ++k) {
          auto d = std::chrono::microseconds(100 + (i * 37 + k * 101) % 2000);
          auto t0 = steady::now();
          goro::sleep_for(d);
          if (steady::now() - t0 < d) early.fetch_add(1);
        }
        wg.done();
      });
      goro::go([&] {
        for (int k = 0; k < 10; ++k) goro::yield();
        wg.done();
      });
    }
    wg.wait();
    CHECK(early.load() == 0);
  });
}

// ---- after / timer / ticker (channels) ----

TEST_CASE("time: after delivers the time once, not early", "[time][after]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto t0 = steady::now();
    auto c = goro::after(20ms);
    CHECK(c.capacity() == 1);
    auto v = c.recv();
    REQUIRE(v);
    CHECK(*v >= t0 + 20ms);
    CHECK(steady::now() - t0 >= 20ms);
    CHECK(steady::now() - t0 < 20ms + late_bound);
    CHECK_FALSE(c.try_recv());
    // Zero and negative durations fire at once.
    CHECK(goro::after(0ms).recv());
    CHECK(goro::after(-1s).recv());
  });
}

TEST_CASE("time: after from a plain thread", "[time][after]") {
  auto t0 = steady::now();
  auto c = goro::after(15ms);
  auto v = c.recv();  // the thread blocks on the channel
  REQUIRE(v);
  CHECK(*v >= t0 + 15ms);
  // And a goroutine receiving a plain thread's timer (outside the runtime:
  // deadlock detection cannot see it).
  goro::runtime rt{goro::options{.maxprocs = 2, .detect_deadlock = false}};
  auto c2 = goro::after(10ms);
  rt.run([&] { CHECK(c2.recv()); });
}

TEST_CASE("time: select with an after timeout", "[time][after]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> never;
    auto t0 = steady::now();
    bool timed_out = false;
    goro::select(goro::on_recv(never, [](std::optional<int>) {}),
                 goro::on_recv(goro::after(15ms), [&](std::optional<steady::time_point>) { timed_out = true; }));
    CHECK(timed_out);
    CHECK(steady::now() - t0 >= 15ms);
  });
}

TEST_CASE("time: timer stop before it fires returns true and nothing is delivered", "[time][timer]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::timer t(30ms);
    CHECK(t.stop());
    CHECK_FALSE(t.stop());  // already stopped
    goro::sleep_for(60ms);
    CHECK_FALSE(t.c().try_recv());
  });
}

TEST_CASE("time: timer stop after it fired returns false", "[time][timer]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto t0 = steady::now();
    goro::timer t(10ms);
    auto v = t.c().recv();
    REQUIRE(v);
    CHECK(*v >= t0 + 10ms);
    CHECK_FALSE(t.stop());
    // Fired but not received yet: stop is still false, the value waits.
    goro::timer u(1ms);
    goro::sleep_for(20ms);
    CHECK_FALSE(u.stop());
    CHECK(u.c().try_recv());
  });
}

TEST_CASE("time: timer reset re-arms it", "[time][timer]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::timer t(1h);
    auto t0 = steady::now();
    CHECK(t.reset(20ms));  // was pending
    auto v = t.c().recv();
    REQUIRE(v);
    CHECK(*v >= t0 + 20ms);
    CHECK(*v < t0 + 20ms + late_bound);
    CHECK_FALSE(t.reset(10ms));  // had fired
    CHECK(t.c().recv());
    // A reset to later moves the deadline: the old one does not fire.
    goro::timer u(10ms);
    auto t1 = steady::now();
    CHECK(u.reset(50ms));
    auto w = u.c().recv();
    REQUIRE(w);
    CHECK(*w >= t1 + 50ms);
    // Stopped timers can be reset.
    goro::timer s(10ms);
    CHECK(s.stop());
    CHECK_FALSE(s.reset(5ms));
    CHECK(s.c().recv());
  });
}

TEST_CASE("time: timer from a plain thread", "[time][timer]") {
  auto t0 = steady::now();
  goro::timer t(10ms);
  auto v = t.c().recv();
  REQUIRE(v);
  CHECK(*v >= t0 + 10ms);
  goro::timer u(20ms);
  CHECK(u.stop());
  goro::sleep_for(30ms);
  CHECK_FALSE(u.c().try_recv());
}

TEST_CASE("time: ticker delivers repeatedly", "[time][ticker]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto t0 = steady::now();
    goro::ticker tk(10ms);
    steady::time_point last = t0;
    for (int i = 1; i <= 5; ++i) {
      auto v = tk.c().recv();
      REQUIRE(v);
      CHECK(*v > last);
      last = *v;
    }
    CHECK(last >= t0 + 50ms);
    tk.stop();
  });
}

TEST_CASE("time: ticker drops ticks for a slow reader", "[time][ticker]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    // A 50 ms period: the two try_recvs below must not straddle a new tick
    // even under qemu on a loaded machine (5 ms did).
    goro::ticker tk(50ms);
    goro::sleep_for(600ms);  // ~12 ticks due; the channel holds one
    CHECK(tk.c().size() == 1);
    CHECK(tk.c().try_recv());
    CHECK_FALSE(tk.c().try_recv());
    auto t0 = steady::now();
    CHECK(tk.c().recv());  // the next tick comes within a period (not a burst of old ones)
    CHECK(steady::now() - t0 < 50ms + late_bound);
  });
}

TEST_CASE("time: ticker stop and reset", "[time][ticker]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::ticker tk(5ms);
    CHECK(tk.c().recv());
    tk.stop();
    tk.c().try_recv();  // one may have been sent before stop
    goro::sleep_for(30ms);
    CHECK_FALSE(tk.c().try_recv());
    auto t0 = steady::now();
    tk.reset(20ms);
    auto v = tk.c().recv();
    REQUIRE(v);
    CHECK(*v >= t0 + 20ms);
    auto w = tk.c().recv();
    REQUIRE(w);
    CHECK(*w >= t0 + 40ms);  // the second tick of the new period
  });
}

#if GORO_EXCEPTIONS
TEST_CASE("time: ticker with a non-positive interval is a usage error", "[time][ticker][errors]") {
  CHECK_THROWS_AS(goro::ticker(0ms), goro::usage_error);
  CHECK_THROWS_WITH(goro::ticker(-1s), "goro: non-positive interval for ticker");
  goro::ticker tk(1h);
  CHECK_THROWS_WITH(tk.reset(0ms), "goro: non-positive interval for ticker::reset");
}
#endif

TEST_CASE("time: timer fairness (an after fires while a channel is always ready)", "[time][after]") {
  // Go's TestTimerFairness: two goroutines keep c always ready; the select
  // must still see the timer's channel become ready.
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<bool> done, c;
    goro::wait_group wg;
    wg.add(2);
    for (int i = 0; i < 2; ++i)
      goro::go([&] {
        for (bool stop = false; !stop;)
          goro::select(goro::on_send(c, true, [] {}), goro::on_recv(done, [&](std::optional<bool>) { stop = true; }));
        wg.done();
      });
    auto t0 = steady::now();
    auto timeout = goro::after(20ms);
    for (bool fired = false; !fired;)
      goro::select(goro::on_recv(c, [](std::optional<bool>) {}),
                   goro::on_recv(timeout, [&](std::optional<steady::time_point>) { fired = true; }));
    done.close();
    wg.wait();
    CHECK(steady::now() - t0 >= 20ms);
    CHECK(steady::now() - t0 < 20ms + late_bound);
  });
}

TEST_CASE("time: timers stopped and reset while they fire (stress)", "[time][timer]") {
  const int n = goro_test::scale(2000, 200);
  goro::runtime rt{goro::options{4}};
  rt.run([&] {
    goro::wait_group wg;
    wg.add(n);
    std::atomic<int> bad{0};
    for (int i = 0; i < n; ++i)
      goro::go([&, i] {
        goro::timer t(std::chrono::microseconds(i % 500));
        if (i % 3 == 0) goro::yield();
        bool stopped = t.stop();
        if (stopped && t.c().try_recv()) bad.fetch_add(1);  // stopped in time: nothing may come
        t.reset(std::chrono::microseconds(i % 200));
        if (!t.c().recv()) bad.fetch_add(1);
        goro::ticker tk(std::chrono::microseconds(50 + i % 100));
        tk.c().recv();
        tk.stop();
        wg.done();
      });
    wg.wait();
    CHECK(bad.load() == 0);
  });
}

TEST_CASE("time: timers left at shutdown are released", "[time][timer]") {
  goro::ticker* leaked = nullptr;
  {
    goro::runtime rt{goro::options{2}};
    rt.run([&] {
      (void)goro::after(1h);          // never fires: freed at shutdown
      leaked = new goro::ticker(1h);  // outlives the runtime
      goro::ticker fast(1ms);         // stopped by its destructor
      fast.c().recv();
    });
  }
  delete leaked;  // its runtime is gone: stopping it finds it on no heap
}

TEST_CASE("time: the timer's send survives a channel closed behind its back", "[time][after]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    // after(): receive-only, but impl() reaches the channel. Its one-shot
    // timer must neither throw on g0 (terminate) nor leak.
    // The timers fire after the close unless this goroutine was held up
    // for 20 ms in between (qemu, a loaded machine): then the value sent
    // before the close is still buffered, and is received first.
    auto a = goro::after(20ms);
    a.impl()->close();
    goro::timer t(20ms);
    t.c().impl()->close();
    goro::sleep_for(150ms);
    CHECK_FALSE(t.stop());  // it fired (into the closed channel, or just before the close)
    int buffered = 0;
    while (a.recv()) ++buffered;
    while (t.c().recv()) ++buffered;
    CHECK(buffered <= 2);
    CHECK_FALSE(a.recv());
    CHECK_FALSE(t.c().recv());
  });
  // From a plain thread (the process-wide timer thread sends).
  auto a = goro::after(20ms);
  a.impl()->close();
  std::this_thread::sleep_for(150ms);
  int buffered = 0;
  while (a.recv()) ++buffered;
  CHECK(buffered <= 1);
}

TEST_CASE("time: a moved-from timer or ticker is a usage error", "[time][errors]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    using Catch::Matchers::Contains;
    goro::timer t(1h);
    goro::timer t2 = std::move(t);
    CHECK_THROWS_WITH(t.stop(), Contains("goro: timer::stop on a moved-from timer"));
    CHECK_THROWS_WITH(t.reset(1ms), Contains("goro: timer::reset on a moved-from timer"));
    CHECK_THROWS_WITH(t.c(), Contains("goro: timer::c on a moved-from timer"));
    CHECK(t2.stop());
    goro::ticker k(1h);
    goro::ticker k2 = std::move(k);
    CHECK_THROWS_WITH(k.stop(), Contains("goro: ticker::stop on a moved-from ticker"));
    CHECK_THROWS_WITH(k.reset(1ms), Contains("goro: ticker::reset on a moved-from ticker"));
    CHECK_THROWS_WITH(k.c(), Contains("goro: ticker::c on a moved-from ticker"));
    k2.stop();
    t = std::move(t2);  // assigning a live one makes it usable again
    CHECK_FALSE(t.stop());
  });
}

TEST_CASE("time: a timer stopped on a plain thread does not hold off deadlock detection", "[time][timer][deadlock]") {
  // The process-wide timer thread counts as an external M (it may still
  // wake a goroutine) while it has timers pending. It slept until the
  // deleted timer's instant and only then saw its heap empty: a stopped
  // timer(1h) -- or a cancelled with_timeout context made on a plain
  // thread -- kept every runtime's deadlock detection off for the hour.
  constexpr auto pending_for = 20s;
  {
    goro::timer t(pending_for);  // this test's thread is a plain thread: the process-wide heap
    auto [ctx, cancel] = goro::with_timeout(goro::background(), pending_for);
    std::this_thread::sleep_for(100ms);  // the timer thread has seen them pending (and counts itself)
    CHECK(t.stop());
    cancel();
  }
  const auto t0 = steady::now();
  // The channel outlives run(): main stays parked for good after a
  // deadlock, so what is on its stack is never destroyed (LeakSanitizer).
  goro::chan<int> never;
  CHECK_THROWS_AS(goro::run([&never] { (void)never.recv(); }), goro::deadlock_error);
  // SPEC: confirmed between 100 ms and 1 s after the deadlock (slack for a loaded machine).
  CHECK(steady::now() - t0 < goro_test::scale(5, 10) * 1s);
}

TEST_CASE("time: a timer whose runtime ended unfired never fires; reset from a plain thread re-arms it",
          "[time][timer]") {
  // docs/time.md: it stays on its runtime, so stop() says false and c()
  // gets nothing (the `if (!t.stop()) t.c().recv()` idiom would wait
  // forever); reset re-arms it on the process-wide timer thread.
  std::optional<goro::timer> t;
  {
    goro::runtime rt{goro::options{2}};
    rt.run([&] { t.emplace(std::chrono::hours(1)); });
  }
  CHECK(!t->stop());
  CHECK(!t->c().try_recv());
  CHECK(!t->reset(std::chrono::milliseconds(1)));  // it was not pending
  CHECK(t->c().recv().has_value());                // the plain thread waits for the send
  CHECK(!t->stop());                               // fired
}
