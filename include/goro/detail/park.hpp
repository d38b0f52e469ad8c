// Blocking on a queue, for goroutines and plain threads alike: the one
// waiter queue and block/wake protocol that channels (chan.hpp, select.hpp)
// and the sync primitives (sema.hpp, timed_park.hpp, net's io_lock) share.
//
// A blocked party puts a waiter record, on its own stack, on a queue
// guarded by the owner's lock, then blocks: a goroutine parks (its M runs
// other goroutines), a plain thread sleeps on a futex word. A waker takes
// the record off under the same lock, does its part of the hand-off there
// (a value copied, a token or a lock handed over), releases the lock and
// only then wakes the record's party (never ready a G while holding a lock;
// DESIGN.md section 5).
//
// Why no wake-up is lost -- publish, then check, on both sides:
//   - goroutine: the record is published (queued) under the lock, and the
//     lock is released by g0 only after the goroutine is off its stack
//     (park's unlock step). A waker, which needs the lock to find the
//     record, therefore readies a G that has finished switching out: it
//     cannot run on its stack twice.
//   - plain thread: the waker stores the futex word (release), then calls
//     os::futex_wake; the sleeper re-checks the word (acquire) before each
//     os::futex_wait, which itself re-checks it against 0 atomically. Either the
//     sleeper sees 1, or its futex_wait sees 1 and returns, or it is asleep
//     when the wake arrives. The acquire load also carries the waker's
//     writes under the lock (the handed-over value) to the sleeper.
// After wake() the waker must not touch the record: its owner may have
// returned.
#pragma once

#include <atomic>
#include <mutex>
#include <cstdint>

#include "extm.hpp"
#include "../os/os.hpp"
#include "g.hpp"
#include "m.hpp"
#include "spinlock.hpp"

namespace goro::detail {

// A sync object's waiter record (sema, notify_list, io_lock). Channels use
// chan_waiter (chan.hpp); both live on queues of type waitq.
// The goroutine that a wait from here parks, or nullptr where the caller
// waits as a thread: a plain thread, or a goroutine inside goro::blocking
// (its M has no P to hand on; the calls that must not wait there raise
// before queueing, inside_blocking.hpp, and net's io_lock waits as a
// thread, as net's waits do).
inline g* parking_g() noexcept {
  m_base* m = current_m();
  return m && !m->in_blocking ? m->curg : nullptr;
}

struct waiter {
  g* gp = parking_g();  // nullptr: the caller sleeps on `woken`
  std::atomic<std::uint32_t> woken{0};
  waiter* next = nullptr;
  waiter* prev = nullptr;
  std::uint32_t ticket = 0;  // cond's notify list: the wait ticket (guarded by the queue's lock)
  // g::unlink_wait once the queue is destroyed under it (see ~waitq).
  static constexpr bool orphanable() noexcept { return true; }
};

// A FIFO of waiter records W (members gp, next, prev, and orphanable()),
// doubly linked, guarded by its owner's lock. `first_` is atomic only so
// that lock-free "would it block?" checks (chan's try_send / try_recv) may
// read it; every write happens under the lock. A popped or removed record
// has next == prev == nullptr; take_all() leaves its records linked through
// next (the detached list), so remove() must not be called on them.
template <class W>
class waitq {
 public:
  waitq() = default;
  waitq(const waitq&) = delete;
  waitq& operator=(const waitq&) = delete;
  // An object destroyed while goroutines still wait on it (they wait for
  // good: nothing can reach the object to wake them). A runtime's shutdown
  // must not unlink them from it later (g::unlink_wait, sched.hpp
  // unlink_blocked): the memory is gone.
  // main_return (main_return.hpp): such a goroutine can still be ended,
  // with nothing left to unlink (orphaned_wait) -- unless its record is not
  // orphanable() (a select, whose other channels it cannot reach safely).
  // unlink_lock: the runtime may be calling its unlink_wait.
  ~waitq() {
    W* w = first_.load(std::memory_order_relaxed);
    if (!w) return;
    std::lock_guard<std::mutex> lk(unlink_lock());
    for (; w; w = w->next)
      if (w->gp) w->gp->unlink_wait = w->orphanable() ? &orphaned_wait : nullptr;
  }

  bool empty() const noexcept { return first_.load(std::memory_order_relaxed) == nullptr; }

