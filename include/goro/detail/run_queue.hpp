// The per-P local run queue: a bounded lock-free ring plus the runnext slot.
// Mirrors Go's runqput / runqputslow / runqget / runqgrab / runqsteal
// (src/runtime/proc.go).
//
// Invariants:
// - Only the owner (the M holding the P) pushes, and only the owner stores
//   `tail_`. Consumers (the owner's get, thieves' grab) claim slots by CAS
//   on `head_`; a slot is read before the CAS that claims it, and the CAS
//   fails if anyone else claimed it meanwhile, so a stale read is discarded.
// - The owner may write slot t only while t - head < Capacity, i.e. after
//   every consumer that could still read it has moved `head_` past it.
// - `runnext_` is a single slot taken by CAS by anyone; only the owner puts
//   into it. A G taken from runnext inherits the current time slice.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "chaos.hpp"
#include "config.hpp"

namespace goro::detail {

struct run_queue_get_result {
  void* item;
  bool inherit_time;  // came from runnext: runs in the current time slice
};

// T is the element pointee (the scheduler uses `g`); elements are T*.
// Steals take ceil(n * StealNum / StealDen) of the n queued elements.
template <class T, std::uint32_t Capacity, std::uint32_t StealNum = 1, std::uint32_t StealDen = 2>
class local_run_queue {
  static_assert(Capacity >= 2 && (Capacity & (Capacity - 1)) == 0, "capacity must be a power of two >= 2");
  static_assert(StealNum > 0 && StealNum <= StealDen, "steal fraction must be in (0, 1]");

 public:
  static constexpr std::uint32_t capacity = Capacity;

  // How many of `n` queued elements one steal takes: ceil(n * fraction),
  // computed as Go's `n - n/2` generalised to n - floor(n * (1 - fraction)).
  static constexpr std::uint32_t steal_count(std::uint32_t n) noexcept {
    return n - static_cast<std::uint32_t>((std::uint64_t{n} * (StealDen - StealNum)) / StealDen);
  }

  // runqput: owner only. With `next`, g goes into runnext and the previous
  // runnext (if any) is kicked to the tail. When the ring is full, half of
  // it plus the element go to `to_global(T** batch, uint32_t n)` in one batch
  // (runqputslow), so the global queue takes the overflow in one lock.
  template <class ToGlobal>
  void put(T* g, bool next, ToGlobal&& to_global) {
    if (next && GORO_CHAOS_IF(8)) next = false;  // chaos: the ring instead of runnext
    GORO_CHAOS_POINT("runqput");
    if (next) {
      T* old = runnext_.load(std::memory_order_relaxed);
      GORO_CHAOS_POINT("runqput.runnext");
      if (old == nullptr) {
        // Thieves only take a non-null runnext, and only the owner puts:
        // an empty runnext stays empty until this store, so no locked
        // exchange is needed (the common case: ready() after a get).
        runnext_.store(g, std::memory_order_release);
        return;
      }
      while (!runnext_.compare_exchange_weak(old, g, std::memory_order_acq_rel, std::memory_order_relaxed)) {
      }
      if (old == nullptr) return;
      g = old;  // kick the old runnext to the regular queue
    }
    for (;;) {
      std::uint32_t h = head_.load(std::memory_order_acquire);  // synchronize with consumers
      std::uint32_t t = tail_.load(std::memory_order_relaxed);
      if (t - h < Capacity) {
        slots_[t % Capacity].store(g, std::memory_order_relaxed);
        GORO_CHAOS_POINT("runqput.publish");
        tail_.store(t + 1, std::memory_order_release);  // publish the slot to consumers
        return;
      }
      if (put_slow(g, h, t, to_global)) return;
      // A consumer moved head meanwhile: the ring has room again; retry.
    }
  }

  // Puts a batch (owner only), overflowing to the global queue as put() does.
  template <class ToGlobal>
  void put_batch(T* const* items, std::uint32_t n, ToGlobal&& to_global) {
    for (std::uint32_t i = 0; i < n; ++i) put(items[i], false, to_global);
  }

  // runqget: owner only. runnext first, then the ring head.
  run_queue_get_result get() noexcept {
    T* next = runnext_.load(std::memory_order_relaxed);
    GORO_CHAOS_POINT("runqget.runnext");
    // Only the owner puts into runnext, so a failed CAS means a thief took
    // it and runnext is now empty: no need to retry.
    if (next != nullptr &&
        runnext_.compare_exchange_strong(next, nullptr, std::memory_order_acq_rel, std::memory_order_relaxed))
      return {next, true};
    for (;;) {
      std::uint32_t h = head_.load(std::memory_order_acquire);
      std::uint32_t t = tail_.load(std::memory_order_relaxed);
      if (t == h) return {nullptr, false};
      T* g = slots_[h % Capacity].load(std::memory_order_relaxed);
      GORO_CHAOS_POINT("runqget.claim");
      if (head_.compare_exchange_weak(h, h + 1, std::memory_order_release, std::memory_order_relaxed))
        return {g, false};
    }
  }

