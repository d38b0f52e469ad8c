// AddressSanitizer and ThreadSanitizer fiber annotations (DESIGN.md section 7).
// Everything here compiles to nothing without the sanitizers.
#pragma once

#include <cstddef>

#include "config.hpp"

#if GORO_ASAN
extern "C" {
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, std::size_t size);
void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old, std::size_t* size_old);
void __asan_unpoison_memory_region(void const volatile* addr, std::size_t size);
}
#endif
#if GORO_TSAN
extern "C" {
void* __tsan_get_current_fiber(void);
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
}
#endif

namespace goro::detail {

// Before a stack is reused or unmapped: a dead goroutine's frames leave ASan
// poison behind, which would fire on the next user of the memory.
inline void asan_unpoison(void* lo, std::size_t size) noexcept {
#if GORO_ASAN
  __asan_unpoison_memory_region(lo, size);
#else
  (void)lo;
  (void)size;
#endif
}

inline void* tsan_current_fiber() noexcept {
#if GORO_TSAN
  return __tsan_get_current_fiber();
#else
  return nullptr;
#endif
}
inline void* tsan_create_fiber() noexcept {
#if GORO_TSAN
  return __tsan_create_fiber(0);
#else
  return nullptr;
#endif
}
inline void tsan_destroy_fiber(void* f) noexcept {
#if GORO_TSAN
  if (f) __tsan_destroy_fiber(f);
#else
  (void)f;
#endif
}

}  // namespace goro::detail
