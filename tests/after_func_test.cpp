// after_func: Go's time.AfterFunc -- f in its own goroutine, stop cancels,
// dropping the timer does not, reset re-arms, c() is never sent to.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>

using namespace std::chrono_literals;

TEST_CASE("after_func: runs f in its own goroutine after d", "[after_func]") {
  goro::run([] {
    goro::chan<std::uint64_t> ran(1);
    auto start = std::chrono::steady_clock::now();
    goro::timer t = goro::after_func(20ms, [ran]() mutable { ran.send(goro::this_goroutine::id()); });
    std::uint64_t id = *ran.recv();
    CHECK(std::chrono::steady_clock::now() - start >= 20ms);
    CHECK(id != goro::this_goroutine::id());  // its own goroutine
    CHECK(!t.stop());                         // already fired
    CHECK(!t.c().try_recv());                 // c() is never sent to
  });
}

TEST_CASE("after_func: stop cancels; dropping the timer does not; reset re-arms", "[after_func]") {
  goro::run([] {
    std::atomic<int> stopped_ran{0};
    goro::timer s = goro::after_func(20ms, [&] { stopped_ran.fetch_add(1); });
    CHECK(s.stop());

    goro::chan<int> dropped_ran(1);
    {
      (void)goro::after_func(10ms, [dropped_ran]() mutable { dropped_ran.send(1); });
    }  // dropped at once
    CHECK(*dropped_ran.recv() == 1);

    goro::chan<int> again(2);
    goro::timer r = goro::after_func(1h, [again]() mutable { again.send(7); });
    CHECK(r.reset(5ms));  // was pending
    CHECK(*again.recv() == 7);
    CHECK(!r.reset(5ms));  // had fired: f runs again
    CHECK(*again.recv() == 7);

    goro::sleep_for(40ms);
    CHECK(stopped_ran.load() == 0);
  });
  // Outside a goroutine: usage_error.
  CHECK_THROWS_AS(goro::after_func(1ms, [] {}), goro::usage_error);
}

TEST_CASE("after_func: a dropped pending one is freed when the runtime ends", "[after_func]") {
  // Under ASan this checks the self-owned timer is freed (by the heap's drop).
  goro::run([] { (void)goro::after_func(1h, [] {}); });
}

TEST_CASE("after_func: re-armed or dropped from a plain thread, it stays on its runtime", "[after_func]") {
  // A stop / reset / drop re-queued the timer where the caller was: from a
  // plain thread, on the process-wide timer thread, which outlives the
  // runtime -- firing there, it spawned f on a destroyed runtime (ASan:
  // heap-use-after-free in spawn). It stays on its runtime's heaps now, and
  // goes when that runtime ends.
  auto token = std::make_shared<int>(0);
  std::optional<goro::timer> dropped, rearmed;
  {
    goro::runtime rt{goro::options{2}};
    rt.run([&] {
      dropped.emplace(goro::after_func(1h, [token] {}));
      rearmed.emplace(goro::after_func(1h, [] {}));
    });
    // From this plain thread, while the runtime lives:
    CHECK(rearmed->reset(1h));  // was pending
    dropped.reset();            // pending: left to fire, it owns itself
    CHECK(token.use_count() == 2);
  }                               // the runtime ends with both pending
  CHECK(token.use_count() == 1);  // the dropped one was freed with it
  CHECK(!rearmed->stop());        // the other went with it: it can never fire
}