  // runqsteal: called by the thief on its own (empty) queue; steals from
  // `victim` into this ring and returns one of the stolen elements to run
  // (or nullptr). runnext is stolen only when `steal_runnext`;
  // `before_runnext_steal()` runs first (Go sleeps ~3 us there when the
  // victim is running: it is probably about to run its runnext itself).
  template <class BeforeRunnextSteal>
  T* steal_from(local_run_queue& victim, bool steal_runnext, BeforeRunnextSteal&& before_runnext_steal) {
    if (!steal_runnext && GORO_CHAOS_IF(16)) steal_runnext = true;  // chaos: take runnext on an early pass
    GORO_CHAOS_POINT("runqsteal");
    std::uint32_t t = tail_.load(std::memory_order_relaxed);
    std::uint32_t n = victim.grab(slots_.data(), t, steal_runnext, before_runnext_steal);
    if (n == 0) return nullptr;
    --n;
    T* g = slots_[(t + n) % Capacity].load(std::memory_order_relaxed);
    if (n == 0) return g;
    tail_.store(t + n, std::memory_order_release);  // publish the rest
    return g;
  }

  T* steal_from(local_run_queue& victim, bool steal_runnext) {
    return steal_from(victim, steal_runnext, [] {});
  }

  // runqempty: never reports empty spuriously. put(next=true) briefly
  // leaves both runnext and the ring looking empty-ish while it kicks the
  // old runnext; re-reading tail after runnext detects that window.
  bool empty() const noexcept {
    for (;;) {
      std::uint32_t h = head_.load(std::memory_order_acquire);
      std::uint32_t t = tail_.load(std::memory_order_acquire);
      T* next = runnext_.load(std::memory_order_acquire);
      if (t == tail_.load(std::memory_order_acquire)) return h == t && next == nullptr;
    }
  }

  // What runnext holds now (a snapshot, for a thief that waits for it).
  T* runnext_snapshot() const noexcept { return runnext_.load(std::memory_order_relaxed); }

  // Number of elements in the ring plus runnext (a snapshot; exact only
  // when nobody else touches the queue).
  std::uint32_t size() const noexcept {
    std::uint32_t h = head_.load(std::memory_order_acquire);
    std::uint32_t t = tail_.load(std::memory_order_acquire);
    std::uint32_t n = t - h;
    if (n > Capacity) n = Capacity;
    return n + (runnext_.load(std::memory_order_acquire) != nullptr ? 1 : 0);
  }

  // Removes everything (owner only, or with the world stopped), passing each
  // element to f. Used when a P is destroyed or handed its work elsewhere.
  template <class F>
  void drain(F&& f) {
    if (T* next = runnext_.exchange(nullptr, std::memory_order_acq_rel)) f(next);
    for (;;) {
      auto r = get();
      if (r.item == nullptr) return;
      f(static_cast<T*>(r.item));
    }
  }

 private:
  // runqgrab: copies ceil(n * fraction) elements starting at head into
  // `out[out_head ...]` (a ring of the same capacity) and claims them with
  // one CAS. Returns how many were taken.
  template <class BeforeRunnextSteal>
  std::uint32_t grab(std::atomic<T*>* out, std::uint32_t out_head, bool steal_runnext,
                     BeforeRunnextSteal& before_runnext_steal) {
    for (;;) {
      std::uint32_t h = head_.load(std::memory_order_acquire);
      std::uint32_t t = tail_.load(std::memory_order_acquire);  // synchronize with the owner's publish
      std::uint32_t queued = t - h;
      if (queued > Capacity) continue;  // inconsistent h and t: the owner and a consumer moved; retry
      std::uint32_t n = steal_count(queued);
      if (n == 0) {
        if (!steal_runnext) return 0;
        T* next = runnext_.load(std::memory_order_acquire);
        if (next == nullptr) return 0;
        before_runnext_steal();
        GORO_CHAOS_POINT("runqgrab.runnext");
        if (!runnext_.compare_exchange_strong(next, nullptr, std::memory_order_acq_rel, std::memory_order_relaxed))
          continue;
        out[out_head % Capacity].store(next, std::memory_order_relaxed);
        return 1;
      }
      for (std::uint32_t i = 0; i < n; ++i)
        out[(out_head + i) % Capacity].store(slots_[(h + i) % Capacity].load(std::memory_order_relaxed),
                                             std::memory_order_relaxed);
      GORO_CHAOS_POINT("runqgrab.claim");
      // acq_rel: claims the copied slots and lets the owner reuse them.
      if (head_.compare_exchange_strong(h, h + n, std::memory_order_acq_rel, std::memory_order_relaxed)) return n;
    }
  }

  // runqputslow: moves half the full ring plus g to the global queue.
  template <class ToGlobal>
  bool put_slow(T* g, std::uint32_t h, std::uint32_t t, ToGlobal& to_global) {
    constexpr std::uint32_t half = Capacity / 2;
    (void)t;
    // The batch lives in the queue (owner-only scratch), not on the stack:
    // put() runs on goroutine stacks, which may be as small as 2 KiB.
    auto& batch = overflow_;
    for (std::uint32_t i = 0; i < half; ++i) batch[i] = slots_[(h + i) % Capacity].load(std::memory_order_relaxed);
    GORO_CHAOS_POINT("runqputslow");
    if (!head_.compare_exchange_strong(h, h + half, std::memory_order_release, std::memory_order_relaxed))
      return false;
    batch[half] = g;
    to_global(batch.data(), half + 1);
    return true;
  }

  alignas(cache_line) std::atomic<std::uint32_t> head_{0};
  alignas(cache_line) std::atomic<std::uint32_t> tail_{0};
  std::atomic<T*> runnext_{nullptr};
  std::array<std::atomic<T*>, Capacity> slots_{};
  std::array<T*, Capacity / 2 + 1> overflow_{};  // put_slow's batch (owner only)
};

}  // namespace goro::detail
