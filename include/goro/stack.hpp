// Goroutine stacks: the stack_allocator concept and the default allocator.
//
// The default allocator carves stacks out of large slabs (one mapping for
// many stacks), so a million live goroutines fit under Linux's default
// vm.max_map_count of 65,530 mappings. Stacks of at least 16 KiB get a
// 64 KiB guard region below them: with madvise(MADV_GUARD_INSTALL)
// (Linux >= 6.13), which does not split the mapping, every such stack;
// otherwise PROT_NONE regions while the process-wide guard budget lasts
// (each mprotect splits a mapping in two). Past the budget, and for small
// stacks, stacks are packed without guards and overflow is caught by a
// canary the scheduler checks at every switch. Stacks freed beyond a
// bounded cache are returned to the kernel (MADV_DONTNEED), so a burst's
// peak does not stay resident: lazily, as Go's scavenger does. They wait
// (still reusable) until the runtime's sysmon sees the frees stop, or
// until they have waited 100 ms, and are then released sorted, so the
// neighbours a burst freed share one madvise call.
#pragma once

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "detail/config.hpp"
#include "error.hpp"
#include "os/os.hpp"

namespace goro {

// A stack: [lo, lo + size); it grows down from lo + size.
struct stack_memory {
  void* lo = nullptr;
  std::size_t size = 0;
};

// What a policy's stack_allocator must provide. One instance per runtime;
// it must be thread-safe. allocate() throws std::bad_alloc on failure.
template <class A>
concept stack_allocator = std::default_initializable<A> && requires(A a, std::size_t n, stack_memory s) {
  { a.allocate(n) } -> std::same_as<stack_memory>;
  { a.deallocate(s) } noexcept;
};

namespace detail {

inline constexpr std::size_t guard_size = 64 * 1024;      // virtual only; 4 KiB is jumped by large frames
inline constexpr std::size_t min_guarded_stack = 16 * 1024;  // smaller stacks are packed with canaries
inline constexpr std::size_t slab_bytes = 16 * 1024 * 1024;

// Stacks of one size kept resident in the allocator's free list; those
// freed beyond this are released with MADV_DONTNEED (they stay mapped and
// guarded, and fault fresh zero pages in when reused).
inline constexpr std::size_t resident_cache_bytes = 16 * 1024 * 1024;
inline constexpr std::size_t min_resident_stacks = 16;

// Test hook: behave as if the kernel had no MADV_GUARD_INSTALL.
inline std::atomic<bool> guard_install_test_disable{false};

// Whether guard markers (madvise(MADV_GUARD_INSTALL), which does not split
// the mapping) protect new stacks.
inline bool guard_install_available() noexcept {
  return os::guard_markers_available() && !guard_install_test_disable.load(std::memory_order_relaxed);
}

// How many guard regions the whole process may still create. Each guard
// adds about two mappings; spend at most a quarter of vm.max_map_count.
inline std::atomic<long>& guard_budget() noexcept {
  static std::atomic<long> budget{os::max_memory_mappings() / 8};
  return budget;
}

}  // namespace detail

class default_stack_allocator {
 public:
  default_stack_allocator() = default;
  default_stack_allocator(const default_stack_allocator&) = delete;
  default_stack_allocator& operator=(const default_stack_allocator&) = delete;

  GORO_DECL ~default_stack_allocator();

  stack_memory allocate(std::size_t size) {
    bool guarded;
    return allocate(size, guarded);
  }

  // Also tells whether a guard region protects the stack; the scheduler
  // then skips the canary (whose write would touch one more page).
  GORO_DECL stack_memory allocate(std::size_t size, bool& guarded);

  GORO_DECL void deallocate(stack_memory s) noexcept;

  // Stacks waiting for release (a hint: read without the lock).
  std::size_t pending() const noexcept { return npending_.load(std::memory_order_relaxed); }

  // Releases every stack waiting for it (sysmon: release_stacks in sysmon.hpp).
  GORO_DECL void scavenge() noexcept;

 private:
  struct slab {
    void* base;
    std::size_t bytes;
    std::size_t stride;  // from one stack to the next
    bool guarded;
  };
  struct carve {
    std::size_t size = 0, stride = 0, skip = 0;  // skip: room for a guard below each stack
    std::uintptr_t next = 0, end = 0;
    bool guarded = false;
  };
  struct free_list {
    std::size_t size;
    std::vector<std::uintptr_t> stacks;  // lo | 1 if guarded
  };

  struct pending_stack {
    std::uintptr_t tagged;  // lo | 1 if guarded
    std::size_t size;
    std::size_t slab;  // index in slabs_
  };
  // Past this many stacks waiting, the freeing thread releases them itself
  // (sysmon may be late: a goroutine hogging its P, or none started).
  static constexpr std::size_t max_pending = 1 << 16;
  static constexpr std::size_t npos = ~std::size_t{0};

