// Tests for goro/detail/run_queue.hpp, the per-P local run queue (Go's
// runqput / runqputslow / runqget / runqgrab / runqsteal / runqempty in
// src/runtime/proc.go; Go tests them with RunGetQueue / RunStealQueue in
// proc_test.go, which this file extends).
//
// How the header is compiled here
// -------------------------------
// local_run_queue hard-codes std::atomic. To explore interleavings of the
// header's *own* code (a re-implementation written for the test could drift
// from it), this file includes run_queue.hpp inside namespace `rqi`, which
// also holds a namespace `rqi::std` that re-exports ::std but declares its
// own class template `atomic`. Inside the header `std::` then names
// rqi::std, and `std::atomic` names rqi::std::atomic (a qualified lookup
// finds a namespace's own member before anything a using-directive brings
// in); `std::array`, `std::uint32_t`, `std::memory_order_*` are the real ones.
// rqi::std::atomic holds a ::std::atomic and forwards every operation with
// the same memory order, calling a hook first. The hook is a null check except
// inside the interleaving explorer below, so the ordinary and the
// multi-threaded tests run the header's code on real std::atomics (seen as
// such by TSan), and the explorer can preempt it at every atomic access.
//
// Consequences: every standard header that run_queue.hpp or config.hpp
// includes must already be included when the namespace is opened (their
// include guards then make the nested #includes no-ops), and no goro header
// that includes config.hpp may come before it. The class is
// rqi::goro::detail::local_run_queue, an entity distinct from
// ::goro::detail::local_run_queue.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <ucontext.h>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RQ_TEST_TSAN 1
#endif
#if __has_feature(address_sanitizer)
#define RQ_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(RQ_TEST_TSAN)
#define RQ_TEST_TSAN 1
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(RQ_TEST_ASAN)
#define RQ_TEST_ASAN 1
#endif
#ifndef RQ_TEST_TSAN
#define RQ_TEST_TSAN 0
#endif
#ifndef RQ_TEST_ASAN
#define RQ_TEST_ASAN 0
#endif
#if RQ_TEST_TSAN
#include <sanitizer/tsan_interface.h>
#endif
#if RQ_TEST_ASAN
#include <pthread.h>
#include <sanitizer/common_interface_defs.h>
#endif

// ---- the instrumented atomic ---------------------------------------------
namespace rq_hook {
// Installed only while the explorer runs, on one OS thread; read (as null)
// by every thread of the other tests, never written while they run.
enum class access { load, write, weak_cas };  // write: store, exchange, strong CAS, RMW
struct observer {
  // Returns true to make this weak compare-exchange fail spuriously.
  virtual bool on_access(const void* where, access kind) = 0;

 protected:
  ~observer() = default;
};
inline observer* active = nullptr;
inline bool before(const void* where, access kind) {
  observer* o = active;
  return o != nullptr && o->on_access(where, kind);
}
}  // namespace rq_hook

namespace rqi::std {
using namespace ::std;

template <class T>
class atomic {
  using mo = ::std::memory_order;
  static constexpr mo failure_order(mo o) noexcept {
    return o == ::std::memory_order_acq_rel   ? ::std::memory_order_acquire
           : o == ::std::memory_order_release ? ::std::memory_order_relaxed
                                              : o;
  }

 public:
  constexpr atomic() noexcept : a_(T{}) {}
  constexpr atomic(T v) noexcept : a_(v) {}
  atomic(const atomic&) = delete;
  atomic& operator=(const atomic&) = delete;

  T load(mo o = ::std::memory_order_seq_cst) const noexcept {
    rq_hook::before(this, rq_hook::access::load);
    return a_.load(o);
  }
  void store(T v, mo o = ::std::memory_order_seq_cst) noexcept {
    rq_hook::before(this, rq_hook::access::write);
    a_.store(v, o);
  }
  T exchange(T v, mo o = ::std::memory_order_seq_cst) noexcept {
    rq_hook::before(this, rq_hook::access::write);
    return a_.exchange(v, o);
  }
  bool compare_exchange_strong(T& expected, T desired, mo success, mo failure) noexcept {
    rq_hook::before(this, rq_hook::access::write);
    return a_.compare_exchange_strong(expected, desired, success, failure);
  }
  bool compare_exchange_strong(T& expected, T desired, mo o = ::std::memory_order_seq_cst) noexcept {
    return compare_exchange_strong(expected, desired, o, failure_order(o));
  }
  bool compare_exchange_weak(T& expected, T desired, mo success, mo failure) noexcept {
    if (rq_hook::before(this, rq_hook::access::weak_cas)) {  // the explorer chose a spurious failure
      expected = a_.load(failure);
      return false;
    }
    return a_.compare_exchange_weak(expected, desired, success, failure);
  }
  bool compare_exchange_weak(T& expected, T desired, mo o = ::std::memory_order_seq_cst) noexcept {
    return compare_exchange_weak(expected, desired, o, failure_order(o));
  }
  T fetch_add(T v, mo o = ::std::memory_order_seq_cst) noexcept
    requires ::std::is_integral_v<T>
  {
    rq_hook::before(this, rq_hook::access::write);
    return a_.fetch_add(v, o);
  }
  T fetch_sub(T v, mo o = ::std::memory_order_seq_cst) noexcept
    requires ::std::is_integral_v<T>
  {
    rq_hook::before(this, rq_hook::access::write);
    return a_.fetch_sub(v, o);
  }
  operator T() const noexcept { return load(); }

 private:
  ::std::atomic<T> a_;
};
}  // namespace rqi::std

namespace rqi {
#include "goro/detail/run_queue.hpp"
}  // namespace rqi

#include "goro/detail/random.hpp"

