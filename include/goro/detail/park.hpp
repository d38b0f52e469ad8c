// One way to block, for goroutines and plain threads alike: a waiter
// record on the blocked party's stack, queued under a sync object's
// spinlock. A goroutine parks (its M runs other goroutines; the lock is
// released by g0 once the goroutine is off its stack); a plain thread
// sleeps on a futex in the record. Wakers detach waiters under the lock
// and wake them after releasing it (never ready a G while holding a lock).
// sema.hpp builds the sync primitives' semaphore and notify list on this.
#pragma once

#include <atomic>
#include <mutex>
#include <cstdint>

#include "extm.hpp"
#include "futex.hpp"
#include "g.hpp"
#include "m.hpp"
#include "spinlock.hpp"

namespace goro::detail {

struct waiter {
  g* gp = current_g();  // nullptr: a plain thread
  std::atomic<std::uint32_t> woken{0};
  waiter* next = nullptr;
  std::uint32_t ticket = 0;  // cond's notify list: the wait ticket (guarded by the queue's lock)
};

// FIFO of waiters (guarded by the owner's spinlock).
class waiter_queue {
 public:
  waiter_queue() = default;
  waiter_queue(const waiter_queue&) = delete;
  waiter_queue& operator=(const waiter_queue&) = delete;
  // An object destroyed while goroutines still wait on it (they wait for
  // good: nothing can reach the object to wake them). A runtime's shutdown
  // must not unlink them from it later (g::unlink_wait, sched.hpp
  // unlink_blocked): the memory is gone.
  // main_return (main_return.hpp): such a goroutine can still be ended,
  // with nothing left to unlink (orphaned_wait); unlink_lock: the runtime
  // may be calling its unlink_wait.
  ~waiter_queue() {
    if (!head_) return;
    std::lock_guard<std::mutex> lk(unlink_lock());
    for (waiter* w = head_; w; w = w->next)
      if (w->gp) w->gp->unlink_wait = &orphaned_wait;
  }
  void push_back(waiter* w) noexcept {
    w->next = nullptr;
    if (tail_)
      tail_->next = w;
    else
      head_ = w;
    tail_ = w;
  }
  // Re-queues a waiter that was woken but lost the race again (Go's
  // queueLifo): it keeps its place at the head.
  void push_front(waiter* w) noexcept {
    w->next = head_;
    head_ = w;
    if (!tail_) tail_ = w;
  }
  waiter* pop_front() noexcept {
    waiter* w = head_;
    if (w) {
      head_ = w->next;
      if (!head_) tail_ = nullptr;
      w->next = nullptr;
    }
    return w;
  }
  // Unlinks and returns the first waiter with pred(w), or nullptr.
  template <class Pred>
  waiter* remove_first_if(Pred pred) noexcept {
    waiter* prev = nullptr;
    for (waiter* w = head_; w; prev = w, w = w->next) {
      if (!pred(w)) continue;
      (prev ? prev->next : head_) = w->next;
      if (tail_ == w) tail_ = prev;
      w->next = nullptr;
      return w;
    }
    return nullptr;
  }
  // Detaches the whole queue as a nullptr-terminated list.
  waiter* take_all() noexcept {
    waiter* w = head_;
    head_ = tail_ = nullptr;
    return w;
  }
  bool empty() const noexcept { return head_ == nullptr; }

 private:
  waiter* head_ = nullptr;
  waiter* tail_ = nullptr;
};

// Blocks the caller, already queued as `w` in `q` with `lock` held, until
// wake(w). Releases `lock`. A runtime destroyed while the goroutine waits
// here for good takes w off q (g::unlink_wait), then calls
// unlinked(ctx) if given: the owner undoes its own count of waiters.
// `why`: what the goroutine dump shows.
inline void block_on(waiter& w, waiter_queue& q, spinlock& lock, wait_reason why,
                     void (*unlinked)(void*) noexcept = nullptr, void* ctx = nullptr) noexcept {
  GORO_CHAOS_POINT("waiter.block");
  if (g* gp = w.gp) {
    struct queued {
      waiter* w;
      waiter_queue* q;
      spinlock* lock;
      void (*unlinked)(void*) noexcept;
      void* ctx;
    } at{&w, &q, &lock, unlinked, ctx};
    gp->unlink_wait = [](void* a) noexcept {
      auto* x = static_cast<queued*>(a);
      x->lock->lock();
      waiter* found = x->q->remove_first_if([x](const waiter* y) { return y == x->w; });
      x->lock->unlock();
      if (found && x->unlinked) x->unlinked(x->ctx);
      return found != nullptr;
    };
    gp->unlink_arg = &at;
    park(current_m(), [](void* l) {
      static_cast<spinlock*>(l)->unlock();
      return true;
    }, &lock, why);
    gp->unlink_wait = nullptr;
  } else {
    extm_outside_op();  // checkdead: a plain thread blocked on a goro object is a live external M
    lock.unlock();
    while (w.woken.load(std::memory_order_acquire) == 0) futex_wait(&w.woken, 0);
  }
}

// Wakes a waiter detached from its queue. After this call w may be gone.
inline void wake(waiter* w) noexcept {
  GORO_CHAOS_POINT("waiter.wake");
  if (g* gp = w->gp) {
    gp->sched->ready(gp);
  } else {
    w->woken.store(1, std::memory_order_release);
    futex_wake(&w->woken, 1);  // harmless if the thread already returned
  }
}

// Wakes every waiter of a detached list (linked through next).
inline void wake_list(waiter* w) noexcept {
  while (w) {
    waiter* next = w->next;  // read before the wake: w may be gone after it
    wake(w);
    w = next;
  }
}

}  // namespace goro::detail
