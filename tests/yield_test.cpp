// goro::yield (Go's Gosched) and its direct switch (scheduler::gosched):
// the yielding goroutine switches straight to the next one, which queues
// the yielder once it is off its stack. These tests check the order the
// slow path gives, exact counts, and that no goroutine ever runs on two
// Ms at once (its stack would be clobbered), mixed with parks, timers,
// spawns, lockosthread, preemption and gomaxprocs changes.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "test_util.hpp"

using namespace std::chrono_literals;

TEST_CASE("yield: yielding goroutines take turns (1 proc)", "[yield]") {
  // One P: the yielder goes to the global queue's tail and the next G
  // comes from the local queue (or the global one every 61 ticks), so
  // between two turns of a goroutine every other one runs about once.
  static constexpr int n = 10, k = 300;
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    std::vector<int> order;
    order.reserve(n * k);
    goro::wait_group wg;
    wg.add(n);
    for (int id = 0; id < n; ++id)
      goro::go([&, id] {
        for (int i = 0; i < k; ++i) {
          order.push_back(id);
          goro::yield();
        }
        wg.done();
      });
    wg.wait();
    REQUIRE(order.size() == std::size_t{n * k});
    std::vector<int> count(n, 0);
    std::vector<long> last(n, -1);
    long gap = 0;  // the most turns between two turns of one goroutine
    for (std::size_t i = 0; i < order.size(); ++i) {
      const int id = order[i];
      ++count[id];
      if (last[id] >= 0) gap = std::max(gap, static_cast<long>(i) - last[id]);
      last[id] = static_cast<long>(i);
    }
    for (int c : count) CHECK(c == k);
    CHECK(gap <= 2 * n);
  });
}

TEST_CASE("yield: a yield right after a spawn runs the new goroutine (lazy stack)", "[yield]") {
  // The spawned G sits in runnext without a stack: gosched cannot switch
  // to it directly and hands it to g0, which must run it next (or, at a
  // global-queue tick, after the global queue's first G: the yielder).
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    for (int round = 0; round < 200; ++round) {
      bool ran = false;
      goro::wait_group wg;
      wg.add(1);
      goro::go([&] {
        ran = true;
        wg.done();
      });
      for (int y = 0; y < 2 && !ran; ++y) goro::yield();
      CHECK(ran);
      wg.wait();
    }
  });
}

namespace {

// Fills a stack array with a pattern that identifies the goroutine and the
// round, and checks it after each yield: a goroutine resumed twice at once
// (published before it was off its stack) or resumed on a stale stack
// pointer would clobber it.
struct stack_probe {
  std::uint64_t v[24];
  void fill(std::uint64_t seed) {
    for (std::size_t i = 0; i < std::size(v); ++i) v[i] = seed * 0x9e3779b97f4a7c15ull + i;
  }
  bool intact(std::uint64_t seed) const {
    for (std::size_t i = 0; i < std::size(v); ++i)
      if (v[i] != seed * 0x9e3779b97f4a7c15ull + i) return false;
    return true;
  }
};

}  // namespace

TEST_CASE("yield: exact counts with parks, timers, spawns, lockosthread and gomaxprocs changes", "[yield]") {
  static constexpr int pairs = 8, rounds = goro_test::scale(3000, 600);
  goro::runtime rt{goro::options{4}};
  rt.run([] {
    std::atomic<long> yields{0}, children{0}, bad{0}, echoes{0};
    std::atomic<bool> workers_done{false};
    goro::wait_group wg;
    // Pairs of yielders that also ping-pong over a channel now and then
    // (parks and ready() into runnext between direct switches).
    for (int p = 0; p < pairs; ++p) {
      auto ch = std::make_shared<goro::chan<int>>(0);
      wg.add(2);
      for (int side = 0; side < 2; ++side)
        goro::go([&, ch, side, id = p * 2 + side] {
          stack_probe probe;
          for (int i = 0; i < rounds; ++i) {
            const std::uint64_t seed = (std::uint64_t(id) << 32) | std::uint64_t(i);
            probe.fill(seed);
            goro::yield();
            yields.fetch_add(1, std::memory_order_relaxed);
            if (!probe.intact(seed)) bad.fetch_add(1);
            if (i % 64 == 0) {  // park / ready
              if (side == 0) {
                ch->send(i);
              } else if (auto v = ch->recv(); v && *v == i) {
                echoes.fetch_add(1, std::memory_order_relaxed);
              }
            }
            if (i % 256 == 128) goro::sleep_for(side ? 0us : 20us);  // timers
            // A fresh goroutine (no stack yet) to switch to.
            if (i % 500 == 7) {
              wg.add(1);
              goro::go([&] {
                for (int j = 0; j < 3; ++j) goro::yield();
                children.fetch_add(1);
                wg.done();
              });
            }
          }
          wg.done();
        });
    }
    // A goroutine wired to its thread yields among them: it must stay on
    // that thread, and its M runs nothing else.
    std::atomic<long> locked_moves{0};
    wg.add(1);
    goro::go([&] {
      goro::lock_os_thread();
      const auto tid = std::this_thread::get_id();
      for (int i = 0; i < rounds / 4; ++i) {
        goro::yield();
        if (std::this_thread::get_id() != tid) locked_moves.fetch_add(1);
      }
      goro::unlock_os_thread();
      wg.done();
    });
    // A goroutine that never yields by itself: sysmon preempts it at
    // preempt_point() (a request arrives while others switch directly).
    goro::wait_group hog;
    hog.add(1);
    goro::go([&] {
      while (!workers_done.load(std::memory_order_relaxed)) goro::preempt_point();
      hog.done();
    });
    // gomaxprocs changes while everyone yields (retired Ps).
    goro::gomaxprocs(2);
    goro::sleep_for(1ms);
    goro::gomaxprocs(3);
    wg.wait();
    workers_done.store(true);
    hog.wait();
    CHECK(bad.load() == 0);
    CHECK(yields.load() == long{pairs} * 2 * rounds);
    CHECK(echoes.load() == long{pairs} * ((rounds + 63) / 64));
    CHECK(children.load() == long{pairs} * 2 * ((rounds - 7 + 499) / 500));
    CHECK(locked_moves.load() == 0);
  });
}

TEST_CASE("yield: a yielder is not run elsewhere before it is off its stack", "[yield]") {
  // Few goroutines on more Ps: idle Ps' Ms spin on the global queue and
  // take a yielder the moment it is queued. gosched queues it only from
  // the goroutine it switched to; queued any earlier, it would run on two
  // Ms at once and clobber its own stack.
  static constexpr int n = 6, rounds = goro_test::scale(200000, 3000);
  goro::runtime rt{goro::options{4}};
  rt.run([] {
    std::atomic<long> yields{0}, bad{0};
    goro::wait_group wg;
    wg.add(n);
    for (int id = 0; id < n; ++id)
      goro::go([&, id] {
        stack_probe probe;
        for (int i = 0; i < rounds; ++i) {
          const std::uint64_t seed = (std::uint64_t(id) << 32) | std::uint64_t(i);
          probe.fill(seed);
          goro::yield();
          if (!probe.intact(seed)) bad.fetch_add(1);
          yields.fetch_add(1, std::memory_order_relaxed);
        }
        wg.done();
      });
    wg.wait();
    CHECK(bad.load() == 0);
    CHECK(yields.load() == long{n} * rounds);
  });
}