  // Releases the pending stacks' pages and then makes them available. The
  // madvise calls run outside the lock; nobody can have these stacks
  // meanwhile. Stacks next to each other in one slab (freed in creation
  // order, as after a burst) share one call: the guard between them stays
  // (PROT_NONE keeps its protection, guard markers survive MADV_DONTNEED).
  GORO_DECL void flush_pending(std::unique_lock<std::mutex>& lk) noexcept;

  GORO_DECL std::size_t find_slab(std::uintptr_t lo) const noexcept;

  GORO_DECL free_list* find_free(std::size_t size) noexcept;

  GORO_DECL static void push(std::vector<std::uintptr_t>& v, std::uintptr_t p) noexcept;

  GORO_DECL void new_slab(std::size_t size);

  std::mutex mu_;
  std::vector<slab> slabs_;
  // Indices into slabs_ by ascending base: find_slab is a binary search.
  // (It was a linear scan, on every free, under mu_: with 100,000 live
  // 64 KiB stacks, ~500 slabs, a goroutine exit burst spent its time
  // there, and Ps queued on the mutex.)
  std::vector<std::size_t> by_base_;
  carve cur_;
  std::vector<free_list> free_;
  std::vector<pending_stack> pending_;  // freed past the resident bound, not yet released
  std::atomic<std::size_t> npending_{0};  // pending_.size(), for sysmon's look without the lock
};

static_assert(stack_allocator<default_stack_allocator>);

}  // namespace goro

#if GORO_COMPILE_RUNTIME
namespace goro {

GORO_DECL default_stack_allocator::~default_stack_allocator() {
  for (auto& s : slabs_) detail::os::unmap_memory(s.base, s.bytes);
}

GORO_DECL stack_memory default_stack_allocator::allocate(std::size_t size, bool& guarded) {
  size = (size + 15) & ~std::size_t{15};
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& fl : free_) {
    if (fl.size == size && !fl.stacks.empty()) {
      std::uintptr_t tagged = fl.stacks.back();
      fl.stacks.pop_back();
      guarded = (tagged & 1) != 0;
      return {reinterpret_cast<void*>(tagged & ~std::uintptr_t{1}), size};
    }
  }
  // A stack waiting for release is still resident: reuse it (the most
  // recently freed first).
  if (!pending_.empty() && pending_.back().size == size) {
    std::uintptr_t tagged = pending_.back().tagged;
    pending_.pop_back();
    npending_.store(pending_.size(), std::memory_order_relaxed);
    guarded = (tagged & 1) != 0;
    return {reinterpret_cast<void*>(tagged & ~std::uintptr_t{1}), size};
  }
  if (cur_.size != size || cur_.next == cur_.end) new_slab(size);
  std::uintptr_t lo = cur_.next + cur_.skip;
  cur_.next += cur_.stride;
  guarded = cur_.guarded;
  return {reinterpret_cast<void*>(lo), size};
}

GORO_DECL void default_stack_allocator::deallocate(stack_memory s) noexcept {
  std::unique_lock<std::mutex> lk(mu_);
  auto lo = reinterpret_cast<std::uintptr_t>(s.lo);
  const std::size_t si = find_slab(lo);
  std::uintptr_t tagged = lo | (si != npos && slabs_[si].guarded ? 1 : 0);
  free_list* fl = find_free(s.size);
  if (!fl) {
    GORO_TRY { free_.push_back({s.size, {}}); }
    GORO_CATCH_ALL { return; }
    fl = &free_.back();
  }
  // A list is a stack: an entry's index never changes while it is there,
  // and only entries pushed at an index below the bound are pushed
  // unreleased, so at most `bound` of them are resident. The others wait
  // in pending_ until scavenge() releases them (one madvise for
  // neighbours), or, past max_pending, at once.
  const std::size_t bound = std::max(detail::min_resident_stacks, detail::resident_cache_bytes / s.size);
  if (fl->stacks.size() < bound || si == npos) {
    push(fl->stacks, tagged);
    return;
  }
  GORO_TRY { pending_.push_back({tagged, s.size, si}); }
  GORO_CATCH_ALL {
    push(fl->stacks, tagged);
    return;
  }
  npending_.store(pending_.size(), std::memory_order_relaxed);
  if (pending_.size() >= max_pending) flush_pending(lk);
}

GORO_DECL void default_stack_allocator::scavenge() noexcept {
  std::unique_lock<std::mutex> lk(mu_);
  if (!pending_.empty()) flush_pending(lk);
}

