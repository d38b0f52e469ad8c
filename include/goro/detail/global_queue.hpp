// The global run queue (Go's sched.runq): an intrusive FIFO of Gs linked
// through g::link, guarded by the scheduler lock. Its size is also kept in
// an atomic so find-runnable can skip the lock when it is empty.
#pragma once

#include <atomic>
#include <cstdint>

#include "g.hpp"

namespace goro::detail {

class global_run_queue {
 public:
  // All mutators: scheduler lock held.
  void push_back(g* gp) noexcept {
    gp->link = nullptr;
    if (tail_)
      tail_->link = gp;
    else
      head_ = gp;
    tail_ = gp;
    size_.store(size_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  void push_back_batch(g* const* batch, std::uint32_t n) noexcept {
    for (std::uint32_t i = 0; i < n; ++i) push_back(batch[i]);
  }
  g* pop_front() noexcept {
    g* gp = head_;
    if (!gp) return nullptr;
    head_ = gp->link;
    if (!head_) tail_ = nullptr;
    gp->link = nullptr;
    size_.store(size_.load(std::memory_order_relaxed) - 1, std::memory_order_release);
    return gp;
  }
  // Lock-free hint; exact under the scheduler lock.
  std::uint32_t size() const noexcept { return size_.load(std::memory_order_acquire); }
  bool empty() const noexcept { return size() == 0; }

 private:
  g* head_ = nullptr;
  g* tail_ = nullptr;
  std::atomic<std::uint32_t> size_{0};
};

}  // namespace goro::detail
