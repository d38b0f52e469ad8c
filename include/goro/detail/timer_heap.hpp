// Timers: the record a timer is made of, and the per-P heap that holds
// them (Go's per-P timer heap, src/runtime/time.go of Go 1.14-1.22:
// addtimer / deltimer / modtimer / runtimer, checkTimers in proc.go).
//
// Simpler than Go's status machine, same guarantees:
//  - A timer is on at most one heap at a time. `where` names that heap and
//    is only written with that heap's lock held. A heap never hands its
//    timers to another heap: a timer stays where it was added until it
//    fires or is deleted; other Ms *run* an idle P's expired timers instead
//    of moving them (Go's stealWork runs other Ps' timers too).
//  - Timer functions run on a scheduler context (g0) with no lock held;
//    they must be short and never block (ready a G, a non-blocking send).
//  - A timer that may be deleted or modified while it fires is `sync`: the
//    runner counts it `running` (under the heap lock) before calling its
//    function and uncounts it afterwards; del / mod wait for the count to
//    drop to zero (Go's timerRunning: deltimer and modtimer osyield until it
//    changes). So once del() returns, the function is not running and will
//    not run: the timer's owner may free what the function uses. A timer
//    that is not `sync` (a sleeping goroutine's) is never touched by the
//    runner after its function was called: the function may end the
//    timer's lifetime (the woken goroutine returns and its frame is gone).
//  - A sync timer's function may itself end its timer's life: del() called
//    from inside it, directly or from a destructor it sets off (a context
//    whose deadline timer drops the last reference to that context), does
//    not wait for the call it is part of, releases that call's `running`
//    count as its last touch of the timer, and the runner then touches the
//    timer no more.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

#include "../os/os.hpp"
#include "chaos.hpp"
#include "config.hpp"
#include "memory.hpp"
#include "spinlock.hpp"
#include "test_seam.hpp"

namespace goro::detail {

// Nanoseconds on std::chrono::steady_clock; timers' `when`. 0 means "none",
// so real instants are clamped to >= 1.
inline std::int64_t nanotime() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// when = now + d, saturating (a huge duration is "never", not an overflow).
inline std::int64_t when_after(std::int64_t now, std::int64_t d) noexcept {
  if (d <= 0) return now < 1 ? 1 : now;
  std::int64_t w = now + d;
  if (w < now) w = INT64_MAX;  // wrapped
  return w < 1 ? 1 : w;
}

class timer_heap;
struct timer;

// del() in flight, counted in stripes (one per thread, by a thread's
// index; no allocation, no line shared by every thread). del reads
// t->where, then locks that heap: a thread descheduled in between (a plain
// thread stopping a timer, another runtime's goroutine resetting a
// deadline) while the runtime whose P held that heap ends would lock
// freed memory. So del counts itself before reading `where` and uncounts
// after its last touch of the heap, and a runtime that ends, once no
// timer names its heaps (clear(); fired timers long before), waits to see
// every stripe at zero before freeing them (wait_stale_dels).
//
// Publish, then check: del's increment, then its read of `where`, both
// seq_cst; the runtime's stores of nullptr to `where` (clear, run_due:
// release, by its own Ms, joined before), then a seq_cst fence, then its
// reads of the stripes. A del that read a heap of the runtime read it
// before that nullptr store, so its increment precedes the fence in the
// single total order: the runtime sees it (or its decrement) and waits;
// one whose increment it does not see reads nullptr or another heap.
struct alignas(64) del_stripe {
  std::atomic<std::uint32_t> n{0};
};
inline constexpr unsigned del_stripes = 16;
inline del_stripe del_in_flight[del_stripes];
inline std::atomic<std::uint32_t>& my_del_stripe() noexcept {
  static std::atomic<unsigned> next{0};
  thread_local const unsigned i = next.fetch_add(1, std::memory_order_relaxed) % del_stripes;
  return del_in_flight[i].n;
}

// A test seam (test_seam.hpp): del calls it between reading a
// heap from `where` and locking it (tests/after_func_test.cpp holds a
// plain thread's stop there while the timer's runtime ends).
namespace testing {
inline test_seam<> timer_del_seam;
}  // namespace testing

// The sync timer whose function runs on this thread (run_due), and whether
// del() from inside that function already released its `running` count.
struct running_timer_slot {
  timer* t = nullptr;
  bool released = false;
};
inline thread_local running_timer_slot tls_running_timer;

struct timer {
  // Called with (arg, seq, now) when the timer fires; no lock is held.
  using func = void (*)(void* arg, std::uintptr_t seq, std::int64_t now);

