// detail::timer_heap: a failed allocation while adding a timer leaves the
// heap unlocked and unchanged (it runs under a spinlock: without RAII a
// bad_alloc left the P's timer lock held, and the next timer operation on
// that P spun forever).
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <new>
#include <thread>

#include "test_util.hpp"

// The sanitizers' runtimes define the global operator new themselves: the
// replacement below would not link there.
#if !GORO_TEST_SANITIZED
namespace {
std::atomic<bool> fail_allocations{false};
}  // namespace

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // malloc-backed replacements, paired below
#endif
// Every allocation of this test program fails while fail_allocations is set.
void* operator new(std::size_t n) {
  if (fail_allocations.load(std::memory_order_relaxed)) throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

TEST_CASE("timer heap: bad_alloc while adding leaves the heap usable", "[time][alloc]") {
  goro::detail::timer_heap h;
  goro::detail::timer a, b;
  a.when = 10;
  b.when = 5;
  fail_allocations = true;
  bool threw = false;
  try {
    h.add(&a);  // the heap's array must grow: its allocation fails
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  fail_allocations = false;
  REQUIRE(threw);
  CHECK(h.size() == 0);
  CHECK(h.earliest() == 0);
  CHECK(a.where.load() == nullptr);

  // The next add must not spin on a lock left held: bounded by a thread.
  // (Detached: if it spins forever, the test fails and the process exits.)
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> added = done->get_future();
  std::thread([&h, &a, &b, done] {
    h.add(&a);
    h.add(&b);
    done->set_value();
  }).detach();
  REQUIRE(added.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(h.size() == 2);
  CHECK(h.earliest() == 5);
  CHECK(goro::detail::timer_heap::del(&a));
  CHECK(goro::detail::timer_heap::del(&b));
}
#else
TEST_CASE("timer heap: bad_alloc while adding leaves the heap usable", "[time][alloc]") {
  WARN("skipped under a sanitizer (it replaces the global operator new)");
}
#endif