  void push_back(W* w) noexcept {
    w->next = nullptr;
    w->prev = last_;
    if (last_)
      last_->next = w;
    else
      first_.store(w, std::memory_order_relaxed);
    last_ = w;
  }
  // Re-queues a waiter that was woken but lost the race again (Go's
  // queueLifo): it keeps its place at the head.
  void push_front(W* w) noexcept {
    W* f = first_.load(std::memory_order_relaxed);
    w->prev = nullptr;
    w->next = f;
    if (f)
      f->prev = w;
    else
      last_ = w;
    first_.store(w, std::memory_order_relaxed);
  }
  W* pop_front() noexcept {
    W* w = first_.load(std::memory_order_relaxed);
    if (!w) return nullptr;
    W* y = w->next;
    first_.store(y, std::memory_order_relaxed);
    if (y)
      y->prev = nullptr;
    else
      last_ = nullptr;
    w->next = nullptr;
    return w;
  }
  // Go's dequeueSudoG: removes w if it is still queued; true if it was.
  // w must be queued here, popped or removed (not on a take_all() list).
  bool remove(W* w) noexcept {
    W* x = w->prev;
    W* y = w->next;
    if (x) {
      x->next = y;
      if (y)
        y->prev = x;
      else
        last_ = x;
    } else if (y) {
      y->prev = nullptr;
      first_.store(y, std::memory_order_relaxed);
    } else if (first_.load(std::memory_order_relaxed) == w) {
      first_.store(nullptr, std::memory_order_relaxed);
      last_ = nullptr;
    } else {
      return false;
    }
    w->next = w->prev = nullptr;
    return true;
  }
  // Unlinks and returns the first waiter with pred(w), or nullptr. Safe
  // for any w (it searches): the unlink of a record that may sit on a
  // take_all() list uses this with pred "is w".
  template <class Pred>
  W* remove_first_if(Pred pred) noexcept {
    for (W* w = first_.load(std::memory_order_relaxed); w; w = w->next) {
      if (!pred(w)) continue;
      remove(w);
      return w;
    }
    return nullptr;
  }
  // Detaches the whole queue as a nullptr-terminated list (through next).
  W* take_all() noexcept {
    W* w = first_.load(std::memory_order_relaxed);
    first_.store(nullptr, std::memory_order_relaxed);
    last_ = nullptr;
    return w;
  }

 private:
  std::atomic<W*> first_{nullptr};
  W* last_ = nullptr;
};

using waiter_queue = waitq<waiter>;

inline bool unlock_spinlock(void* l) noexcept {
  static_cast<spinlock*>(l)->unlock();
  return true;
}

// The protocol's blocking half. Blocks the caller (gp, or nullptr on a
// plain thread; m is current_m(), read once by the caller: it is a
// non-inlined call) until wake(gp, word). `unlock(arg)` releases the
// lock(s) the caller holds with its record(s) queued: from g0 once the
// goroutine is off its stack, or just before a thread sleeps.
// `unlink(unlink_arg)` takes the caller's record(s) off their queues and
// says whether it did (g::unlink_wait: a runtime destroyed while the
// goroutine waits for good, or main_return ending it). `why`: what the
// goroutine dump shows.
// A plain thread's side of block(): out of line, the goroutine side is
// the hot one.
GORO_NOINLINE inline void block_thread(m_base* m, std::atomic<std::uint32_t>& word, bool (*unlock)(void*),
                                       void* arg) noexcept {
  extm_outside_op(m);  // checkdead: a plain thread blocked on a goro object is a live external M
  unlock(arg);
  while (word.load(std::memory_order_acquire) == 0) os::futex_wait(&word, 0);
}

// Always inlined into the channel and sync operations: a call here, and
// GCC's choice of what to inline around it, cost a channel round trip
// ~5% of its instructions (benchmark pingpong, callgrind).
GORO_ALWAYS_INLINE void block(m_base* m, g* gp, std::atomic<std::uint32_t>& word, bool (*unlock)(void*), void* arg,
                              bool (*unlink)(void*) noexcept, void* unlink_arg, wait_reason why) noexcept {
  if (GORO_LIKELY(gp != nullptr)) {
    gp->unlink_wait = unlink;
    gp->unlink_arg = unlink_arg;
    park(m, unlock, arg, why);
    gp->unlink_wait = nullptr;
  } else {
    block_thread(m, word, unlock, arg);
  }
}

// The protocol's waking half: wakes the party that blocked with (gp,
// word), after every lock is released. The woken goroutine goes to the
// waker's runnext and inherits its time slice.
inline void wake(g* gp, std::atomic<std::uint32_t>& word) noexcept {
  if (gp) {
    gp->sched->ready(gp);
  } else {
    word.store(1, std::memory_order_release);
    os::futex_wake(&word, 1);  // harmless if the thread already returned
  }
}

// Blocks the caller, already queued as `w` in `q` with `lock` held, until
// wake(w). Releases `lock`. A runtime destroyed while the goroutine waits
// here for good takes w off q (g::unlink_wait), then calls
// unlinked(ctx) if given: the owner undoes its own count of waiters.
// `why`: what the goroutine dump shows.
inline void block_on(waiter& w, waiter_queue& q, spinlock& lock, wait_reason why,
                     void (*unlinked)(void*) noexcept = nullptr, void* ctx = nullptr) noexcept {
  GORO_CHAOS_POINT("waiter.block");
  struct queued {
    waiter* w;
    waiter_queue* q;
    spinlock* lock;
    void (*unlinked)(void*) noexcept;
    void* ctx;
  } at{&w, &q, &lock, unlinked, ctx};
  block(
      current_m(), w.gp, w.woken, unlock_spinlock, &lock,
      [](void* a) noexcept {
        auto* x = static_cast<queued*>(a);
        x->lock->lock();
        waiter* found = x->q->remove_first_if([x](const waiter* y) { return y == x->w; });
        x->lock->unlock();
        if (found && x->unlinked) x->unlinked(x->ctx);
        return found != nullptr;
      },
      &at, why);
}

// Wakes a waiter detached from its queue. After this call w may be gone.
inline void wake(waiter* w) noexcept {
  GORO_CHAOS_POINT("waiter.wake");
  wake(w->gp, w->woken);
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