  // Fields guarded by the lock of the heap the timer is on (or owned by the
  // timer's user while it is on none).
  std::int64_t when = 0;    // fires at this nanotime()
  std::int64_t period = 0;  // > 0: re-arms itself every period ns (ticker)
  func f = nullptr;
  func drop = nullptr;  // if set, called instead when the runtime ends with t unfired (frees a one-shot)
  void* arg = nullptr;
  std::uintptr_t seq = 0;   // passed to f; the owner's generation counter, say
  std::uint32_t index = 0;  // position in the heap's array
  bool sync = false;        // del/mod wait for a running f (see the top of this file)

  std::atomic<timer_heap*> where{nullptr};
  std::atomic<std::uint32_t> running{0};  // calls of f in progress (sync timers only)
};

// A 4-ary min-heap of timers ordered by `when`, with its own lock. Go uses
// a 4-ary heap too: shallower than a binary one, and the four children of
// a node share a cache line of the array.
class timer_heap {
 public:
  timer_heap() = default;
  timer_heap(const timer_heap&) = delete;
  timer_heap& operator=(const timer_heap&) = delete;
  // The runtime's allocator (memory.hpp) for the heap's array; set while
  // the heap is empty (a P's heap, when the P record is made).
  void set_memory(runtime_memory* m) noexcept { heap_ = decltype(heap_)(memory_allocator<timer*>(m)); }
  // f(arg) is called, with no lock held, by a del() that took the heap's
  // last timer (set once, before any add). The process-wide timer thread
  // (time.hpp) uses it: it counts as an external M while timers are
  // pending, and slept until the deleted timer's instant, so a stopped
  // timer(1h) kept every runtime's deadlock detection off for an hour.
  void on_emptied(void (*f)(void*), void* arg) noexcept {
    emptied_ = f;
    emptied_arg_ = arg;
  }

  // The earliest `when` on this heap, 0 if empty. Read without the lock by
  // anyone deciding whether to look closer (Go's timer0When); written with
  // the lock held after every change to the top. seq_cst: see the
  // scheduler's comment on how an M going to sleep and a timer being added
  // each see the other.
  std::int64_t earliest() const noexcept { return when0_.load(std::memory_order_seq_cst); }
  std::size_t size() const noexcept { return count_.load(std::memory_order_relaxed); }
  // earliest() read under the lock: ordered against every add / del.
  std::int64_t earliest_locked() noexcept {
    std::lock_guard<spinlock> lk(lock_);
    return heap_.empty() ? 0 : heap_[0]->when;
  }

  // addtimer: queues t (on no heap, not running) to fire at t->when.
  // Returns true if t became this heap's earliest timer.
  // The array may grow: a bad_alloc leaves the heap unchanged and unlocked.
  GORO_DECL bool add(timer* t);

  // runtimer loop: runs every timer due at `now`, the lock released around
  // each function. Returns the earliest pending `when` afterwards (0: none).
  GORO_DECL std::int64_t run_due(std::int64_t now) noexcept;

  // Removes every timer (shutdown): later del() calls find them on no heap;
  // those with a `drop` function get it called.
  GORO_DECL void clear() noexcept;

  // deltimer: takes t off whatever heap it is on. Returns true if it was
  // pending (so it will now never fire), false if it had fired (or was
  // never added). Waits for a sync timer's running function to finish.
  GORO_DECL static bool del(timer* t) noexcept;

  // Before the memory of heaps is freed (a runtime's end, once clear() has
  // taken every timer off them and nothing adds to them any more): waits
  // until no del() that may have read one of them from a timer's `where`
  // is still to lock it. See del_stripes.
  GORO_DECL static void wait_stale_dels() noexcept;

