// Synchronisation primitives that work from goroutines (which park) and
// from plain threads (which block).
#pragma once

#include <atomic>
#include <cstdint>

#include "detail/park.hpp"
#include "detail/spinlock.hpp"
#include "error.hpp"

namespace goro {

// Go's sync.WaitGroup. It may live on the waiter's stack: once the counter
// reaches zero with nobody waiting, done() touches nothing more, and with
// waiters registered it finishes with the object (one release store)
// before any of them can return.
class wait_group {
 public:
  wait_group() = default;
  wait_group(const wait_group&) = delete;
  wait_group& operator=(const wait_group&) = delete;

  void add(std::int64_t delta) {
    const std::uint64_t d = static_cast<std::uint64_t>(delta) << 32;
    const std::uint64_t s = state_.fetch_add(d, std::memory_order_acq_rel) + d;
    const auto v = static_cast<std::int32_t>(s >> 32);
    const auto w = static_cast<std::uint32_t>(s);
    if (v < 0) {
      state_.fetch_sub(d, std::memory_order_acq_rel);
      detail::raise_usage("wait_group counter went negative");
    }
    if (v > 0 || w == 0) return;  // no further access to *this
    // v == 0 with w registered waiters: none can return before it gets a
    // token or is woken below, so *this stays alive until our unlock.
    state_.store(0, std::memory_order_relaxed);
    detail::waiter* woken = nullptr;
    lock_.lock();
    std::uint32_t n = w;
    while (n > 0) {
      detail::waiter* x = queue_.pop_front();
      if (!x) break;
      x->next = woken;
      woken = x;
      --n;
    }
    tokens_ += n;  // registered but not queued yet: they take a token
    lock_.unlock();
    while (woken) {
      detail::waiter* next = woken->next;
      detail::wake(woken);
      woken = next;
    }
  }

  void done() { add(-1); }

  void wait() {
    std::uint64_t s = state_.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<std::int32_t>(s >> 32) == 0) return;
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) break;
    }
    lock_.lock();
    if (tokens_ > 0) {
      --tokens_;
      lock_.unlock();
      return;
    }
    detail::waiter w;
    queue_.push_back(&w);
    detail::block_on(w, lock_);
  }

 private:
  std::atomic<std::uint64_t> state_{0};  // counter in the high half, waiters in the low
  detail::spinlock lock_;
  std::uint32_t tokens_ = 0;
  detail::waiter_queue queue_;
};

}  // namespace goro