namespace {

// Elements carry a plain (non-atomic) payload written by the producer before
// put() and checked by whoever takes the element: under TSan that checks the
// queue's release/acquire hand-off, not just the pointer's arrival.
struct item {
  std::uint32_t id = 0;
  std::uint32_t payload = 0;
};
constexpr std::uint32_t payload_of(std::uint32_t id) { return id * 2654435761u + 1; }

template <std::uint32_t Cap, std::uint32_t StealNum = 1, std::uint32_t StealDen = 2>
using queue = rqi::goro::detail::local_run_queue<item, Cap, StealNum, StealDen>;

// The global queue stand-in: records every batch put() overflows.
struct global_sink {
  std::vector<std::vector<std::uint32_t>> batches;
  void operator()(item** batch, std::uint32_t n) {
    std::vector<std::uint32_t> ids;
    for (std::uint32_t i = 0; i < n; ++i) ids.push_back(batch[i]->id);
    batches.push_back(std::move(ids));
  }
};

struct no_overflow {
  void operator()(item**, std::uint32_t) const { FAIL("unexpected overflow to the global queue"); }
};

std::vector<item> make_items(std::uint32_t n) {
  std::vector<item> v(n);
  for (std::uint32_t i = 0; i < n; ++i) v[i] = {i, payload_of(i)};
  return v;
}

std::uint32_t id_of(void* p) { return static_cast<item*>(p)->id; }

// Moves the ring's head and tail forward by `k` so that the next elements
// sit at a different ring offset (and wrap around the end of the array).
template <class Q>
void rotate(Q& q, std::uint32_t k) {
  item dummy{~0u, 0};
  for (std::uint32_t i = 0; i < k; ++i) {
    q.put(&dummy, false, no_overflow{});
    auto r = q.get();
    REQUIRE(r.item == &dummy);
  }
}

template <class Q>
std::vector<std::uint32_t> get_all(Q& q, bool* any_inherit = nullptr) {
  std::vector<std::uint32_t> out;
  for (;;) {
    auto r = q.get();
    if (r.item == nullptr) break;
    if (r.inherit_time && any_inherit) *any_inherit = true;
    out.push_back(id_of(r.item));
  }
  return out;
}

std::vector<std::uint32_t> iota_ids(std::uint32_t first, std::uint32_t last) {  // [first, last)
  std::vector<std::uint32_t> v;
  for (std::uint32_t i = first; i < last; ++i) v.push_back(i);
  return v;
}

}  // namespace

// ===========================================================================
// Sequential behaviour
// ===========================================================================

namespace {
template <std::uint32_t Cap>
void check_fifo_every_size() {
  auto items = make_items(Cap + 1);
  std::vector<std::uint32_t> offsets = {0, 1, Cap / 2, Cap - 1};
  if (Cap <= 16)
    for (std::uint32_t o = 2; o < 2 * Cap; ++o) offsets.push_back(o);
  for (std::uint32_t offset : offsets) {
    for (std::uint32_t n = 0; n <= Cap; ++n) {  // Cap itself fits without overflowing
      INFO("capacity=" << Cap << " offset=" << offset << " size=" << n);
      queue<Cap> q;
      rotate(q, offset);
      REQUIRE(q.empty());
      REQUIRE(q.size() == 0);
      for (std::uint32_t i = 0; i < n; ++i) {
        q.put(&items[i], false, no_overflow{});
        REQUIRE(q.size() == i + 1);
        REQUIRE_FALSE(q.empty());
      }
      for (std::uint32_t i = 0; i < n; ++i) {
        auto r = q.get();
        REQUIRE(r.item == &items[i]);
        REQUIRE_FALSE(r.inherit_time);
        REQUIRE(q.size() == n - i - 1);
      }
      auto r = q.get();
      REQUIRE(r.item == nullptr);
      REQUIRE_FALSE(r.inherit_time);
      REQUIRE(q.empty());
    }
  }
}
}  // namespace

TEST_CASE("runq: FIFO for every size below capacity", "[runq]") {
  check_fifo_every_size<2>();
  check_fifo_every_size<8>();
  check_fifo_every_size<256>();
}

TEST_CASE("runq: FIFO with interleaved puts and gets", "[runq]") {
  auto items = make_items(5000);
  queue<8> q;
  goro::detail::fast_rand rng(7);
  std::uint32_t next_put = 0, next_get = 0;
  while (next_get < items.size()) {
    bool can_put = next_put < items.size() && next_put - next_get < 8;
    if (can_put && (next_put == next_get || rng.below(2) == 0)) {
      q.put(&items[next_put++], false, no_overflow{});
    } else {
      auto r = q.get();
      REQUIRE(r.item == &items[next_get++]);
    }
    REQUIRE(q.size() == next_put - next_get);
  }
  REQUIRE(q.empty());
}

TEST_CASE("runq: runnext goes first and inherits the time slice", "[runq]") {
  auto items = make_items(10);
  global_sink sink;
  queue<8> q;

  SECTION("a lone runnext") {
    q.put(&items[1], true, sink);
    REQUIRE(q.size() == 1);
    REQUIRE_FALSE(q.empty());
    auto r = q.get();
    REQUIRE(r.item == &items[1]);
    REQUIRE(r.inherit_time);
    REQUIRE(q.empty());
    r = q.get();
    REQUIRE(r.item == nullptr);
    REQUIRE_FALSE(r.inherit_time);
  }
  SECTION("runnext overtakes the ring; only it inherits the time slice") {
    q.put(&items[1], false, sink);
    q.put(&items[2], false, sink);
    q.put(&items[3], true, sink);
    REQUIRE(q.size() == 3);
    auto r = q.get();
    REQUIRE(r.item == &items[3]);
    REQUIRE(r.inherit_time);
    r = q.get();
    REQUIRE(r.item == &items[1]);
    REQUIRE_FALSE(r.inherit_time);
    r = q.get();
    REQUIRE(r.item == &items[2]);
    REQUIRE_FALSE(r.inherit_time);
    REQUIRE(q.empty());
  }
  SECTION("a new runnext kicks the previous one to the tail") {
    q.put(&items[1], false, sink);
    q.put(&items[2], true, sink);
    q.put(&items[3], false, sink);
    q.put(&items[4], true, sink);  // kicks 2 behind 1 and 3
    q.put(&items[5], true, sink);  // kicks 4 behind 2
    REQUIRE(q.size() == 5);
    std::vector<std::pair<std::uint32_t, bool>> got;
    for (;;) {
      auto r = q.get();
      if (!r.item) break;
      got.emplace_back(id_of(r.item), r.inherit_time);
    }
    std::vector<std::pair<std::uint32_t, bool>> want = {{5, true}, {1, false}, {3, false}, {2, false}, {4, false}};
    REQUIRE(got == want);
  }
  SECTION("the kicked runnext respects the ring's wrap-around") {
    rotate(q, 5);
    for (std::uint32_t i = 0; i < 7; ++i) q.put(&items[i], false, sink);
    q.put(&items[7], true, sink);
    q.put(&items[8], true, sink);  // kicks 7 into the last free slot
    REQUIRE(sink.batches.empty());
    REQUIRE(q.size() == 9);
    auto r = q.get();
    REQUIRE(r.item == &items[8]);
    REQUIRE(r.inherit_time);
    bool inherit = false;
    REQUIRE(get_all(q, &inherit) == iota_ids(0, 8));
    REQUIRE_FALSE(inherit);
  }
  REQUIRE(sink.batches.empty());
}