 private:
  // Waits until at most `own` runs of t's function are in progress (own:
  // 1 when called from inside it, see del).
  GORO_DECL static void wait_running_at_most(timer* t, std::uint32_t own) noexcept;

  GORO_DECL bool push_locked(timer* t);

  GORO_DECL void remove_at(std::uint32_t i) noexcept;

  void publish_earliest() noexcept { when0_.store(heap_.empty() ? 0 : heap_[0]->when, std::memory_order_seq_cst); }

  void place(std::uint32_t i, timer* t) noexcept {
    heap_[i] = t;
    t->index = i;
  }

  GORO_DECL void sift_up(std::uint32_t i) noexcept;

  GORO_DECL void sift_down(std::uint32_t i) noexcept;

  spinlock lock_;
  std::vector<timer*, memory_allocator<timer*>> heap_;
  std::atomic<std::int64_t> when0_{0};
  std::atomic<std::size_t> count_{0};
  void (*emptied_)(void*) = nullptr;
  void* emptied_arg_ = nullptr;
};

}  // namespace goro::detail

#if GORO_COMPILE_RUNTIME
namespace goro::detail {

GORO_DECL bool timer_heap::add(timer* t) {
  GORO_CHAOS_POINT("timer.add");
  bool first;
  {
    std::lock_guard<spinlock> lk(lock_);
    first = push_locked(t);
  }
  GORO_CHAOS_POINT("timer.added");
  return first;
}

GORO_DECL std::int64_t timer_heap::run_due(std::int64_t now) noexcept {
  if (std::int64_t w = earliest(); w == 0 || w > now) return w;
  lock_.lock();
  while (!heap_.empty() && heap_[0]->when <= now) {
    timer* t = heap_[0];
    timer::func f = t->f;
    void* arg = t->arg;
    std::uintptr_t seq = t->seq;
    bool sync = t->sync;
    // `running` before `where`: del() reading where == nullptr without
    // the lock (acquire) must then see running != 0 and wait.
    // A count, not a flag: a periodic timer may be due again, and run by
    // another M, before this call of its function returns.
    if (sync) t->running.fetch_add(1, std::memory_order_relaxed);
    if (t->period > 0) {
      // Periodic: the next tick after now, skipping missed ones (a ticker
      // drops ticks rather than bursting).
      std::int64_t late = now - t->when;
      std::int64_t next = t->when + t->period * (1 + late / t->period);
      t->when = next < t->when ? INT64_MAX : next;
      sift_down(0);
    } else {
      remove_at(0);
      t->where.store(nullptr, std::memory_order_release);
    }
    publish_earliest();
    lock_.unlock();
    GORO_CHAOS_POINT("timer.run");
    // After this call a non-sync t may be gone: touch it no more; nor a
    // sync one whose function deleted it (see the top of this file).
    const running_timer_slot outer = tls_running_timer;
    tls_running_timer = {sync ? t : nullptr, false};
    f(arg, seq, now);
    const bool released = tls_running_timer.released;
    tls_running_timer = outer;
    if (sync && !released) t->running.fetch_sub(1, std::memory_order_release);
    lock_.lock();
  }
  std::int64_t next = heap_.empty() ? 0 : heap_[0]->when;
  lock_.unlock();
  return next;
}

GORO_DECL void timer_heap::clear() noexcept {
  lock_.lock();
  std::vector<timer*, memory_allocator<timer*>> all(heap_.get_allocator());
  all.swap(heap_);
  for (timer* t : all) t->where.store(nullptr, std::memory_order_release);
  count_.store(0, std::memory_order_relaxed);
  publish_earliest();
  lock_.unlock();
  for (timer* t : all)
    if (t->drop) t->drop(t->arg, t->seq, 0);
}

GORO_DECL bool timer_heap::del(timer* t) noexcept {
  // From inside t's own function that call is not waited for (it is the
  // caller; other runs of a periodic t still are), and its count is
  // released last: once it drops, t's owner may free t at any moment.
  const bool self = t == tls_running_timer.t && !tls_running_timer.released;
  const std::uint32_t own = self ? 1 : 0;
  bool removed = false;
  std::atomic<std::uint32_t>& in_flight = my_del_stripe();
  void (*emptied)(void*) = nullptr;
  void* emptied_arg = nullptr;
  for (;;) {
    in_flight.fetch_add(1, std::memory_order_seq_cst);  // before reading where: see del_stripes
    timer_heap* h = t->where.load(std::memory_order_seq_cst);
    if (!h) {
      in_flight.fetch_sub(1, std::memory_order_release);
      wait_running_at_most(t, own);
      break;
    }
    testing::timer_del_seam();
    h->lock_.lock();
    if (t->where.load(std::memory_order_relaxed) != h) {  // fired or moved meanwhile: look again
      h->lock_.unlock();
      in_flight.fetch_sub(1, std::memory_order_release);
      continue;
    }
    if (t->sync && t->running.load(std::memory_order_acquire) > own) {
      // A periodic timer stays queued while its function runs.
      h->lock_.unlock();
      in_flight.fetch_sub(1, std::memory_order_release);
      wait_running_at_most(t, own);
      continue;
    }
    h->remove_at(t->index);
    t->where.store(nullptr, std::memory_order_release);
    h->publish_earliest();
    if (h->heap_.empty()) {  // read under the lock: after it, h may be gone (a P's heap)
      emptied = h->emptied_;
      emptied_arg = h->emptied_arg_;
    }
    h->lock_.unlock();
    in_flight.fetch_sub(1, std::memory_order_release);
    removed = true;
    break;
  }
  if (emptied) emptied(emptied_arg);
  if (self) {
    tls_running_timer.released = true;
    t->running.fetch_sub(1, std::memory_order_release);  // the last touch of t
  }
  return removed;
}

GORO_DECL void timer_heap::wait_stale_dels() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);  // after the nullptr stores: see del_stripes
  for (del_stripe& s : del_in_flight)
    while (s.n.load(std::memory_order_acquire) != 0) os::yield_thread();
}

