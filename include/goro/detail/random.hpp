// Cheap per-M pseudo-random numbers and Go's random coprime enumeration
// (randomOrder in src/runtime/proc.go), used to visit steal victims.
#pragma once

#include <cstdint>
#include <numeric>
#include <vector>

#include "config.hpp"
#include "memory.hpp"

namespace goro::detail {

// wyrand: fast, good enough for scheduling decisions; one state per M.
class fast_rand {
 public:
  explicit fast_rand(std::uint64_t seed = 0x9e3779b97f4a7c15ull) noexcept : state_(seed) {}
  std::uint32_t next() noexcept {
    state_ += 0xa0761d6478bd642full;
    __uint128_t m = static_cast<__uint128_t>(state_) * (state_ ^ 0xe7037ed1a0b428dbull);
    return static_cast<std::uint32_t>(static_cast<std::uint64_t>(m >> 64) ^ static_cast<std::uint64_t>(m));
  }
  // Uniform in [0, n) (Lemire's multiply-shift; n > 0).
  std::uint32_t below(std::uint32_t n) noexcept {
    return static_cast<std::uint32_t>((std::uint64_t{next()} * n) >> 32);
  }

 private:
  std::uint64_t state_;
};

// Enumerates 0..count-1 in a random order: start at r % count and step by a
// random increment coprime with count, so every position is visited once.
class coprime_order {
 public:
  coprime_order() = default;
  explicit coprime_order(std::uint32_t count) { reset(count); }
  // Its table from the runtime's allocator (memory.hpp); before reset.
  void set_memory(runtime_memory* m) noexcept { coprimes_ = decltype(coprimes_)(memory_allocator<std::uint32_t>(m)); }

  GORO_DECL void reset(std::uint32_t count);
  std::uint32_t count() const noexcept { return count_; }

  class enumerator {
   public:
    bool done() const noexcept { return i_ == count_; }
    void next() noexcept {
      ++i_;
      pos_ = (pos_ + inc_) % count_;
    }
    std::uint32_t position() const noexcept { return pos_; }

   private:
    friend class coprime_order;
    enumerator(std::uint32_t count, std::uint32_t pos, std::uint32_t inc) noexcept
        : count_(count), pos_(pos), inc_(inc) {}
    std::uint32_t i_ = 0, count_, pos_, inc_;
  };

  enumerator start(std::uint32_t r) const noexcept {
    return enumerator(count_, r % count_, coprimes_[(r / count_) % coprimes_.size()]);
  }

 private:
  std::uint32_t count_ = 0;
  std::vector<std::uint32_t, memory_allocator<std::uint32_t>> coprimes_;
};


}  // namespace goro::detail

#if GORO_COMPILE_RUNTIME
namespace goro::detail {

GORO_DECL void coprime_order::reset(std::uint32_t count) {
  count_ = count;
  coprimes_.clear();
  for (std::uint32_t i = 1; i <= count; ++i)
    if (std::gcd(i, count) == 1) coprimes_.push_back(i);
}

}  // namespace goro::detail
#endif  // GORO_COMPILE_RUNTIME