TEST_CASE("runq: drain, put_batch, size and empty", "[runq]") {
  auto items = make_items(40);
  global_sink sink;
  queue<8> q;
  REQUIRE(q.empty());
  REQUIRE(q.size() == 0);
  std::vector<std::uint32_t> seen;
  q.drain([&](item* it) { seen.push_back(it->id); });
  REQUIRE(seen.empty());

  std::array<item*, 5> batch = {&items[0], &items[1], &items[2], &items[3], &items[4]};
  q.put_batch(batch.data(), static_cast<std::uint32_t>(batch.size()), sink);
  q.put(&items[5], true, sink);
  REQUIRE(q.size() == 6);
  q.drain([&](item* it) { seen.push_back(it->id); });
  REQUIRE(seen == std::vector<std::uint32_t>{5, 0, 1, 2, 3, 4});  // runnext first, then the ring in order
  REQUIRE(q.empty());
  REQUIRE(q.size() == 0);

  // put_batch overflows like put: 8 fit, the 9th sends 4 + 1 to the sink.
  std::vector<item*> many;
  for (std::uint32_t i = 10; i < 30; ++i) many.push_back(&items[i]);
  q.put_batch(many.data(), 9, sink);
  REQUIRE(sink.batches.size() == 1);
  REQUIRE(sink.batches[0] == std::vector<std::uint32_t>{10, 11, 12, 13, 18});
  REQUIRE(q.size() == 4);
  seen.clear();
  q.drain([&](item* it) { seen.push_back(it->id); });
  REQUIRE(seen == iota_ids(14, 18));
}

// ===========================================================================
// Overflow to the global queue
// ===========================================================================

namespace {
template <std::uint32_t Cap>
void check_overflow() {
  constexpr std::uint32_t half = Cap / 2;
  INFO("capacity=" << Cap);
  {  // the first overflow
    auto items = make_items(Cap + 1);
    global_sink sink;
    queue<Cap> q;
    rotate(q, Cap / 2 + 1);
    for (std::uint32_t i = 0; i < Cap; ++i) q.put(&items[i], false, sink);
    REQUIRE(sink.batches.empty());
    REQUIRE(q.size() == Cap);
    q.put(&items[Cap], false, sink);
    REQUIRE(sink.batches.size() == 1);  // one batch: the global queue takes it under one lock
    auto want = iota_ids(0, half);
    want.push_back(Cap);  // the oldest half, then the element being put
    REQUIRE(sink.batches[0] == want);
    REQUIRE(q.size() == Cap - half);
    REQUIRE(get_all(q) == iota_ids(half, Cap));
  }
  {  // a kicked runnext overflows too: it ends the batch
    auto items = make_items(Cap + 2);
    global_sink sink;
    queue<Cap> q;
    for (std::uint32_t i = 0; i < Cap; ++i) q.put(&items[i], false, sink);
    q.put(&items[Cap], true, sink);  // into runnext: no overflow
    REQUIRE(sink.batches.empty());
    q.put(&items[Cap + 1], true, sink);  // kicks items[Cap] into the full ring
    REQUIRE(sink.batches.size() == 1);
    auto want = iota_ids(0, half);
    want.push_back(Cap);
    REQUIRE(sink.batches[0] == want);
    auto r = q.get();
    REQUIRE(r.item == &items[Cap + 1]);
    REQUIRE(r.inherit_time);
    REQUIRE(get_all(q) == iota_ids(half, Cap));
  }
  {  // a long run with random gets: order preserved, nothing lost or duplicated
    const std::uint32_t n = 40 * Cap + 7;
    auto items = make_items(n);
    global_sink sink;
    queue<Cap> q;
    goro::detail::fast_rand rng(Cap);
    std::vector<std::uint32_t> got;
    for (std::uint32_t i = 0; i < n; ++i) {
      std::size_t before = sink.batches.size();
      std::uint32_t size_before = q.size();
      q.put(&items[i], false, sink);
      if (sink.batches.size() != before) {
        REQUIRE(size_before == Cap);
        REQUIRE(sink.batches.size() == before + 1);
        REQUIRE(sink.batches.back().size() == half + 1);
        REQUIRE(sink.batches.back().back() == i);
        REQUIRE(q.size() == Cap - half);
      } else {
        REQUIRE(q.size() == size_before + 1);
      }
      if (rng.below(4) == 0)
        if (auto r = q.get(); r.item) got.push_back(id_of(r.item));
    }
    for (auto id : get_all(q)) got.push_back(id);
    REQUIRE(sink.batches.size() > 10);
    // Ring elements leave in put order, wherever they go.
    REQUIRE(std::is_sorted(got.begin(), got.end()));
    std::vector<std::uint32_t> all = got;
    for (auto& b : sink.batches) {
      REQUIRE(std::is_sorted(b.begin(), b.end()));
      // The batch's ring part is older than anything still to be got.
      all.insert(all.end(), b.begin(), b.end());
    }
    std::sort(all.begin(), all.end());
    REQUIRE(all == iota_ids(0, n));
  }
}
}  // namespace

TEST_CASE("runq: overflow sends half plus one to the global queue in one batch", "[runq]") {
  check_overflow<2>();
  check_overflow<4>();
  check_overflow<8>();
  check_overflow<256>();
}

// ===========================================================================
// Stealing
// ===========================================================================

