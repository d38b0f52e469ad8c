// The two blocking structures the sync primitives sit on, both built on
// park.hpp's waiter / block_on / wake (so goroutines park and plain threads
// sleep on a futex through the same code):
//
// - sema: a counting semaphore, Go's runtime semaphore (sema.go:
//   semacquire1 / semrelease1), used by mutex, rw_mutex, wait_group,
//   semaphore and net's io_lock (a token handed to the oldest waiter is
//   how mutex's starvation mode and io_lock hand over a lock).
// - notify_list: Go's notifyList (sema.go: notifyListAdd / notifyListWait /
//   notifyListNotifyOne / notifyListNotifyAll), used by cond.
//
// Unlike Go, where one global table of wait queues is keyed by address and
// the garbage collector keeps objects alive, each object here embeds its own
// queue, and C++ lets a sync object be destroyed as soon as its last user
// returns. So every operation runs entirely inside one hold of the object's
// spinlock, whose unlock is a single release store and the last access to
// the object, and waiters are woken only after that unlock (wake() touches
// the waiter record and the G, never the object). Hence: once a caller has
// returned from acquire()/wait(), no release()/notify that fed it touches
// the object again, and the caller may destroy it (wait_group on a stack).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "config.hpp"
#include "park.hpp"
#include "preempt.hpp"
#include "timed_park.hpp"
#include "spinlock.hpp"

namespace goro::detail {

// A counting semaphore whose tokens are handed directly to the oldest
// waiter. Invariant (under lock_): count_ > 0 implies queue_ is empty, since
// release() gives tokens to waiters before keeping any.
class sema {
 public:
  explicit sema(std::uint64_t initial = 0) noexcept : count_(initial) {}
  sema(const sema&) = delete;
  sema& operator=(const sema&) = delete;

  // semacquire: takes one token, blocking until a release() hands one over.
  // `lifo` queues the caller at the head: a mutex waiter that was woken but
  // lost the lock again keeps its place (Go's queueLifo). unlinked(ctx):
  // see block_on (a runtime destroyed while the caller waits for good).
  // `why`: what the goroutine dump shows while the caller waits.
  GORO_DECL void acquire(bool lifo = false, void (*unlinked)(void*) noexcept = nullptr, void* ctx = nullptr,
               wait_reason why = wait_reason::semacquire) noexcept;

  // acquire() giving up at the nanotime() `when`: false if it did (no
  // token taken).
  GORO_DECL bool acquire_until(std::int64_t when, void (*unlinked)(void*) noexcept = nullptr, void* ctx = nullptr,
                               wait_reason why = wait_reason::semacquire) noexcept;

  // Takes one token if one is available now.
  bool try_acquire() noexcept {
    lock_.lock();
    const bool ok = count_ > 0;
    if (ok) --count_;
    lock_.unlock();
    return ok;
  }

  // semrelease: adds n tokens; each goes to the oldest waiter first (woken in
  // FIFO order after the lock is released), the rest are kept.
  GORO_DECL void release(std::uint64_t n = 1) noexcept;

 private:
  static bool unlink_waiter(void* q, waiter* w) noexcept {
    return static_cast<waiter_queue*>(q)->remove_first_if([w](const waiter* x) { return x == w; }) != nullptr;
  }

  spinlock lock_;
  std::uint64_t count_;  // tokens not yet taken (guarded by lock_)
  waiter_queue queue_;   // blocked acquirers (guarded by lock_)
};

// A ticket-based notify list: a notify wakes only waiters that took their
// ticket (add()) before it, so a goroutine that starts waiting after a
// notify_one cannot steal that wake-up from an earlier waiter.
//
// wait_ is the next ticket to hand out; notify_ the next ticket to notify.
// Tickets t with less(t, notify_) have been notified. Both are uint32 and
// compared modulo 2^32 (as Go does), so they may wrap.
class notify_list {
 public:
  notify_list() = default;
  notify_list(const notify_list&) = delete;
  notify_list& operator=(const notify_list&) = delete;

