// Tests for goro/detail/random.hpp: the coprime enumeration used to visit
// steal victims (Go's randomOrder / randomEnum in src/runtime/proc.go) and
// fast_rand.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <numeric>
#include <set>
#include <vector>

#include "goro/detail/random.hpp"

using goro::detail::coprime_order;
using goro::detail::fast_rand;

namespace {

// Walks one enumeration, returning the positions in visiting order.
std::vector<std::uint32_t> walk(const coprime_order& order, std::uint32_t r) {
  std::vector<std::uint32_t> out;
  for (auto e = order.start(r); !e.done(); e.next()) {
    out.push_back(e.position());
    if (out.size() > order.count()) break;  // never terminates: reported by the caller
  }
  return out;
}

std::set<std::uint32_t> coprimes_of(std::uint32_t n) {
  std::set<std::uint32_t> s;
  for (std::uint32_t i = 1; i <= n; ++i)
    if (std::gcd(i, n) == 1) s.insert(i % n);  // for n == 1 the only coprime, 1, steps by 0
  return s;
}

}  // namespace

TEST_CASE("steal order: every enumeration is a permutation of 0..n-1", "[steal_order]") {
  fast_rand rng(12345);
  for (std::uint32_t n = 1; n <= 64; ++n) {
    coprime_order order(n);
    REQUIRE(order.count() == n);
    const std::uint32_t phi = static_cast<std::uint32_t>(coprimes_of(n).size());
    // Every (start, increment) pair is reached by r in [0, n * phi); add
    // large and random r as well (r / n wraps around the coprime list).
    std::vector<std::uint32_t> starts;
    for (std::uint32_t r = 0; r < n * phi * 2; ++r) starts.push_back(r);
    for (int i = 0; i < 200; ++i) starts.push_back(rng.next());
    starts.push_back(std::numeric_limits<std::uint32_t>::max());
    starts.push_back(std::numeric_limits<std::uint32_t>::max() - 1);
    for (std::uint32_t r : starts) {
      INFO("n=" << n << " r=" << r);
      auto seq = walk(order, r);
      REQUIRE(seq.size() == n);
      CHECK(seq.front() == r % n);  // starts at r % n, as Go's randomOrder.start
      std::vector<bool> hit(n, false);
      for (auto p : seq) {
        REQUIRE(p < n);
        REQUIRE_FALSE(hit[p]);
        hit[p] = true;
      }
    }
  }
}

TEST_CASE("steal order: the increments are exactly the coprimes of n", "[steal_order]") {
  for (std::uint32_t n = 1; n <= 64; ++n) {
    coprime_order order(n);
    const auto expected = coprimes_of(n);
    std::set<std::uint32_t> seen;
    for (std::uint32_t r = 0; r < n * 70; ++r) {  // 70 > phi(n) for n <= 64: every coprime index is used
      auto e = order.start(r);
      const std::uint32_t first = e.position();
      e.next();
      const std::uint32_t inc = (e.position() + n - first) % n;
      // The increment is constant along the walk.
      for (std::uint32_t i = 1; i < n; ++i) {
        std::uint32_t prev = e.position();
        e.next();
        REQUIRE((e.position() + n - prev) % n == inc);
      }
      REQUIRE(e.done());
      seen.insert(inc);
    }
    INFO("n=" << n);
    CHECK(seen == expected);
  }
}

TEST_CASE("steal order: reset changes the count and the coprimes", "[steal_order]") {
  coprime_order order;
  order.reset(8);
  REQUIRE(order.count() == 8);
  REQUIRE(walk(order, 3).size() == 8);
  order.reset(5);
  REQUIRE(order.count() == 5);
  auto seq = walk(order, 17);
  REQUIRE(seq.size() == 5);
  CHECK(std::set<std::uint32_t>(seq.begin(), seq.end()) == std::set<std::uint32_t>{0, 1, 2, 3, 4});
  order.reset(1);
  CHECK(walk(order, 99) == std::vector<std::uint32_t>{0});
}

TEST_CASE("fast_rand: below(n) stays in [0, n)", "[steal_order][fast_rand]") {
  fast_rand rng;
  const std::uint32_t bounds[] = {1u, 2u, 3u, 5u, 7u, 10u, 64u, 100u, 1000u, 65536u, 1u << 31, (1u << 31) + 1,
                                  std::numeric_limits<std::uint32_t>::max()};
  for (std::uint32_t n : bounds)
    for (int i = 0; i < 20000; ++i) REQUIRE(rng.below(n) < n);
  for (std::uint32_t n = 1; n <= 300; ++n)
    for (int i = 0; i < 200; ++i) REQUIRE(rng.below(n) < n);
  for (int i = 0; i < 1000; ++i) REQUIRE(rng.below(1) == 0);
}

TEST_CASE("fast_rand: below(n) reaches every value and is roughly uniform", "[steal_order][fast_rand]") {
  for (std::uint64_t seed : {0ull, 1ull, 42ull, 0xdeadbeefcafef00dull}) {
    fast_rand rng(seed);
    for (std::uint32_t n : {2u, 3u, 7u, 16u, 61u}) {
      std::vector<int> hist(n, 0);
      const int draws = 4000 * static_cast<int>(n);
      for (int i = 0; i < draws; ++i) ++hist[rng.below(n)];
      for (std::uint32_t v = 0; v < n; ++v) {
        INFO("seed=" << seed << " n=" << n << " v=" << v);
        CHECK(hist[v] > 3000);  // expected 4000 each; a 25% deviation is ~16 sigma
        CHECK(hist[v] < 5000);
      }
    }
  }
}

TEST_CASE("fast_rand: the sequence depends on the seed and is reproducible", "[steal_order][fast_rand]") {
  fast_rand a(7), b(7), c(8);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    std::uint32_t x = a.next();
    REQUIRE(x == b.next());
    if (x != c.next()) differs = true;
  }
  CHECK(differs);
}