namespace {
constexpr std::uint32_t ceil_frac(std::uint32_t n, std::uint32_t num, std::uint32_t den) {
  return static_cast<std::uint32_t>((std::uint64_t{n} * num + den - 1) / den);
}

template <std::uint32_t Cap, std::uint32_t Num, std::uint32_t Den>
void check_steal_fraction() {
  using Q = queue<Cap, Num, Den>;
  for (std::uint32_t n = 0; n <= 4 * Cap + 10; ++n) REQUIRE(Q::steal_count(n) == ceil_frac(n, Num, Den));
  auto items = make_items(Cap + 1);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> offsets = {{0, 0}, {1, Cap - 1}, {Cap / 2, 3}, {Cap - 1, 1}};
  for (auto [vo, to] : offsets) {
    for (std::uint32_t n = 0; n <= Cap; ++n) {
      INFO("capacity=" << Cap << " fraction=" << Num << "/" << Den << " queued=" << n << " offsets=" << vo << ","
                       << to);
      Q victim, thief;
      rotate(victim, vo);
      rotate(thief, to);
      for (std::uint32_t i = 0; i < n; ++i) victim.put(&items[i], false, no_overflow{});
      int callbacks = 0;
      item* got = thief.steal_from(victim, true, [&] { ++callbacks; });
      REQUIRE(callbacks == 0);  // the ring is not empty, or there is no runnext
      const std::uint32_t k = ceil_frac(n, Num, Den);
      if (k == 0) {
        REQUIRE(got == nullptr);
        REQUIRE(thief.empty());
        continue;
      }
      // The k oldest go: the thief runs the newest of them and queues the
      // rest in order; the victim keeps the others in order.
      REQUIRE(got == &items[k - 1]);
      REQUIRE(got->payload == payload_of(k - 1));
      REQUIRE(thief.size() == k - 1);
      REQUIRE(victim.size() == n - k);
      bool inherit = false;
      REQUIRE(get_all(thief, &inherit) == iota_ids(0, k - 1));
      REQUIRE_FALSE(inherit);
      REQUIRE(get_all(victim) == iota_ids(k, n));
    }
  }
}
}  // namespace

TEST_CASE("runq: a steal takes exactly ceil(n * fraction), the oldest, in order", "[runq][steal]") {
  check_steal_fraction<8, 1, 2>();
  check_steal_fraction<8, 1, 4>();
  check_steal_fraction<8, 3, 4>();
  check_steal_fraction<8, 1, 1>();
  check_steal_fraction<8, 2, 3>();
  check_steal_fraction<256, 1, 2>();
  check_steal_fraction<256, 1, 4>();
  check_steal_fraction<256, 3, 4>();
  check_steal_fraction<256, 1, 1>();
  check_steal_fraction<256, 2, 3>();
  check_steal_fraction<2, 1, 2>();
  check_steal_fraction<2, 1, 1>();
}

TEST_CASE("runq: repeated steals halve the victim", "[runq][steal]") {
  auto items = make_items(256);
  queue<256> victim, thief;
  for (std::uint32_t i = 0; i < 256; ++i) victim.put(&items[i], false, no_overflow{});
  std::uint32_t next = 0, left = 256;
  while (left > 0) {
    std::uint32_t k = left - left / 2;
    item* g = thief.steal_from(victim, false);
    REQUIRE(g == &items[next + k - 1]);
    REQUIRE(get_all(thief) == iota_ids(next, next + k - 1));
    next += k;
    left -= k;
    REQUIRE(victim.size() == left);
  }
  REQUIRE(thief.steal_from(victim, false) == nullptr);
}

TEST_CASE("runq: runnext is stolen only when the ring is empty and only if asked", "[runq][steal]") {
  auto items = make_items(4);
  queue<8> victim, thief;
  global_sink sink;
  int callbacks = 0;
  auto before = [&] { ++callbacks; };

  victim.put(&items[1], true, sink);
  REQUIRE(thief.steal_from(victim, false, before) == nullptr);
  REQUIRE(callbacks == 0);
  REQUIRE(victim.size() == 1);

  REQUIRE(thief.steal_from(victim, true, before) == &items[1]);
  REQUIRE(callbacks == 1);  // Go's "victim is about to run it" pause runs first
  REQUIRE(thief.empty());
  REQUIRE(victim.empty());
  REQUIRE(victim.get().item == nullptr);

  // With something in the ring, the ring is stolen and runnext stays.
  victim.put(&items[2], true, sink);
  victim.put(&items[3], false, sink);
  REQUIRE(thief.steal_from(victim, true, before) == &items[3]);
  REQUIRE(callbacks == 1);
  auto r = victim.get();
  REQUIRE(r.item == &items[2]);
  REQUIRE(r.inherit_time);
  REQUIRE(victim.empty());
  REQUIRE(thief.steal_from(victim, true, before) == nullptr);
  REQUIRE(callbacks == 1);  // nothing to steal: no pause
}

// ===========================================================================
// Exhaustive interleavings
// ===========================================================================
//
// Real threads only sample interleavings. Here every interleaving of a few
// short scripts (an owner, one or two thieves, an observer) is run, at the
// granularity of single accesses to the victim queue's atomics: each script
// runs on its own fiber (ucontext) on one OS thread, and the hook in
// rqi::std::atomic lets a depth-first search decide, before each access to
// the victim, which fiber makes the next one. The search replays the chosen
// prefix and flips the last untried choice (stateless model checking), so
// each run is a distinct interleaving, and the set of runs is complete.
// compare_exchange_weak may also fail spuriously once per run. Accesses to
// a thief's own queue are not preemption points: nobody else touches it in
// these scenarios, so they commute with everything.
//
// The search is over sequentially consistent interleavings of the header's
// own code; weaker memory-order outcomes are left to the multi-threaded
// tests under TSan. A mutation such as a thief claiming its batch with a
// plain store instead of a compare-exchange on head, get() doing the same,
// or empty() not re-reading tail, makes these tests fail.

namespace mc {

class explorer final : public rq_hook::observer {
 public:
  struct scenario {
    virtual unsigned fibers() const = 0;
    virtual void reset() = 0;  // fresh state; the hook is off
    virtual void run(unsigned fiber) = 0;
    virtual std::string check() = 0;  // "" when the run was correct; the hook is off
    virtual std::pair<const void*, std::size_t> shared() const = 0;  // the preemptible object

   protected:
    ~scenario() = default;
  };
  struct result {
    std::uint64_t runs = 0;  // of the final, complete search
    unsigned restarts = 0;
    std::size_t max_choices = 0;
    std::string failure;  // non-empty: the failure and its interleaving
  };

  explicit explorer(unsigned max_fibers) : fibers_(max_fibers) {
    for (auto& f : fibers_) f.stack = std::make_unique<char[]>(stack_size);
  }