  // notifyListAdd: takes a ticket. Called with the user's lock held, before
  // releasing it: a notifier that takes that lock afterwards sees the
  // increment (the lock orders them), so it cannot miss this waiter.
  std::uint32_t add() noexcept { return wait_.fetch_add(1, std::memory_order_acq_rel); }

  // notifyListWait: blocks until ticket t was notified (returns at once if it
  // already was, between add() and here).
  GORO_DECL void wait(std::uint32_t t) noexcept;

  // wait(t) giving up at the nanotime() `when`: false if it did. A waiter
  // that gives up leaves its ticket in abandoned_, so that notify_one
  // passes over it to the next waiter instead of spending itself on it.
  GORO_DECL bool wait_until(std::uint32_t t, std::int64_t when) noexcept;

  // notifyListNotifyOne: wakes the waiter holding the oldest unnotified
  // ticket. If it has not queued yet, it will see its ticket notified in
  // wait() and not block.
  GORO_DECL void notify_one() noexcept;

  // notifyListNotifyAll: wakes every waiter that took a ticket so far.
  GORO_DECL void notify_all() noexcept;

 private:
  static bool less(std::uint32_t a, std::uint32_t b) noexcept { return static_cast<std::int32_t>(a - b) < 0; }
  static bool later(std::uint32_t a, std::uint32_t b) noexcept { return less(b, a); }  // abandoned_'s heap order

  // Under lock_: the unnotified ticket t will never be waited for.
  void abandon_locked(std::uint32_t t) {
    abandoned_.push_back(t);
    std::push_heap(abandoned_.begin(), abandoned_.end(), later);
    skip_abandoned_locked();
  }
  // Under lock_: passes notify_ over the abandoned tickets at its head, as
  // notify_one would, so that the oldest unnotified ticket is never an
  // abandoned one. Otherwise a poller's timed-out waits pile up there and
  // the next notify_one walks them all under the lock (each find and erase
  // linear: 300k timed-out waits cost one notify_one 4.6 s).
  void skip_abandoned_locked() noexcept {
    std::uint32_t n = notify_.load(std::memory_order_relaxed);
    if (abandoned_.empty() || abandoned_.front() != n) return;
    do {
      std::pop_heap(abandoned_.begin(), abandoned_.end(), later);
      abandoned_.pop_back();
      ++n;
    } while (!abandoned_.empty() && abandoned_.front() == n);
    notify_.store(n, std::memory_order_release);
  }

  std::atomic<std::uint32_t> wait_{0};
  std::atomic<std::uint32_t> notify_{0};  // written under lock_ only
  spinlock lock_;
  waiter_queue queue_;                   // guarded by lock_
  // Unnotified tickets of timed-out waiters, a min-heap in ticket order
  // (all are after notify_, so less() orders them; guarded by lock_).
  std::vector<std::uint32_t> abandoned_;
};

}  // namespace goro::detail

