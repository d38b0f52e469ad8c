// The global run queue (Go's sched.runq): a FIFO of Gs in a ring of
// pointers under its own spinlock (not the scheduler lock: Gosched queues
// here at every call, and a futex mutex shared with the idle lists cost
// yield a quarter of its time). Its size is also kept in an atomic so
// find-runnable can skip the lock when it is empty.
//
// The ring never allocates on a push: the scheduler reserves room for
// every G record it creates (reserve, where G records are allocated and
// bad_alloc may be raised), and a G is in the queue at most once, so
// pushes (from noexcept paths such as ready) always fit. A ring instead of
// a list linked through the Gs: a batch get copies contiguous pointers
// instead of chasing links through cold G records.
//
// Every member takes the queue's lock itself; callers may hold the
// scheduler lock (lock order: scheduler lock, then this one; nothing is
// locked while this one is held).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "../error.hpp"
#include "chaos.hpp"
#include "g.hpp"
#include "memory.hpp"
#include "spinlock.hpp"

namespace goro::detail {

class global_run_queue {
 public:
  global_run_queue() = default;
  global_run_queue(const global_run_queue&) = delete;
  global_run_queue& operator=(const global_run_queue&) = delete;
  ~global_run_queue() { release(buf_, buf_ ? std::size_t{mask_} + 1 : 0); }

  // The runtime's allocator (memory.hpp), before the first reserve.
  void set_memory(runtime_memory* m) noexcept { mem_ = m; }

  void push_back(g* gp) noexcept {
    GORO_CHAOS_POINT("globrunqput");
    lock_.lock();
    push_locked(gp);
    lock_.unlock();
    GORO_CHAOS_POINT("globrunqput.after");
  }
  void push_back_batch(g* const* batch, std::uint32_t n) noexcept {
    lock_.lock();
    for (std::uint32_t i = 0; i < n; ++i) push_locked(batch[i]);
    lock_.unlock();
    GORO_CHAOS_POINT("globrunqputbatch.after");
  }
  g* pop_front() noexcept {
    g* gp = nullptr;
    (void)pop_batch(&gp, [](std::uint32_t) { return 1u; });
    return gp;
  }
  // Takes the first how_many(size) Gs (called under the lock with the
  // exact size > 0; at least 1, at most size) into out; returns how many
  // (0 if the queue was empty).
  template <class HowMany>
  std::uint32_t pop_batch(g** out, HowMany&& how_many) noexcept {
    GORO_CHAOS_POINT("globrunqget");
    lock_.lock();
    const std::uint32_t size = size_.load(std::memory_order_relaxed);
    if (size == 0) {
      lock_.unlock();
      return 0;
    }
    const std::uint32_t n = how_many(size);
    const std::uint32_t cap = mask_ + 1;
    const std::uint32_t first = std::min(n, cap - head_);  // up to the end of the ring
    std::memcpy(out, buf_ + head_, first * sizeof(g*));
    std::memcpy(out + first, buf_, (n - first) * sizeof(g*));
    head_ = (head_ + n) & mask_;
    size_.store(size - n, std::memory_order_release);
    lock_.unlock();
    return n;
  }
  // Takes gp out of the queue if it is still there (go() rolling back a
  // spawn that no M could run); false if an M took it meanwhile. O(size).
  bool remove(g* gp) noexcept {
    lock_.lock();
    const std::uint32_t size = size_.load(std::memory_order_relaxed);
    std::uint32_t i = 0;
    while (i < size && buf_[(head_ + i) & mask_] != gp) ++i;
    const bool found = i < size;
    if (found) {
      for (; i + 1 < size; ++i) buf_[(head_ + i) & mask_] = buf_[(head_ + i + 1) & mask_];
      size_.store(size - 1, std::memory_order_release);
    }
    lock_.unlock();
    return found;
  }
  // Lock-free hint; exact under the queue's lock.
  std::uint32_t size() const noexcept { return size_.load(std::memory_order_acquire); }
  bool empty() const noexcept { return size() == 0; }
  // Read under the queue's lock: ordered against every push by the lock
  // (a P that published itself idle, then finds this empty, is seen idle
  // by the wakep of any push it missed; see find_runnable).
  bool empty_synced() noexcept {
    GORO_CHAOS_POINT("globrunq.empty_synced");
    lock_.lock();
    bool e = size_.load(std::memory_order_relaxed) == 0;
    lock_.unlock();
    return e;
  }

  // Makes room for n Gs in all (the number of G records in existence).
  // May raise bad_alloc; nothing changes then.
  void reserve(std::size_t n) {
    std::size_t cap = buf_ ? std::size_t{mask_} + 1 : 0;
    if (n <= cap) return;
    std::size_t want = cap ? cap : 64;
    while (want < n) want *= 2;
    if (want > (std::size_t{1} << 31)) raise_bad_alloc();
    g** nb = static_cast<g**>(memory_allocate(mem_, want * sizeof(g*), alignof(g*)));
    lock_.lock();
    const std::uint32_t size = size_.load(std::memory_order_relaxed);
    for (std::uint32_t i = 0; i < size; ++i) nb[i] = buf_[(head_ + i) & mask_];
    g** old = buf_;
    const std::size_t old_cap = old ? std::size_t{mask_} + 1 : 0;
    buf_ = nb;
    head_ = 0;
    mask_ = static_cast<std::uint32_t>(want - 1);
    lock_.unlock();
    release(old, old_cap);
  }

 private:
  void push_locked(g* gp) noexcept {
    const std::uint32_t size = size_.load(std::memory_order_relaxed);
    if (GORO_UNLIKELY(buf_ == nullptr || size > mask_)) fatal("goro: internal error: global run queue overflow");
    buf_[(head_ + size) & mask_] = gp;
    size_.store(size + 1, std::memory_order_release);
  }

  void release(g** buf, std::size_t cap) noexcept {
    if (buf) memory_deallocate(mem_, buf, cap * sizeof(g*), alignof(g*));
  }

  spinlock lock_;
  std::atomic<std::uint32_t> size_{0};
  std::uint32_t head_ = 0;  // index of the first G
  std::uint32_t mask_ = 0;  // capacity - 1 (capacity: a power of two)
  g** buf_ = nullptr;
  runtime_memory* mem_ = nullptr;  // nullptr: std::allocator
};

}  // namespace goro::detail
