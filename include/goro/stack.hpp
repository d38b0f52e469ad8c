// Goroutine stacks: the stack_allocator concept and the default allocator.
//
// The default allocator carves stacks out of large slabs (one mapping for
// many stacks), so a million live goroutines fit under Linux's default
// vm.max_map_count of 65,530 mappings. Stacks of at least 16 KiB get a
// 64 KiB PROT_NONE guard region below them while the process-wide guard
// budget lasts (each guard splits a mapping in two); past it, and for small
// stacks, stacks are packed without guards and overflow is caught by a
// canary the scheduler checks at every switch.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <vector>

#include "detail/config.hpp"
#include "error.hpp"

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

inline std::size_t page_size() noexcept {
  static const std::size_t p = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// How many guard regions the whole process may still create. Each guard
// adds about two mappings; spend at most a quarter of vm.max_map_count.
inline std::atomic<long>& guard_budget() noexcept {
  static std::atomic<long> budget = [] {
    long max_maps = 65530;
    if (std::FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
      if (std::fscanf(f, "%ld", &max_maps) != 1) max_maps = 65530;
      std::fclose(f);
    }
    return max_maps / 8;
  }();
  return budget;
}

}  // namespace detail

class default_stack_allocator {
 public:
  default_stack_allocator() = default;
  default_stack_allocator(const default_stack_allocator&) = delete;
  default_stack_allocator& operator=(const default_stack_allocator&) = delete;

  ~default_stack_allocator() {
    for (auto& s : slabs_) munmap(s.base, s.bytes);
  }

  stack_memory allocate(std::size_t size) {
    bool guarded;
    return allocate(size, guarded);
  }

  // Also tells whether a guard region protects the stack; the scheduler
  // then skips the canary (whose write would touch one more page).
  stack_memory allocate(std::size_t size, bool& guarded) {
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
    if (cur_.size != size || cur_.next == cur_.end) new_slab(size);
    std::uintptr_t lo = cur_.next + (cur_.guarded ? detail::guard_size : 0);
    cur_.next += cur_.stride;
    guarded = cur_.guarded;
    return {reinterpret_cast<void*>(lo), size};
  }

  void deallocate(stack_memory s) noexcept {
    std::lock_guard<std::mutex> lk(mu_);
    auto lo = reinterpret_cast<std::uintptr_t>(s.lo);
    std::uintptr_t tagged = lo | (is_guarded(lo) ? 1 : 0);
    for (auto& fl : free_) {
      if (fl.size == s.size) {
        push(fl.stacks, tagged);
        return;
      }
    }
    GORO_TRY { free_.push_back({s.size, {}}); }
    GORO_CATCH_ALL { return; }
    push(free_.back().stacks, tagged);
  }

 private:
  struct slab {
    void* base;
    std::size_t bytes;
    bool guarded;
  };
  struct carve {
    std::size_t size = 0, stride = 0;
    std::uintptr_t next = 0, end = 0;
    bool guarded = false;
  };
  struct free_list {
    std::size_t size;
    std::vector<std::uintptr_t> stacks;  // lo | 1 if guarded
  };

  bool is_guarded(std::uintptr_t lo) const noexcept {
    for (auto it = slabs_.rbegin(); it != slabs_.rend(); ++it) {
      auto base = reinterpret_cast<std::uintptr_t>(it->base);
      if (lo >= base && lo < base + it->bytes) return it->guarded;
    }
    return false;
  }

  static void push(std::vector<std::uintptr_t>& v, std::uintptr_t p) noexcept {
    // deallocate is noexcept: reserve generously so push_back cannot throw
    // in practice; if it still fails the stack is leaked (never reused).
    GORO_TRY { v.push_back(p); }
    GORO_CATCH_ALL {}
  }

  void new_slab(std::size_t size) {
    const std::size_t page = detail::page_size();
    bool guarded = false;
    std::size_t stride = size;
    if (size >= detail::min_guarded_stack) {
      stride = (size + page - 1) / page * page;  // guards need page-aligned stacks
      long want = static_cast<long>(detail::slab_bytes / (stride + detail::guard_size));
      if (want < 1) want = 1;
      if (detail::guard_budget().fetch_sub(want, std::memory_order_relaxed) >= want) {
        guarded = true;
        stride += detail::guard_size;
      } else {
        detail::guard_budget().fetch_add(want, std::memory_order_relaxed);
      }
    }
    std::size_t count = detail::slab_bytes / stride;
    if (count < 1) count = 1;
    std::size_t bytes = (count * stride + page - 1) / page * page;
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) detail::raise_bad_alloc();
    if (guarded) {
      for (std::size_t i = 0; i < count; ++i)
        mprotect(static_cast<char*>(base) + i * stride, detail::guard_size, PROT_NONE);
    }
    GORO_TRY { slabs_.push_back({base, bytes, guarded}); }
    GORO_CATCH_ALL {
      munmap(base, bytes);
      GORO_RETHROW;
    }
    cur_ = {size, stride, reinterpret_cast<std::uintptr_t>(base), reinterpret_cast<std::uintptr_t>(base) + count * stride,
            guarded};
  }

  std::mutex mu_;
  std::vector<slab> slabs_;
  carve cur_;
  std::vector<free_list> free_;
};

static_assert(stack_allocator<default_stack_allocator>);

}  // namespace goro