  result explore(scenario& s, unsigned spurious_budget, std::uint64_t max_runs) {
    result res;
    const unsigned n = s.fibers();
    if (n > fibers_.size()) {
      res.failure = "too many fibers";
      return res;
    }
    trail_.clear();
    writers_.clear();
    for (;;) {
      if (res.runs == max_runs) {
        res.failure = "more interleavings than the limit: the search is incomplete";
        return res;
      }
      ++res.runs;
      learned_ = false;
      run_once(s, n, spurious_budget);
      if (!failure_.empty()) {
        res.failure = failure_ + describe();
        failure_.clear();
        return res;
      }
      std::string err = s.check();
      if (!err.empty()) {
        res.failure = err + describe();
        return res;
      }
      res.max_choices = std::max(res.max_choices, trail_.size());
      if (learned_) {  // a new writer: which loads are preemption points changed; start over
        trail_.clear();
        res.runs = 0;
        ++res.restarts;
        continue;
      }
      if (!next_schedule()) return res;
    }
  }

 private:
  static constexpr std::size_t stack_size = RQ_TEST_ASAN || RQ_TEST_TSAN ? 512 * 1024 : 128 * 1024;
  static constexpr std::size_t max_accesses = 5000;  // per run; more means a livelock

  struct fiber {
    ucontext_t ctx{};
    std::unique_ptr<char[]> stack;
    bool finished = false;
    bool granted = false;  // was handed the next access; proceeds without choosing
#if RQ_TEST_TSAN
    void* tsan = nullptr;
#endif
  };
  struct choice {
    unsigned taken, count;
  };

  void run_once(scenario& s, unsigned n, unsigned spurious_budget) {
    s.reset();
    auto [p, size] = s.shared();
    lo_ = reinterpret_cast<std::uintptr_t>(p);
    hi_ = lo_ + size;
    writers_.resize(size, 0);
    scenario_ = &s;
    nfibers_ = n;
    depth_ = 0;
    accesses_ = 0;
    spurious_left_ = spurious_budget;
    log_.clear();
#if RQ_TEST_TSAN
    main_tsan_ = __tsan_get_current_fiber();
#endif
#if RQ_TEST_ASAN
    if (main_stack_bottom_ == nullptr) {  // for switches back to main
      pthread_attr_t attr;
      void* addr = nullptr;
      pthread_getattr_np(pthread_self(), &attr);
      pthread_attr_getstack(&attr, &addr, &main_stack_size_);
      pthread_attr_destroy(&attr);
      main_stack_bottom_ = addr;
    }
#endif
    for (unsigned i = 0; i < n; ++i) {
      fiber& f = fibers_[i];
      f.finished = false;
      f.granted = false;
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = f.stack.get();
      f.ctx.uc_stack.ss_size = stack_size;
      f.ctx.uc_link = nullptr;
      makecontext(&f.ctx, &explorer::trampoline, 0);
#if RQ_TEST_TSAN
      f.tsan = __tsan_create_fiber(0);
#endif
    }
    current_ = this;
    rq_hook::active = this;
    // Main dispatches the first access, and the next one whenever a fiber
    // ends; fibers hand accesses to each other directly.
    for (;;) {
      if (!failure_.empty()) break;
      unsigned live[8];
      unsigned nlive = 0;
      for (unsigned i = 0; i < n; ++i)
        if (!fibers_[i].finished) live[nlive++] = i;
      if (nlive == 0) break;
      unsigned next = live[choose(nlive)];
      fibers_[next].granted = true;
      cur_ = next;
      switch_context(&main_ctx_, next);
    }
    rq_hook::active = nullptr;
#if RQ_TEST_TSAN
    for (unsigned i = 0; i < n; ++i) __tsan_destroy_fiber(fibers_[i].tsan);
#endif
  }

  void switch_context(ucontext_t* from, unsigned to) {
#if RQ_TEST_TSAN
    __tsan_switch_to_fiber(fibers_[to].tsan, 0);
#endif
#if RQ_TEST_ASAN
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, fibers_[to].stack.get(), stack_size);
#endif
    swapcontext(from, &fibers_[to].ctx);
#if RQ_TEST_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  }
  // From a fiber back to main; the fiber is never resumed (it ended, or the
  // run is abandoned).
  [[noreturn]] void leave_to_main() {
#if RQ_TEST_TSAN
    __tsan_switch_to_fiber(main_tsan_, 0);
#endif
#if RQ_TEST_ASAN
    __sanitizer_start_switch_fiber(nullptr, main_stack_bottom_, main_stack_size_);
#endif
    setcontext(&main_ctx_);
    std::abort();
  }

  static void trampoline() {
    explorer* self = current_;
#if RQ_TEST_ASAN
    __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
    unsigned me = self->cur_;
    self->scenario_->run(me);
    self->fibers_[me].finished = true;
    self->leave_to_main();
  }

  bool on_access(const void* where, rq_hook::access kind) override {
    auto a = reinterpret_cast<std::uintptr_t>(where);
    if (a < lo_ || a >= hi_) return false;  // not the shared object: commutes with everything
    const auto me_bit = static_cast<std::uint8_t>(1u << cur_);
    std::uint8_t& writers = writers_[a - lo_];
    if (kind == rq_hook::access::load) {
      // A load of a location no other fiber writes commutes with every
      // other fiber's accesses: no need to preempt before it.
      if ((writers & ~me_bit) == 0) return false;
    } else if ((writers & me_bit) == 0) {
      writers |= me_bit;
      learned_ = true;
    }
    if (++accesses_ > max_accesses) {
      failure_ = "livelock: no progress after " + std::to_string(max_accesses) + " accesses";
      leave_to_main();
    }
    const unsigned me = cur_;
    if (fibers_[me].granted) {
      fibers_[me].granted = false;
    } else {
      unsigned opts[8];
      unsigned n = 0;
      opts[n++] = me;
      for (unsigned i = 0; i < nfibers_; ++i)
        if (i != me && !fibers_[i].finished) opts[n++] = i;
      unsigned k = choose(n);
      if (k != 0) {
        fibers_[opts[k]].granted = true;
        cur_ = opts[k];
        switch_context(&fibers_[me].ctx, opts[k]);
        // Resumed: some fiber (or main) handed us this access.
        fibers_[me].granted = false;
      }
    }
    log_.push_back(static_cast<char>('0' + me));
    if (kind == rq_hook::access::weak_cas && spurious_left_ > 0 && choose(2) == 1) {
      --spurious_left_;
      log_.push_back('~');
      return true;
    }
    return false;
  }

  unsigned choose(unsigned count) {
    if (count == 1) return 0;
    if (depth_ < trail_.size()) {
      if (trail_[depth_].count != count) failure_ = "nondeterministic replay";
      return trail_[depth_++].taken;
    }
    trail_.push_back({0, count});
    ++depth_;
    return 0;
  }

