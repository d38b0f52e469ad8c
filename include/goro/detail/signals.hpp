// Stack overflow reporting: a SIGSEGV/SIGBUS handler running on a per-M
// alternate signal stack (os::install_fault_handler, os::thread_altstack)
// classifies faults by the current goroutine's
// stack bounds, and a canary at the bottom of every stack is checked each
// time a goroutine switches out (for stacks packed without guard regions).
#pragma once

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#if defined(__GLIBCXX__)
#include <ext/atomicity.h>
#endif

#include "../os/os.hpp"
#include "../stack.hpp"
#include "cpus.hpp"
#include "g.hpp"
#include "m.hpp"

namespace goro::detail {

inline constexpr std::uint64_t stack_canary = 0x676f726f5f737461ull;  // "goro_sta"

// The canary: the lowest canary_words words of a stack without a guard
// region (small packed stacks, stacks from custom allocators, and larger
// default stacks past the mprotect budget where MADV_GUARD_INSTALL is
// missing), written when a goroutine gets the stack and checked each time it
// switches out. Several non-zero words, so an overflow that spares the
// lowest word, or stores zeros, is still seen. It costs a larger unguarded
// stack one more resident page (its lowest); guarded stacks have none.
inline constexpr int canary_words = 4;
inline constexpr std::uint64_t canary_word(int i) noexcept {
  return stack_canary ^ (0x0101010101010101ull * static_cast<std::uint64_t>(i + 1));
}
inline void write_canary(const stack_memory& s) noexcept {
  auto* w = static_cast<volatile std::uint64_t*>(s.lo);
  for (int i = 0; i < canary_words; ++i) w[i] = canary_word(i);
}
inline bool canary_intact(const stack_memory& s) noexcept {
  auto* w = static_cast<const volatile std::uint64_t*>(s.lo);
  bool ok = true;
  for (int i = 0; i < canary_words; ++i) ok &= w[i] == canary_word(i);
  return ok;
}

// Async-signal-safe formatting into a fixed buffer.
struct signal_safe_writer {
  char buf[256];
  std::size_t n = 0;
  void str(const char* s) noexcept {
    while (*s && n < sizeof buf) buf[n++] = *s++;
  }
  void dec(std::uint64_t v) noexcept {
    char t[24];
    int i = 0;
    do t[i++] = static_cast<char>('0' + v % 10);
    while ((v /= 10) && i < 24);
    while (i && n < sizeof buf) buf[n++] = t[--i];
  }
  void hex(std::uintptr_t v) noexcept {
    str("0x");
    char t[20];
    int i = 0;
    do t[i++] = "0123456789abcdef"[v & 15];
    while ((v >>= 4) && i < 20);
    while (i && n < sizeof buf) buf[n++] = t[--i];
  }
  void flush() noexcept { os::write_stderr(buf, n); }
};

// Prints `goro: goroutine N stack overflow: fault address A, stack [lo, hi) size S`
// and aborts.
[[noreturn]] inline void report_stack_overflow(const g* gp, std::uintptr_t fault) noexcept {
  signal_safe_writer w;
  auto lo = reinterpret_cast<std::uintptr_t>(gp->stack.lo);
  w.str("goro: goroutine ");
  w.dec(gp->id);
  w.str(" stack overflow: fault address ");
  w.hex(fault);
  w.str(", stack [");
  w.hex(lo);
  w.str(", ");
  w.hex(lo + gp->stack.size);
  w.str(") size ");
  w.dec(gp->stack.size);
  w.str("\n");
  w.flush();
  os::abort_process();  // past a user SIGABRT handler, which could resume us
}

// A goroutine without a guard region (a custom stack allocator) switched
// out: its canary words must be intact, or it ran past its stack.
inline void check_stack_canary(const g* gp) noexcept {
  if (GORO_UNLIKELY(gp->stack_canary && !canary_intact(gp->stack)))
    report_stack_overflow(gp, reinterpret_cast<std::uintptr_t>(gp->stack.lo));
}

// The fault handler's check (os::install_fault_handler): a fault in the
// guard region below the current goroutine's stack (or anywhere up to a
// guard's size below it: large frames jump over pages) is an overflow,
// reported here; any other fault is left to the previous handler.
inline void on_memory_fault(std::uintptr_t addr) noexcept {
  m_base* m = tls_current_m;  // direct read: we are on this thread, not switching
  if (m && m->curg && m->curg->stack.lo) {
    const g* gp = m->curg;
    auto lo = reinterpret_cast<std::uintptr_t>(gp->stack.lo);
    if (addr < lo + sizeof(std::uint64_t) && addr + guard_size >= lo) report_stack_overflow(gp, addr);
  }
}

// Binds, once, before any goroutine runs, the lazily bound library
// functions the runtime calls on goroutine stacks. An ELF program without
// -z now binds each on its first call, in the dynamic linker's resolver,
// on the caller's stack: glibc's x86-64 resolver reserves room for the
// whole register file (xsavec, ~2.7 KiB with AVX-512) and wrote up to
// ~1.8 KiB below a 2 KiB goroutine stack, into its neighbour (a goroutine
// napping in a contended spinlock, nanosleep's first call: tests/helpers/
// tiny_stack.cpp). The list is every C and C++ library call on the
// runtime's goroutine-side paths: locks (futex, sched_yield, nanosleep,
// pthread mutexes), clocks, the poller's wake-up write, allocation (g
// records and channels are over-aligned), element copies and errno.
// A program's own first calls are its own: docs/policies.md ("Small
// stacks") says when to link with -z now.
inline void resolve_runtime_symbols() noexcept {
#if GORO_EXCEPTIONS
  (void)eh_globals();  // not abi::__cxa_get_globals() itself: it is const, the call would be dropped
#endif
  std::atomic<std::uint32_t> word{0};
  os::futex_wake(&word, 1);
  os::futex_wait(&word, 1, 0);  // not equal: returns at once
  std::mutex mu;
  mu.lock();
  mu.unlock();
  os::yield_thread();
  os::sleep_ns(0);  // spinlock::nap
  (void)os::coarse_nanotime();
  (void)std::chrono::steady_clock::now();  // detail::nanotime
  (void)std::chrono::system_clock::now();  // time::now
  (void)os::current_thread();
  (void)os::page_size();
  (void)multicore();  // sysconf, which reads /sys with a buffer on the stack
#if defined(__GLIBCXX__) && !defined(_GLIBCXX_ATOMIC_BUILTINS)
  // shared_ptr's reference counts where libstdc++ does not inline them
  // (RISC-V): out-of-line calls into libstdc++.
  _Atomic_word w = 0;
  __gnu_cxx::__atomic_add(&w, 1);
  (void)__gnu_cxx::__exchange_and_add(&w, -1);
#endif
#if defined(__ELF__)
  (void)os::write_fd(-1, nullptr, 0);  // EBADF: the poller's break (an eventfd write)
  (void)os::read_fd(-1, nullptr, 0);
#endif
  errno = 0;
  void* volatile p = operator new(16);
  operator delete(p);
#if defined(__cpp_sized_deallocation)
  void* volatile q = operator new(16);
  operator delete(q, 16);
#endif
#if defined(__cpp_aligned_new)
  void* volatile a = operator new (64, std::align_val_t{64});
  operator delete (a, std::align_val_t{64});
#if defined(__cpp_sized_deallocation)
  void* volatile b = operator new (64, std::align_val_t{64});
  operator delete (b, 64, std::align_val_t{64});
#endif
#endif
  // Calls, not builtins the compiler expands: the size is not a constant.
  unsigned char from[64] = {}, to[64];
  const std::size_t volatile n = sizeof from;
  std::memcpy(to, from, n);
  std::memmove(to, to + 1, n - 1);
  std::memset(to, 0, n);
  asm volatile("" : : "r"(to) : "memory");
}

// Process-wide set-up, once: the fault handler and symbol resolution.
GORO_DECL void install_fault_handler() noexcept;

}  // namespace goro::detail

#if GORO_COMPILE_RUNTIME
namespace goro::detail {

GORO_DECL void install_fault_handler() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    resolve_runtime_symbols();
    os::install_fault_handler<&on_memory_fault>();
  });
}

}  // namespace goro::detail
#endif  // GORO_COMPILE_RUNTIME
