// The spinning role (Go's nmspinning): how many Ms look for work without
// running any. An M holds the role as a spin_token; the gate counts the
// tokens out, at one increment site (take) and one decrement site
// (release), so the count cannot drift whatever path an M leaves by.
//
// Why the count matters: a submitter (wakep, after publishing its G) starts
// an M only if no M spins, since a spinner will find the G. So a spinner
// must release its role *before* its last look at the run queues (the
// "delicate dance": find_runnable, then work_after_going_idle), and wakep's
// read of the count pairs with that release; the Dekker pair is written
// down once, at wakep (sched_idle.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

#include "../error.hpp"
#include "config.hpp"
#include "test_seam.hpp"

namespace goro::detail {

class spin_gate;

// One M's spinning role: held or not; moved along with a P to the M that
// will spin on it (startm), and given back through spin_gate::release.
class spin_token {
 public:
  spin_token() noexcept = default;
  spin_token(spin_token&& o) noexcept : held_(std::exchange(o.held_, false)) {}
  spin_token& operator=(spin_token&& o) noexcept {
    if (this != &o) {
      if (GORO_UNLIKELY(held_)) held_leaked();
      held_ = std::exchange(o.held_, false);
    }
    return *this;
  }
  spin_token(const spin_token&) = delete;
  spin_token& operator=(const spin_token&) = delete;
  ~spin_token() {
    if (GORO_UNLIKELY(held_)) held_leaked();
  }
  explicit operator bool() const noexcept { return held_; }

 private:
  friend class spin_gate;
  // A held role dropped without release: the count would stay high for
  // good and every later wakep would skip its wake-up.
  [[noreturn]] static void held_leaked() noexcept;
  bool held_ = false;
};

class spin_gate {
 public:
  // find_runnable: t's M spins from now on (no limit here: the caller
  // decided; a no-op if it already spins).
  void join(spin_token& t) noexcept { (void)take(t, false); }
  // wakep, handoffp: the role, only if no M holds one (Go's CAS of
  // nmspinning from 0 to 1): one spinner at a time is woken.
  spin_token claim_if_none() noexcept {
    spin_token t;
    (void)take(t, true);
    return t;
  }
  // The one decrement. Returns whether t held the role.
  bool release(spin_token& t) noexcept {
    if (!t.held_) return false;
    t.held_ = false;
    n_.fetch_sub(1, std::memory_order_seq_cst);
    return true;
  }
  // How many Ms spin (seq_cst: wakep's side of the Dekker pair reads it).
  std::uint32_t count(std::memory_order o = std::memory_order_seq_cst) const noexcept { return n_.load(o); }
  // Times an M started spinning (runtime_stats::m_spins).
  std::uint64_t starts() const noexcept { return starts_.load(std::memory_order_relaxed); }

 private:
  // The one increment.
  bool take(spin_token& t, bool only_if_none) noexcept {
    if (t.held_) return true;
    if (only_if_none) {
      std::uint32_t zero = 0;
      if (n_.load(std::memory_order_relaxed) != 0 || !n_.compare_exchange_strong(zero, 1, std::memory_order_seq_cst))
        return false;
    } else {
      n_.fetch_add(1, std::memory_order_seq_cst);
    }
    t.held_ = true;
    starts_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  alignas(cache_line) std::atomic<std::uint32_t> n_{0};
  std::atomic<std::uint64_t> starts_{0};
};

// A test seam (test_seam.hpp): wakep
// calls it at 0 right after it took the role, and at 1 when it found no
// idle P after all, before it gives the role up (tests/wakeup_test.cpp
// makes the lost wake-up of that window happen on purpose).
// outside_ready_seam: ready() from outside the runtime calls it after
// queueing the goroutine, before its wakep (tests/runtime_test.cpp destroys
// the runtime in that window).
namespace testing {
inline test_seam<int> wakep_seam;
inline test_seam<> outside_ready_seam;
}  // namespace testing

inline void spin_token::held_leaked() noexcept {
  fatal("goro: internal error: an M's spinning role was dropped without being released");
}

}  // namespace goro::detail