  bool next_schedule() {
    while (!trail_.empty() && trail_.back().taken + 1 >= trail_.back().count) trail_.pop_back();
    if (trail_.empty()) return false;
    ++trail_.back().taken;
    return true;
  }

  std::string describe() const {
    return "\n  interleaving (fiber making each access to the victim, ~ = spurious CAS failure): " + log_;
  }

  static inline explorer* current_ = nullptr;

  std::vector<fiber> fibers_;
  ucontext_t main_ctx_{};
#if RQ_TEST_TSAN
  void* main_tsan_ = nullptr;
#endif
#if RQ_TEST_ASAN
  const void* main_stack_bottom_ = nullptr;
  std::size_t main_stack_size_ = 0;
#endif
  scenario* scenario_ = nullptr;
  unsigned nfibers_ = 0;
  unsigned cur_ = 0;
  std::uintptr_t lo_ = 0, hi_ = 0;
  std::vector<choice> trail_;
  std::size_t depth_ = 0;
  std::size_t accesses_ = 0;
  unsigned spurious_left_ = 0;
  std::string log_;
  std::string failure_;
  // Per byte of the shared object, the fibers seen writing it (a failed CAS
  // counts). Learned as the search goes; when it grows, the search restarts,
  // so the final search ran with the complete sets.
  std::vector<std::uint8_t> writers_;
  bool learned_ = false;
};

// ---- owner + thieves: every element is taken exactly once -----------------

enum class op { put, put_next, get, steal, steal_runnext };
struct step {
  op kind;
  std::uint32_t id = 0;  // for puts
};

template <std::uint32_t Cap, std::uint32_t Num, std::uint32_t Den>
class queue_scenario final : public explorer::scenario {
  using Q = queue<Cap, Num, Den>;

 public:
  queue_scenario(std::vector<step> owner, std::vector<std::vector<step>> thieves)
      : owner_(std::move(owner)), thieves_(std::move(thieves)), own_(thieves_.size()) {
    std::uint32_t max_id = 0;
    for (auto& s : owner_)
      if (s.kind == op::put || s.kind == op::put_next) {
        max_id = std::max(max_id, s.id);
        put_ids_.push_back(s.id);
        if (s.kind == op::put_next) {
          next_ids_.push_back(s.id);
          fifo_only_ = false;
        }
      }
    items_ = make_items(max_id + 1);
  }

  unsigned fibers() const override { return 1 + static_cast<unsigned>(thieves_.size()); }
  std::pair<const void*, std::size_t> shared() const override { return {&*victim_, sizeof(Q)}; }

  void reset() override {
    victim_.emplace();
    for (auto& q : own_) q.emplace();
    owner_got_.clear();
    steals_.assign(thieves_.size(), {});
    sink_.batches.clear();
    bad_payload_ = false;
  }

  void run(unsigned f) override {
    if (f == 0) {
      for (const step& s : owner_) {
        switch (s.kind) {
          case op::put:
          case op::put_next:
            victim_->put(&items_[s.id], s.kind == op::put_next, sink_);
            break;
          case op::get: {
            auto r = victim_->get();
            if (r.item) {
              note(static_cast<item*>(r.item));
              owner_got_.emplace_back(id_of(r.item), r.inherit_time);
            }
            break;
          }
          default:
            break;
        }
      }
      return;
    }
    Q& own = *own_[f - 1];
    for (const step& s : thieves_[f - 1]) {
      item* g = own.steal_from(*victim_, s.kind == op::steal_runnext);
      stolen st;
      if (g) {
        note(g);
        st.run = g->id;
        // Drain our own queue before the next steal (steal_from requires it
        // to be empty). Not preemptible: nobody else touches it.
        for (auto r = own.get(); r.item; r = own.get()) {
          note(static_cast<item*>(r.item));
          st.queued.push_back(id_of(r.item));
          if (r.inherit_time) st.inherit = true;
        }
      }
      steals_[f - 1].push_back(std::move(st));
    }
  }

  std::string check() override {
    std::ostringstream err;
    std::vector<int> count(items_.size(), 0);
    for (auto [id, inherit] : owner_got_) {
      ++count[id];
      if (inherit && std::find(next_ids_.begin(), next_ids_.end(), id) == next_ids_.end())
        err << "get() of " << id << " inherits the time slice but it never was runnext; ";
    }
    for (std::size_t t = 0; t < steals_.size(); ++t)
      for (auto& st : steals_[t]) {
        if (!st.run) continue;
        ++count[*st.run];
        for (auto id : st.queued) ++count[id];
        if (st.inherit) err << "a thief's own get() inherits the time slice; ";
        if (fifo_only_) {  // one steal takes consecutive ring slots: oldest first, runs the newest
          if (!std::is_sorted(st.queued.begin(), st.queued.end()) ||
              (!st.queued.empty() && st.queued.back() > *st.run))
            err << "thief " << t << " got its batch out of order; ";
        }
      }
    for (auto& b : sink_.batches) {
      for (auto id : b) ++count[id];
      if (b.size() != Cap / 2 + 1) err << "overflow batch of " << b.size() << "; ";
      if (fifo_only_ && !std::is_sorted(b.begin(), b.end())) err << "overflow batch out of order; ";
    }
    if (fifo_only_) {
      std::vector<std::uint32_t> ids;
      for (auto [id, inherit] : owner_got_) ids.push_back(id);
      if (!std::is_sorted(ids.begin(), ids.end())) err << "owner's gets out of order; ";
    }
    victim_->drain([&](item* it) {
      note(it);
      ++count[it->id];
    });
    for (auto& q : own_)
      if (!q->empty()) err << "a thief's queue is not empty at the end; ";
    for (std::uint32_t id = 0; id < count.size(); ++id) {
      bool was_put = std::find(put_ids_.begin(), put_ids_.end(), id) != put_ids_.end();
      if (was_put && count[id] == 0) err << "element " << id << " lost; ";
      if (count[id] > 1) err << "element " << id << " taken " << count[id] << " times; ";
      if (!was_put && count[id] != 0) err << "element " << id << " appeared from nowhere; ";
    }
    if (bad_payload_) err << "an element's payload was not visible to its taker; ";
    std::string s = err.str();
    if (!s.empty()) s += "\n  " + summary();
    return s;
  }

 private:
  struct stolen {
    std::optional<std::uint32_t> run;
    std::vector<std::uint32_t> queued;
    bool inherit = false;
  };

