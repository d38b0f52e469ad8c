// Build configuration: version, compiler and sanitizer detection.
#pragma once

#include <cstddef>

#define GORO_VERSION_MAJOR 0
#define GORO_VERSION_MINOR 1
#define GORO_VERSION_PATCH 0

#if !defined(__linux__) && !(defined(_WIN64) && defined(__x86_64__))
#error "goro: supported systems are Linux (x86-64, AArch64, RISC-V 64) and Windows x64"
#endif
#if defined(__riscv) && (__riscv_xlen != 64 || !defined(__riscv_float_abi_double))
// The context switch saves fs0-fs11 with fsd: RV64 with the D extension
// and the LP64D calling convention (Debian's riscv64 default).
#error "goro: RISC-V needs RV64 with the LP64D ABI (-march=rv64gc -mabi=lp64d)"
#endif
#if __cplusplus < 202002L
#error "goro: C++20 or later is required (-std=c++20)"
#endif

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define GORO_EXCEPTIONS 1
#else
#define GORO_EXCEPTIONS 0
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GORO_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define GORO_TSAN 1
#endif
#endif
#if !defined(GORO_ASAN) && defined(__SANITIZE_ADDRESS__)
#define GORO_ASAN 1
#endif
#if !defined(GORO_TSAN) && defined(__SANITIZE_THREAD__)
#define GORO_TSAN 1
#endif
#ifndef GORO_ASAN
#define GORO_ASAN 0
#endif
#ifndef GORO_TSAN
#define GORO_TSAN 0
#endif

// try/catch that compiles to plain blocks under -fno-exceptions.
#if GORO_EXCEPTIONS
#define GORO_TRY try
#define GORO_CATCH_ALL catch (...)
#define GORO_RETHROW throw
#else
#define GORO_TRY if (true)
#define GORO_CATCH_ALL if (false)
#define GORO_RETHROW ((void)0)
#endif

// Separate compilation (SPEC, "Build"; docs/build.md): with
// GORO_SEPARATE_COMPILATION defined in every translation unit, the
// runtime's out-of-line parts (the scheduler, sysmon, the goroutine dump,
// the tracer) are compiled only in the one that also defines
// GORO_IMPLEMENTATION; the others see their declarations. Without it the
// library is header-only and every part is an inline definition.
//   GORO_COMPILE_RUNTIME: this translation unit compiles those parts.
//   GORO_DECL: what an out-of-line function's declaration and definition
//   start with (inline when header-only, an ordinary external function
//   otherwise).
#if defined(GORO_SEPARATE_COMPILATION)
#define GORO_DECL
#if defined(GORO_IMPLEMENTATION)
#define GORO_COMPILE_RUNTIME 1
#else
#define GORO_COMPILE_RUNTIME 0
#endif
#else
#define GORO_DECL inline
#define GORO_COMPILE_RUNTIME 1
#endif

#define GORO_NOINLINE __attribute__((noinline))
#define GORO_ALWAYS_INLINE inline __attribute__((always_inline))
#define GORO_LIKELY(x) __builtin_expect(!!(x), 1)
#define GORO_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace goro::detail {
// Size of a cache line; objects written by different threads are kept this
// far apart to avoid false sharing.
inline constexpr std::size_t cache_line = 64;

// CPU hint inside spin loops.
// Asks for every cache line of *obj in exclusive state, ahead of writing it
// (a hint: no fault, no effect on correctness).
template <class T>
inline void prefetch_for_write(const T* obj) noexcept {
  for (std::size_t off = 0; off < sizeof(T); off += cache_line)
    __builtin_prefetch(reinterpret_cast<const char*>(obj) + off, 1);
}

inline void cpu_relax() noexcept {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#elif defined(__riscv)
  // Zihintpause's `pause` (fence w,0: a HINT, so a plain no-op on cores
  // without the extension), encoded by hand for assemblers that lack it.
  asm volatile(".insn i 0x0f, 0, x0, x0, 0x010" ::: "memory");
#endif
}
}  // namespace goro::detail