GORO_DECL void default_stack_allocator::flush_pending(std::unique_lock<std::mutex>& lk) noexcept {
  std::vector<pending_stack> batch;
  batch.swap(pending_);
  npending_.store(0, std::memory_order_relaxed);
  std::sort(batch.begin(), batch.end(),
            [](const pending_stack& a, const pending_stack& b) { return a.tagged < b.tagged; });
  struct range {
    std::uintptr_t lo, hi;
  };
  std::vector<range> ranges;
  GORO_TRY { ranges.reserve(batch.size()); }
  GORO_CATCH_ALL {}
  const std::size_t page = detail::os::page_size();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const pending_stack& e = batch[i];
    const std::uintptr_t lo = e.tagged & ~std::uintptr_t{1};
    const std::uintptr_t hi = lo + e.size / page * page;
    if (lo % page != 0 || hi == lo) continue;  // packed small stacks share pages
    const pending_stack* prev = i ? &batch[i - 1] : nullptr;
    const std::uintptr_t prev_lo = prev ? prev->tagged & ~std::uintptr_t{1} : 0;
    if (prev && prev->slab == e.slab && prev->size == e.size && prev_lo + slabs_[e.slab].stride == lo &&
        !ranges.empty() && ranges.back().hi == prev_lo + prev->size / page * page) {
      ranges.back().hi = hi;
      continue;
    }
    if (ranges.size() < ranges.capacity()) ranges.push_back({lo, hi});
  }
  lk.unlock();
  for (const range& r : ranges) detail::os::release_pages(reinterpret_cast<void*>(r.lo), r.hi - r.lo);
  lk.lock();
  for (const pending_stack& e : batch) {
    if (free_list* fl = find_free(e.size)) push(fl->stacks, e.tagged);
  }
  batch.clear();
  if (pending_.empty()) pending_.swap(batch);  // keep the capacity
  npending_.store(pending_.size(), std::memory_order_relaxed);
}

GORO_DECL std::size_t default_stack_allocator::find_slab(std::uintptr_t lo) const noexcept {
  // The last slab whose base is at or below lo, if lo lies inside it.
  const auto it = std::upper_bound(by_base_.begin(), by_base_.end(), lo, [this](std::uintptr_t x, std::size_t i) {
    return x < reinterpret_cast<std::uintptr_t>(slabs_[i].base);
  });
  if (it == by_base_.begin()) return npos;
  const std::size_t i = *(it - 1);
  const auto base = reinterpret_cast<std::uintptr_t>(slabs_[i].base);
  return lo < base + slabs_[i].bytes ? i : npos;
}

GORO_DECL default_stack_allocator::free_list* default_stack_allocator::find_free(std::size_t size) noexcept {
  for (auto& fl : free_)
    if (fl.size == size) return &fl;
  return nullptr;
}

GORO_DECL void default_stack_allocator::push(std::vector<std::uintptr_t>& v, std::uintptr_t p) noexcept {
  // deallocate is noexcept: reserve generously so push_back cannot throw
  // in practice; if it still fails the stack is leaked (never reused).
  GORO_TRY { v.push_back(p); }
  GORO_CATCH_ALL {}
}

GORO_DECL void default_stack_allocator::new_slab(std::size_t size) {
  const std::size_t page = detail::os::page_size();
  bool guarded = false;
  std::size_t stride = size, skip = 0;
  bool markers = false;  // guard regions by MADV_GUARD_INSTALL (no mapping split, no budget)
  if (size >= detail::min_guarded_stack) {
    stride = (size + page - 1) / page * page;  // guards need page-aligned stacks
    long want = static_cast<long>(detail::slab_bytes / (stride + detail::guard_size));
    if (want < 1) want = 1;
    if (detail::guard_install_available()) {
      markers = guarded = true;
    } else if (detail::guard_budget().fetch_sub(want, std::memory_order_relaxed) >= want) {
      guarded = true;
    } else {
      detail::guard_budget().fetch_add(want, std::memory_order_relaxed);
    }
    if (guarded) {
      skip = detail::guard_size;
      stride += skip;
    }
  }
  std::size_t count = detail::slab_bytes / stride;
  if (count < 1) count = 1;
  std::size_t bytes = (count * stride + page - 1) / page * page;
  void* base = detail::os::map_stack_memory(bytes);
  if (!base) detail::raise_bad_alloc();
  if (guarded) {
    for (std::size_t i = 0; i < count && guarded; ++i) {
      void* guard = static_cast<char*>(base) + i * stride;
      // A failed install (not expected once probed) leaves the slab to canaries.
      guarded = markers ? detail::os::guard_with_marker(guard, detail::guard_size)
                        : detail::os::guard_with_protection(guard, detail::guard_size);
    }
  }
  GORO_TRY {
    if (slabs_.size() == slabs_.capacity()) slabs_.reserve(2 * slabs_.size() + 8);
    if (by_base_.size() == by_base_.capacity()) by_base_.reserve(2 * by_base_.size() + 8);
  }
  GORO_CATCH_ALL {
    detail::os::unmap_memory(base, bytes);
    GORO_RETHROW;
  }
  slabs_.push_back({base, bytes, stride, guarded});  // capacity reserved: no throw from here
  const auto first = reinterpret_cast<std::uintptr_t>(base);
  const auto at = std::upper_bound(by_base_.begin(), by_base_.end(), first, [this](std::uintptr_t x, std::size_t i) {
    return x < reinterpret_cast<std::uintptr_t>(slabs_[i].base);
  });
  by_base_.insert(at, slabs_.size() - 1);
  cur_ = {size, stride, skip, first, first + count * stride, guarded};
}

}  // namespace goro
#endif  // GORO_COMPILE_RUNTIME