  void note(item* it) {
    if (it->payload != payload_of(it->id)) bad_payload_ = true;
  }

  std::string summary() const {
    std::ostringstream o;
    o << "owner got:";
    for (auto [id, inherit] : owner_got_) o << ' ' << id << (inherit ? "*" : "");
    for (std::size_t t = 0; t < steals_.size(); ++t) {
      o << "; thief " << t << " stole:";
      for (auto& st : steals_[t]) {
        o << " [";
        if (st.run) {
          o << "run " << *st.run;
          for (auto id : st.queued) o << ' ' << id;
        }
        o << "]";
      }
    }
    o << "; global:";
    for (auto& b : sink_.batches) {
      o << " [";
      for (auto id : b) o << ' ' << id;
      o << " ]";
    }
    return o.str();
  }

  std::vector<step> owner_;
  std::vector<std::vector<step>> thieves_;
  std::vector<std::optional<Q>> own_;
  std::optional<Q> victim_;
  std::vector<item> items_;
  std::vector<std::uint32_t> put_ids_, next_ids_;
  bool fifo_only_ = true;
  std::vector<std::pair<std::uint32_t, bool>> owner_got_;
  std::vector<std::vector<stolen>> steals_;
  global_sink sink_;
  bool bad_payload_ = false;
};

// ---- owner keeping >= 1 element + observer: empty() is never spurious -----
//
// The owner cycles through Go's racy pattern (the comment in runqempty):
// runnext holds A and the ring is empty; put(B, next) kicks A into the ring;
// get() takes B; put(C, next); a steal (by the owner itself, into a private
// queue, so that the count stays under its control) takes A back out of the
// ring. At every instant at least one element is in the queue, so every
// empty() the observer makes must say false.
class empty_scenario final : public explorer::scenario {
  using Q = queue<4>;

 public:
  empty_scenario(unsigned cycles, unsigned probes) : cycles_(cycles), probes_(probes), items_(make_items(3)) {}
  unsigned fibers() const override { return 2; }
  std::pair<const void*, std::size_t> shared() const override { return {&*q_, sizeof(Q)}; }
  void reset() override {
    q_.emplace();
    aux_.emplace();
    q_->put(&items_[0], true, no_overflow{});
    owner_ok_ = true;
    spurious_ = 0;
  }
  void run(unsigned f) override {
    if (f == 0) {
      unsigned a = 0, b = 1, c = 2;  // runnext holds a
      for (unsigned i = 0; i < cycles_; ++i) {
        q_->put(&items_[b], true, no_overflow{});  // kicks a into the ring
        auto r = q_->get();
        if (r.item != &items_[b] || !r.inherit_time) owner_ok_ = false;
        q_->put(&items_[c], true, no_overflow{});
        if (aux_->steal_from(*q_, false) != &items_[a]) owner_ok_ = false;
        unsigned free1 = a, free2 = b;
        a = c;
        b = free1;
        c = free2;
      }
    } else {
      for (unsigned i = 0; i < probes_; ++i)
        if (q_->empty()) ++spurious_;
    }
  }
  std::string check() override {
    std::string s;
    if (!owner_ok_) s += "the owner's script went wrong; ";
    if (spurious_) s += "empty() returned true " + std::to_string(spurious_) + " times while an element was queued; ";
    return s;
  }

 private:
  unsigned cycles_, probes_;
  std::vector<item> items_;
  std::optional<Q> q_, aux_;
  bool owner_ok_ = true;
  unsigned spurious_ = 0;
};

template <class S>
void explore_all(S& scenario, unsigned spurious, const char* name, std::uint64_t max_runs = 2'000'000) {
  static explorer ex(3);
  auto t0 = std::chrono::steady_clock::now();
  auto res = ex.explore(scenario, spurious, max_runs);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  INFO(name << ": " << res.runs << " interleavings (" << res.restarts << " restarts), up to " << res.max_choices
             << " choices each, " << ms << " ms");
  if (!res.failure.empty()) FAIL(res.failure);
  SUCCEED();
  if (std::getenv("GORO_RUNQ_VERBOSE"))
    std::printf("%s: %llu interleavings (%u restarts), up to %zu choices, %lld ms\n", name,
                static_cast<unsigned long long>(res.runs), res.restarts, res.max_choices, static_cast<long long>(ms));
}

}  // namespace mc

TEST_CASE("runq: every interleaving of owner and thief loses and duplicates nothing", "[runq][interleavings]") {
  using mc::op;
  using mc::step;
  SECTION("capacity 2: fill, overflow, get against a steal") {
    mc::queue_scenario<2, 1, 2> s({{op::put, 1}, {op::put, 2}, {op::put, 3}, {op::get}}, {{{op::steal}}});
    mc::explore_all(s, 1, "cap 2, fifo");
  }
  SECTION("capacity 2: runnext kicks against a runnext steal") {
    mc::queue_scenario<2, 1, 2> s({{op::put_next, 1}, {op::put_next, 2}, {op::get}}, {{{op::steal_runnext}}});
    mc::explore_all(s, 1, "cap 2, runnext");
  }
  SECTION("capacity 4, steal everything: overflow against a steal") {
    mc::queue_scenario<4, 1, 1> s({{op::put, 1}, {op::put, 2}, {op::put, 3}, {op::put, 4}, {op::put, 5}},
                                  {{{op::steal}}});
    mc::explore_all(s, 1, "cap 4, 1/1");
  }
  SECTION("capacity 4, steal 3/4: runnext and ring against a runnext steal") {
    mc::queue_scenario<4, 3, 4> s({{op::put, 1}, {op::put, 2}, {op::put_next, 3}, {op::get}, {op::put_next, 4}, {op::get}},
                                  {{{op::steal_runnext}}});
    mc::explore_all(s, 1, "cap 4, 3/4");
  }
  SECTION("capacity 2: two thieves") {
    mc::queue_scenario<2, 1, 2> s({{op::put, 1}, {op::put_next, 2}},
                                  {{{op::steal_runnext}}, {{op::steal}}});
    mc::explore_all(s, 1, "cap 2, two thieves");
  }
}

TEST_CASE("runq: every interleaving of kicks and empty() never reports empty", "[runq][interleavings]") {
  mc::empty_scenario s(1, 2);
  mc::explore_all(s, 1, "empty");
}

// ===========================================================================
// Multi-threaded stress
// ===========================================================================

