// gomaxprocs(n): resizing the number of Ps at run time (Go's GOMAXPROCS).
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <goro/goro.hpp>
#include <thread>
#include <vector>

#include "test_util.hpp"

using namespace std::chrono_literals;

namespace {

using steady = std::chrono::steady_clock;

// A stretch of computation with no runtime call in it (so no safe point):
// while it runs, its goroutine holds its P.
void spin_for(std::chrono::microseconds d) {
  auto end = steady::now() + d;
  while (steady::now() < end) {
  }
}

// Raises `max` to `v` if it is larger.
void raise_max(std::atomic<int>& max, int v) {
  int m = max.load(std::memory_order_relaxed);
  while (v > m && !max.compare_exchange_weak(m, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

TEST_CASE("gomaxprocs: resize 2 -> 4 -> 1 -> 2 under load loses nothing and bounds parallelism", "[gomaxprocs]") {
  const int workers = 8;
  const int messages = goro_test::scale(20000, 2000);
  goro::runtime rt{goro::options{2}};
  std::atomic<bool> stop{false};
  std::atomic<int> inside{0}, max_inside{0};
  std::atomic<bool> measuring{false};
  std::atomic<std::int64_t> received_sum{0};
  std::atomic<int> spawned_ran{0}, sleeps_done{0}, blocking_done{0};
  int spawned = 0;

  rt.run([&] {
    goro::chan<int> ch(16);
    goro::wait_group producers, consumers, others;
    // Channel traffic: every message must arrive exactly once.
    for (int w = 0; w < workers / 2; ++w) {
      producers.add(1);
      goro::go([&, w] {
        for (int i = w; i < messages; i += workers / 2) ch.send(i);
        producers.done();
      });
      consumers.add(1);
      goro::go([&] {
        while (auto v = ch.recv()) received_sum.fetch_add(*v, std::memory_order_relaxed);
        consumers.done();
      });
    }
    // CPU work without safe points, counted while it runs.
    for (int w = 0; w < workers; ++w) {
      others.add(1);
      goro::go([&] {
        while (!stop.load(std::memory_order_relaxed)) {
          int now = inside.fetch_add(1, std::memory_order_relaxed) + 1;
          if (measuring.load(std::memory_order_relaxed)) raise_max(max_inside, now);
          spin_for(200us);
          inside.fetch_sub(1, std::memory_order_relaxed);
          goro::yield();
        }
        others.done();
      });
    }
    // Sleepers (timers on every P) and blocking calls (Ps in syscalls).
    for (int w = 0; w < 4; ++w) {
      others.add(2);
      goro::go([&] {
        while (!stop.load(std::memory_order_relaxed)) {
          goro::sleep_for(1ms);
          sleeps_done.fetch_add(1, std::memory_order_relaxed);
        }
        others.done();
      });
      goro::go([&] {
        while (!stop.load(std::memory_order_relaxed)) {
          goro::blocking([] { usleep(500); });
          blocking_done.fetch_add(1, std::memory_order_relaxed);
        }
        others.done();
      });
    }

    for (unsigned n : {4u, 1u, 2u, 4u, 1u, 3u, 2u}) {
      unsigned before = goro::gomaxprocs();
      CHECK(goro::gomaxprocs(n) == before);
      CHECK(goro::gomaxprocs() == n);
      // Once gomaxprocs(n) returned, at most n goroutines run at a time.
      max_inside.store(0);
      measuring.store(true);
      for (int i = 0; i < 20; ++i) {  // spawning goes on meanwhile
        ++spawned;
        others.add(1);
        goro::go([&] {
          spawned_ran.fetch_add(1, std::memory_order_relaxed);
          others.done();
        });
        goro::sleep_for(1ms);
      }
      measuring.store(false);
      CHECK(max_inside.load() <= static_cast<int>(n));
    }
    producers.wait();
    ch.close();
    consumers.wait();
    stop.store(true);
    others.wait();
  });
  const std::int64_t expected = std::int64_t{messages} * (messages - 1) / 2;
  CHECK(received_sum.load() == expected);
  CHECK(spawned_ran.load() == spawned);
  CHECK(sleeps_done.load() > 0);
  CHECK(blocking_done.load() > 0);
  // run() returns when main does; the last goroutines may still be
  // finishing on other Ms (their exits counted an instant later).
  CHECK(goro_test::eventually([&] {
    auto s = rt.stats();
    return s.spawns == s.exits && rt.num_goroutine() == 0;
  }));
  CHECK(rt.gomaxprocs() == 2);
}

TEST_CASE("gomaxprocs: growing gives that many goroutines running at once (GoroutineParallelism)", "[gomaxprocs]") {
  goro::runtime rt{goro::options{1}};
  rt.run([&] {
    CHECK(goro::gomaxprocs(4) == 1);
    // Each goroutine waits, without yielding, until all 4 are running: that
    // can only happen on 4 Ps at once (at 1 P the first one would spin to
    // the deadline).
    std::atomic<int> arrived{0};
    std::atomic<int> saw_all{0};
    goro::wait_group wg;
    for (int i = 0; i < 4; ++i) {
      wg.add(1);
      goro::go([&] {
        arrived.fetch_add(1);
        auto deadline = steady::now() + 20s;
        while (arrived.load() < 4 && steady::now() < deadline) {
        }
        if (arrived.load() == 4) saw_all.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
    CHECK(saw_all.load() == 4);
  });
}

TEST_CASE("gomaxprocs: timers left on retired Ps still fire while the remaining P is busy", "[gomaxprocs]") {
  goro::runtime rt{goro::options{4}};
  rt.run([&] {
    const int sleepers = 4;
    std::atomic<int> arrived{0}, woke{0};
    std::atomic<bool> hogs_stop{false};
    goro::wait_group wg;
    // Four goroutines that are all running at once, so one on each P; each
    // then sleeps, which puts its timer on its own P's heap.
    for (int i = 0; i < sleepers; ++i) {
      wg.add(1);
      goro::go([&] {
        arrived.fetch_add(1);
        auto deadline = steady::now() + 20s;
        while (arrived.load() < sleepers && steady::now() < deadline) {
        }
        goro::sleep_for(100ms);
        woke.fetch_add(1);
        wg.done();
      });
    }
    while (arrived.load() < sleepers) goro::sleep_for(1ms);
    // Keep the one remaining P busy all the time: its M never goes idle, so
    // only the scheduling loop's timer checks can run the retired Ps' timers.
    for (int i = 0; i < 2; ++i) {
      wg.add(1);
      goro::go([&] {
        while (!hogs_stop.load(std::memory_order_relaxed)) goro::yield();
        wg.done();
      });
    }
    CHECK(goro::gomaxprocs(1) == 4);
    auto deadline = steady::now() + 10s;
    while (woke.load() < sleepers && steady::now() < deadline) goro::yield();
    CHECK(woke.load() == sleepers);
    hogs_stop.store(true);
    wg.wait();
  });
}

TEST_CASE("gomaxprocs: a shrink takes a retired P from a goroutine in a long blocking call", "[gomaxprocs]") {
  goro::runtime rt{goro::options{2}};
  rt.run([&] {
    std::atomic<bool> in_call{false}, release{false};
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      goro::blocking([&] {
        in_call.store(true);
        while (!release.load()) usleep(1000);
      });
      wg.done();
    });
    while (!in_call.load()) goro::sleep_for(1ms);
    // Whichever P the caller left in its call, gomaxprocs(1) returns while
    // the call goes on (it does not wait for the call to end).
    CHECK(goro::gomaxprocs(1) == 2);
    CHECK(goro::gomaxprocs() == 1);
    CHECK_FALSE(release.load());
    release.store(true);
    wg.wait();
  });
}

TEST_CASE("gomaxprocs: from outside the runtime, before and during run()", "[gomaxprocs]") {
  goro::runtime rt{goro::options{3}};
  CHECK(rt.gomaxprocs(1) == 3);
  CHECK(rt.gomaxprocs(1) == 1);  // no change
  std::atomic<bool> grown{false};
  rt.run([&] {
    CHECK(goro::gomaxprocs() == 1);
    unsigned previous = 0;  // checked here: Catch2 assertions are not thread-safe
    std::thread t([&] {
      previous = rt.gomaxprocs(2);
      grown.store(true);
    });
    while (!grown.load()) goro::sleep_for(1ms);
    t.join();
    CHECK(previous == 1);
    CHECK(goro::gomaxprocs() == 2);
  });
  CHECK(rt.gomaxprocs() == 2);
  auto s = rt.stats();
  CHECK(s.spawns == s.exits);
}

TEST_CASE("gomaxprocs: bad counts are usage errors", "[gomaxprocs][errors]") {
  goro::runtime rt{goro::options{2}};
  CHECK_THROWS_AS(rt.gomaxprocs(4097), goro::usage_error);
  rt.run([] {
    CHECK_THROWS_WITH(goro::gomaxprocs(100000), "goro: gomaxprocs(n): n must be at most 4096");
    CHECK(goro::gomaxprocs() == 2);
  });
}