GORO_DECL void timer_heap::wait_running_at_most(timer* t, std::uint32_t own) noexcept {
  if (!t->sync) return;
  while (t->running.load(std::memory_order_acquire) > own) os::yield_thread();
}

GORO_DECL bool timer_heap::push_locked(timer* t) {
  t->index = static_cast<std::uint32_t>(heap_.size());
  heap_.push_back(t);
  t->where.store(this, std::memory_order_release);
  sift_up(t->index);
  count_.store(heap_.size(), std::memory_order_relaxed);
  bool first = heap_[0] == t;
  if (first) publish_earliest();
  return first;
}

GORO_DECL void timer_heap::remove_at(std::uint32_t i) noexcept {
  std::uint32_t last = static_cast<std::uint32_t>(heap_.size() - 1);
  if (i != last) {
    heap_[i] = heap_[last];
    heap_[i]->index = i;
  }
  heap_.pop_back();
  count_.store(heap_.size(), std::memory_order_relaxed);
  if (i < heap_.size()) {
    if (i > 0 && heap_[i]->when < heap_[(i - 1) / 4]->when)
      sift_up(i);
    else
      sift_down(i);
  }
}

GORO_DECL void timer_heap::sift_up(std::uint32_t i) noexcept {
  timer* t = heap_[i];
  while (i > 0) {
    std::uint32_t parent = (i - 1) / 4;
    if (heap_[parent]->when <= t->when) break;
    place(i, heap_[parent]);
    i = parent;
  }
  place(i, t);
}

GORO_DECL void timer_heap::sift_down(std::uint32_t i) noexcept {
  const std::uint32_t n = static_cast<std::uint32_t>(heap_.size());
  if (i >= n) return;
  timer* t = heap_[i];
  for (;;) {
    std::uint32_t c = 4 * i + 1;
    if (c >= n) break;
    std::uint32_t best = c;
    for (std::uint32_t k = c + 1; k < c + 4 && k < n; ++k)
      if (heap_[k]->when < heap_[best]->when) best = k;
    if (t->when <= heap_[best]->when) break;
    place(i, heap_[best]);
    i = best;
  }
  place(i, t);
}

}  // namespace goro::detail
#endif  // GORO_COMPILE_RUNTIME
