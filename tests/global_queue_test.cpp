// Tests for goro/detail/global_queue.hpp, the global run queue: a ring of
// G pointers under its own spinlock, sized by reserve() (the scheduler
// reserves room for every G record, so a push never allocates).
#include <catch2/catch.hpp>

#include <goro/detail/global_queue.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

using goro::detail::g;
using goro::detail::global_run_queue;

namespace {

struct records {
  explicit records(std::size_t n) : v(new g[n]), n(n) {}
  g* operator[](std::size_t i) const { return &v[i]; }
  std::size_t index(const g* gp) const { return static_cast<std::size_t>(gp - v.get()); }
  std::unique_ptr<g[]> v;
  std::size_t n;
};

}  // namespace

TEST_CASE("global queue: FIFO across wrap-around and growth", "[globq]") {
  records gs(1000);
  global_run_queue q;
  q.reserve(64);
  std::size_t pushed = 0, popped = 0;
  std::size_t reserved = 64;
  // Interleave pushes and batch gets so head wraps, and grow while items
  // sit wrapped around the end of the ring.
  for (int round = 0; round < 200; ++round) {
    const std::size_t want = (round * 7) % 50 + 1;
    for (std::size_t k = 0; k < want && pushed < gs.n; ++k) {
      if (pushed - popped + 1 > reserved) {
        reserved *= 2;
        q.reserve(reserved);
      }
      q.push_back(gs[pushed++]);
    }
    REQUIRE(q.size() == pushed - popped);
    g* out[32];
    const std::uint32_t take = static_cast<std::uint32_t>(round % 32 + 1);
    std::uint32_t n = q.pop_batch(out, [&](std::uint32_t size) {
      CHECK(size == pushed - popped);
      return std::min(size, take);
    });
    for (std::uint32_t i = 0; i < n; ++i) REQUIRE(gs.index(out[i]) == popped++);
  }
  while (g* gp = q.pop_front()) REQUIRE(gs.index(gp) == popped++);
  CHECK(popped == pushed);
  CHECK(q.empty());
  CHECK(q.empty_synced());
  g* none = nullptr;
  CHECK(q.pop_batch(&none, [](std::uint32_t) { return 1u; }) == 0);
}

TEST_CASE("global queue: push_back_batch keeps order", "[globq]") {
  records gs(300);
  global_run_queue q;
  q.reserve(300);
  std::vector<g*> batch;
  for (std::size_t i = 0; i < 300; ++i) batch.push_back(gs[i]);
  q.push_back_batch(batch.data(), 129);
  q.push_back_batch(batch.data() + 129, 171);
  CHECK(q.size() == 300);
  for (std::size_t i = 0; i < 300; ++i) REQUIRE(q.pop_front() == gs[i]);
}

// Producers push distinct Gs, consumers take batches, while the ring grows
// under them (as the scheduler's reserve does when it allocates G records):
// nothing lost or duplicated, and each producer's Gs come out in order.
TEST_CASE("global queue: concurrent pushes, batch gets and growth lose nothing", "[globq][stress]") {
  constexpr std::size_t producers = 3, consumers = 2;
  constexpr std::size_t per_producer = 20'000;
  constexpr std::size_t total = producers * per_producer;
  records gs(total);
  global_run_queue q;
  // Gs may be pushed only once room for them has been reserved (the
  // scheduler's invariant: reserve covers every G record in existence).
  std::atomic<std::size_t> reserved{0};
  std::atomic<bool> stop{false};
  q.reserve(64);
  reserved.store(64);
  std::thread grower([&] {
    std::size_t r = 64;
    while (r < total) {
      r += 1000;
      q.reserve(r);
      reserved.store(r, std::memory_order_release);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> ts;
  for (std::size_t p = 0; p < producers; ++p) {
    ts.emplace_back([&, p] {
      for (std::size_t i = 0; i < per_producer; ++i) {
        // G number p + producers * i: distinct, increasing per producer.
        std::size_t id = p + producers * i;
        while (id >= reserved.load(std::memory_order_acquire)) std::this_thread::yield();
        if (i % 5 == 4) {
          g* two[2] = {gs[id], nullptr};
          q.push_back_batch(two, 1);
        } else {
          q.push_back(gs[id]);
        }
      }
    });
  }
  std::vector<std::vector<std::size_t>> got(consumers);
  std::vector<std::thread> cs;
  for (std::size_t c = 0; c < consumers; ++c) {
    cs.emplace_back([&, c] {
      g* out[64];
      std::uint32_t k = 1;
      for (;;) {
        const bool done = stop.load(std::memory_order_acquire);
        std::uint32_t n = q.pop_batch(out, [&](std::uint32_t size) { return std::min(size, k); });
        k = k % 64 + 1;
        for (std::uint32_t i = 0; i < n; ++i) got[c].push_back(gs.index(out[i]));
        if (n == 0 && done) return;
      }
    });
  }
  for (auto& t : ts) t.join();
  grower.join();
  stop.store(true, std::memory_order_release);
  for (auto& t : cs) t.join();
  std::vector<int> seen(total, 0);
  for (std::size_t c = 0; c < consumers; ++c) {
    std::vector<std::size_t> last(producers, SIZE_MAX);
    for (std::size_t id : got[c]) {
      ++seen[id];
      std::size_t p = id % producers;
      if (last[p] != SIZE_MAX) REQUIRE(id > last[p]);
      last[p] = id;
    }
  }
  for (std::size_t i = 0; i < total; ++i) REQUIRE(seen[i] == 1);
  CHECK(q.empty());
}