namespace {
constexpr bool under_sanitizer = RQ_TEST_TSAN || RQ_TEST_ASAN;

TEST_CASE("runq: empty() is never spuriously true under concurrent kicks", "[runq][stress]") {
  using Q = queue<8>;
  const unsigned cycles = RQ_TEST_TSAN ? 20'000 : under_sanitizer ? 100'000 : 400'000;
  auto items = make_items(3);
  Q q, aux;
  q.put(&items[0], true, no_overflow{});
  std::atomic<bool> done{false};
  std::atomic<bool> observer_started{false};
  std::uint64_t probes = 0, spurious = 0;
  std::thread observer([&] {
    observer_started.store(true);
    while (!done.load(std::memory_order_relaxed)) {
      ++probes;
      if (q.empty()) ++spurious;
    }
  });
  while (!observer_started.load()) std::this_thread::yield();
  unsigned wrong = 0;
  unsigned a = 0, b = 1, c = 2;
  for (unsigned i = 0; i < cycles; ++i) {
    q.put(&items[b], true, no_overflow{});
    auto r = q.get();
    if (r.item != &items[b] || !r.inherit_time) ++wrong;
    q.put(&items[c], true, no_overflow{});
    if (aux.steal_from(q, false) != &items[a]) ++wrong;
    unsigned free1 = a, free2 = b;
    a = c;
    b = free1;
    c = free2;
  }
  done.store(true);
  observer.join();
  INFO(probes << " probes");
  REQUIRE(wrong == 0);
  REQUIRE(spurious == 0);
}

template <std::uint32_t Cap, std::uint32_t Num, std::uint32_t Den>
void stress(std::uint32_t n, unsigned nthieves) {
  using Q = queue<Cap, Num, Den>;
  auto items = make_items(n);
  for (auto& it : items) it.payload = 0;  // written by the owner just before put()
  std::vector<std::unique_ptr<Q>> queues;  // [0] is the owner's
  for (unsigned i = 0; i <= nthieves; ++i) queues.push_back(std::make_unique<Q>());
  std::unique_ptr<std::atomic<std::uint8_t>[]> seen(new std::atomic<std::uint8_t>[n]);
  for (std::uint32_t i = 0; i < n; ++i) seen[i].store(0, std::memory_order_relaxed);
  std::atomic<std::uint32_t> consumed{0};
  std::atomic<std::uint32_t> bad_payload{0}, bad_inherit{0}, steals{0};
  std::atomic<bool> start{false};

  auto consume = [&](item* it) {
    if (it->payload != payload_of(it->id)) bad_payload.fetch_add(1, std::memory_order_relaxed);
    seen[it->id].fetch_add(1, std::memory_order_relaxed);
    consumed.fetch_add(1, std::memory_order_release);
  };
  auto all_consumed = [&] { return consumed.load(std::memory_order_acquire) >= n; };

  std::uint64_t overflows = 0;
  auto to_global = [&](item** batch, std::uint32_t k) {  // owner thread only
    ++overflows;
    for (std::uint32_t i = 0; i < k; ++i) consume(batch[i]);
  };

  std::vector<std::thread> thieves;
  for (unsigned t = 1; t <= nthieves; ++t) {
    thieves.emplace_back([&, t] {
      Q& own = *queues[t];
      goro::detail::fast_rand rng(0x1234567 * t);
      goro::detail::coprime_order order(nthieves + 1);
      while (!start.load()) std::this_thread::yield();
      while (!all_consumed()) {
        bool found = false;
        for (auto e = order.start(rng.next()); !e.done(); e.next()) {
          if (e.position() == t) continue;
          // Any queue may be the victim, the owner's or another thief's.
          item* g = own.steal_from(*queues[e.position()], rng.below(2) == 0);
          if (!g) continue;
          steals.fetch_add(1, std::memory_order_relaxed);
          consume(g);
          for (auto r = own.get(); r.item; r = own.get()) {  // drain: own is empty again before the next steal
            if (r.inherit_time) bad_inherit.fetch_add(1, std::memory_order_relaxed);
            consume(static_cast<item*>(r.item));
          }
          found = true;
          break;
        }
        if (!found) std::this_thread::yield();
      }
    });
  }

  Q& q = *queues[0];
  goro::detail::fast_rand rng(99);
  start.store(true);
  for (std::uint32_t i = 0; i + 1 < n; ++i) {
    items[i].payload = payload_of(i);
    q.put(&items[i], rng.below(4) == 0, to_global);
    if (rng.below(3) == 0)
      if (auto r = q.get(); r.item) consume(static_cast<item*>(r.item));
  }
  // The last element goes to the ring, which is then non-empty; on a loaded
  // machine the thieves may not have run yet, so leave the queue to them
  // until one has stolen (they cannot finish while it holds an element).
  items[n - 1].payload = payload_of(n - 1);
  q.put(&items[n - 1], false, to_global);
  while (steals.load(std::memory_order_relaxed) == 0) std::this_thread::yield();
  while (!all_consumed()) {
    if (auto r = q.get(); r.item)
      consume(static_cast<item*>(r.item));
    else
      std::this_thread::yield();
  }
  for (auto& th : thieves) th.join();

  INFO("capacity=" << Cap << " fraction=" << Num << "/" << Den << " n=" << n << " thieves=" << nthieves
                   << " steals=" << steals.load() << " overflows=" << overflows);
  std::uint32_t missing = 0, dup = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    auto c = seen[i].load();
    if (c == 0) ++missing;
    if (c > 1) ++dup;
  }
  CHECK(missing == 0);
  CHECK(dup == 0);
  CHECK(consumed.load() == n);
  CHECK(bad_payload.load() == 0);
  CHECK(bad_inherit.load() == 0);
  CHECK(steals.load() > 0);
  for (auto& qq : queues) CHECK(qq->empty());
}
}  // namespace

TEST_CASE("runq: owner and thieves on threads take every element exactly once", "[runq][stress]") {
  const std::uint32_t scale = RQ_TEST_TSAN ? 10 : under_sanitizer ? 4 : 1;
  SECTION("capacity 256, steal half, 3 thieves") { stress<256, 1, 2>(200'000 / scale, 3); }
  SECTION("capacity 8, steal all, 2 thieves") { stress<8, 1, 1>(100'000 / scale, 2); }
  SECTION("capacity 4, steal 3/4, 3 thieves") { stress<4, 3, 4>(100'000 / scale, 3); }
}