#if GORO_COMPILE_RUNTIME
namespace goro::detail {

GORO_DECL void sema::acquire(bool lifo, void (*unlinked)(void*) noexcept, void* ctx,
             wait_reason why) noexcept {
  safe_point();  // a runtime call that can switch (detail/preempt.hpp)
  lock_.lock();
  if (count_ > 0) {
    --count_;
    lock_.unlock();
    return;
  }
  waiter w;
  if (lifo)
    queue_.push_front(&w);
  else
    queue_.push_back(&w);
  block_on(w, queue_, lock_, why, unlinked, ctx);
  // release() dequeued us and the token is ours: nothing left to do, and
  // nothing here touches *this again.
}

GORO_DECL bool sema::acquire_until(std::int64_t when, void (*unlinked)(void*) noexcept, void* ctx,
                                   wait_reason why) noexcept {
  lock_.lock();
  if (count_ > 0) {
    --count_;
    lock_.unlock();
    return true;
  }
  if (when <= nanotime()) {
    lock_.unlock();
    return false;
  }
  waiter w;
  queue_.push_back(&w);
  return block_on_until(w, lock_, when, &unlink_waiter, &queue_, unlinked, ctx, why);
}

GORO_DECL void sema::release(std::uint64_t n) noexcept {
  waiter* woken = nullptr;
  waiter** tail = &woken;
  lock_.lock();
  for (; n > 0; --n) {
    waiter* w = queue_.pop_front();
    if (!w) break;
    *tail = w;
    tail = &w->next;
  }
  count_ += n;
  lock_.unlock();  // last access to *this
  wake_list(woken);
}

GORO_DECL void notify_list::wait(std::uint32_t t) noexcept {
  safe_point();
  lock_.lock();
  if (less(t, notify_.load(std::memory_order_relaxed))) {
    lock_.unlock();
    return;
  }
  waiter w;
  w.ticket = t;
  queue_.push_back(&w);
  // Taken off the queue unwoken (main_return.hpp, or a runtime destroyed
  // meanwhile): the ticket is abandoned, as a timed-out wait_until's, so
  // that a notify_one passes over it.
  struct ticket_of {
    notify_list* self;
    std::uint32_t t;
  } at{this, t};
  block_on(w, queue_, lock_, wait_reason::cond_wait, [](void* a) noexcept {
    auto* x = static_cast<ticket_of*>(a);
    x->self->lock_.lock();
    if (!less(x->t, x->self->notify_.load(std::memory_order_relaxed))) x->self->abandon_locked(x->t);
    x->self->lock_.unlock();
  }, &at);
}

GORO_DECL bool notify_list::wait_until(std::uint32_t t, std::int64_t when) noexcept {
  lock_.lock();
  if (less(t, notify_.load(std::memory_order_relaxed))) {
    lock_.unlock();
    return true;
  }
  if (when <= nanotime()) {
    // Gives up without queueing: the ticket is abandoned as a timed-out
    // waiter's, or a later notify_one would spend itself on it (it would
    // take this waiter for one yet to reach wait) and wake nobody.
    abandon_locked(t);
    lock_.unlock();
    return false;
  }
  waiter w;
  w.ticket = t;
  queue_.push_back(&w);
  return block_on_until(
      w, lock_, when,
      [](void* self, waiter* x) noexcept {
        auto* nl = static_cast<notify_list*>(self);
        if (!nl->queue_.remove_first_if([x](const waiter* y) { return y == x; })) return false;
        nl->abandon_locked(x->ticket);
        return true;
      },
      this, nullptr, nullptr, wait_reason::cond_wait);
}

GORO_DECL void notify_list::notify_one() noexcept {
  // Fast path: nobody waiting since the last notify. A waiter whose add()
  // is not visible yet is concurrent with this notify (it did not hold
  // the lock before us), and missing it is allowed.
  if (wait_.load(std::memory_order_acquire) == notify_.load(std::memory_order_acquire)) return;
  lock_.lock();
  waiter* w = nullptr;
  // The oldest unnotified ticket is never an abandoned one (abandon_locked
  // passes over those): it is queued, or has yet to reach wait() and will
  // find itself notified there.
  if (const std::uint32_t t = notify_.load(std::memory_order_relaxed); t != wait_.load(std::memory_order_acquire)) {
    notify_.store(t + 1, std::memory_order_release);
    w = queue_.remove_first_if([t](const waiter* x) { return x->ticket == t; });
    skip_abandoned_locked();
  }
  lock_.unlock();  // last access to *this
  if (w) wake(w);
}

GORO_DECL void notify_list::notify_all() noexcept {
  if (wait_.load(std::memory_order_acquire) == notify_.load(std::memory_order_acquire)) return;
  lock_.lock();
  // Every queued waiter took its ticket before queueing under lock_, so
  // this read of wait_ covers all of them: take_all() takes only notified
  // waiters.
  notify_.store(wait_.load(std::memory_order_acquire), std::memory_order_release);
  abandoned_.clear();
  waiter* list = queue_.take_all();
  lock_.unlock();  // last access to *this
  wake_list(list);
}

}  // namespace goro::detail
#endif  // GORO_COMPILE_RUNTIME
