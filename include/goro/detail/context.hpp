// The context switch: declarations of the hand-written assembly (embedded
// from include/goro/arch/*.S by context_asm.hpp), the layout of a saved
// frame, and how a fresh context's first frame is built.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../os/os.hpp"
#include "config.hpp"
#include "context_asm.hpp"

extern "C" {
// Saves the current context on its stack, stores its stack pointer into
// *save_sp, resumes the context whose stack pointer is to_sp, and makes
// that context's own pending switch call return `arg`.
__attribute__((visibility("hidden"))) void* goro_v0_1_switch(void** save_sp, void* to_sp, void* arg);
// The same, resuming with a return instead of an indirect jump: for a
// switch between two contexts suspended at the same call site (yield's
// direct switch), which the return stack buffer then predicts.
__attribute__((visibility("hidden"))) void* goro_v0_1_switch_ret(void** save_sp, void* to_sp, void* arg);
// The same two without the FP control words (fp_control::shared): they
// stay the thread's. A context is resumed by the kind that suspended it.
__attribute__((visibility("hidden"))) void* goro_v0_1_switch_nofp(void** save_sp, void* to_sp, void* arg);
__attribute__((visibility("hidden"))) void* goro_v0_1_switch_ret_nofp(void** save_sp, void* to_sp, void* arg);
// First resume address of a fresh context (calls the entry function).
__attribute__((visibility("hidden"))) void goro_v0_1_start();
}

namespace goro::detail {

// Frame layout, mirrored from the table at the top of each .S file.
struct switch_frame {
#if defined(__x86_64__) && defined(_WIN64)
  std::uint32_t mxcsr;
  std::uint16_t x87_cw;
  std::uint16_t pad;
  std::uint64_t stack_base, stack_limit, deallocation_stack;  // the TEB's, for this stack
  alignas(16) unsigned char xmm6_15[160];
  std::uint64_t exception_list;  // the TEB's (Wine's handler frames; ~0: none)
  std::uint64_t r15, r14, r13, r12, rsi, rdi, rbx, rbp;
  void* resume;
#elif defined(__x86_64__)
  std::uint32_t mxcsr;
  std::uint16_t x87_cw;
  std::uint16_t pad;
  std::uint64_t r15, r14, r13, r12, rbx, rbp;
  void* resume;
#elif defined(__aarch64__)
  std::uint64_t x19, x20, x21, x22, x23, x24, x25, x26, x27, x28, x29;
  void* resume;  // x30
  double d8, d9, d10, d11, d12, d13, d14, d15;
  std::uint64_t fpcr;
  std::uint64_t pad;
#elif defined(__riscv) && __riscv_xlen == 64
  std::uint64_t s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11;
  void* resume;  // ra
  double fs0, fs1, fs2, fs3, fs4, fs5, fs6, fs7, fs8, fs9, fs10, fs11;
  std::uint64_t frm;
#endif
};
#if defined(__x86_64__) && defined(_WIN64)
static_assert(offsetof(switch_frame, stack_base) == 8 && offsetof(switch_frame, deallocation_stack) == 24);
static_assert(offsetof(switch_frame, xmm6_15) == 32 && offsetof(switch_frame, exception_list) == 192);
static_assert(offsetof(switch_frame, r15) == 200 && offsetof(switch_frame, rsi) == 232);
static_assert(offsetof(switch_frame, rbx) == 248 && offsetof(switch_frame, resume) == 264);
static_assert(sizeof(switch_frame) == 272);
#elif defined(__x86_64__)
static_assert(offsetof(switch_frame, mxcsr) == 0 && offsetof(switch_frame, x87_cw) == 4);
static_assert(offsetof(switch_frame, r15) == 8 && offsetof(switch_frame, r12) == 32);
static_assert(offsetof(switch_frame, rbx) == 40 && offsetof(switch_frame, rbp) == 48);
static_assert(offsetof(switch_frame, resume) == 56 && sizeof(switch_frame) == 64);
#elif defined(__aarch64__)
static_assert(offsetof(switch_frame, x19) == 0 && offsetof(switch_frame, x29) == 80);
static_assert(offsetof(switch_frame, resume) == 88 && offsetof(switch_frame, d8) == 96);
static_assert(offsetof(switch_frame, d14) == 144 && offsetof(switch_frame, fpcr) == 160);
static_assert(sizeof(switch_frame) == 176);
#elif defined(__riscv) && __riscv_xlen == 64
static_assert(offsetof(switch_frame, s0) == 0 && offsetof(switch_frame, s1) == 8);
static_assert(offsetof(switch_frame, s11) == 88 && offsetof(switch_frame, resume) == 96);
static_assert(offsetof(switch_frame, fs0) == 104 && offsetof(switch_frame, fs11) == 192);
static_assert(offsetof(switch_frame, frm) == 200 && sizeof(switch_frame) == 208);
#endif

using context_entry = void (*)(void* arg);

// Builds the first frame of a context at the top of [lo, lo + size) and
// returns its stack pointer. Switching to it calls entry(arg) on that stack
// with the ABI's alignment, default FP control state and a null frame
// pointer (so unwinders stop there). `entry` must never return.
inline void* make_context(void* lo, std::size_t size, context_entry entry) noexcept {
  auto top = (reinterpret_cast<std::uintptr_t>(lo) + size) & ~std::uintptr_t{15};
  auto* f = reinterpret_cast<switch_frame*>(top - sizeof(switch_frame));
  std::memset(static_cast<void*>(f), 0, sizeof(switch_frame));
#if defined(__x86_64__) && defined(_WIN64)
  f->mxcsr = 0x1f80;   // as below
  // 64-bit precision, as MinGW-w64's start-up code leaves every thread
  // (fninit in _fpreset; GCC's long double is the 80-bit format), not the
  // 53 bits of MSVC's default.
  f->x87_cw = 0x037f;
  f->rbx = reinterpret_cast<std::uint64_t>(entry);
  // The TEB's view of this stack (context_win64.S): the system unwinder
  // accepts frames in [stack_limit, stack_base).
  f->stack_base = top;
  f->stack_limit = reinterpret_cast<std::uint64_t>(lo);
  f->deallocation_stack = reinterpret_cast<std::uint64_t>(lo);
  f->exception_list = ~std::uint64_t{0};
#elif defined(__x86_64__)
  f->mxcsr = 0x1f80;   // all exceptions masked, round to nearest
  f->x87_cw = 0x037f;  // the same for x87, 64-bit precision
  f->rbx = reinterpret_cast<std::uint64_t>(entry);
#elif defined(__aarch64__)
  f->x19 = reinterpret_cast<std::uint64_t>(entry);
  f->fpcr = 0;
#elif defined(__riscv) && __riscv_xlen == 64
  f->s1 = reinterpret_cast<std::uint64_t>(entry);
  f->frm = 0;  // round to nearest, ties to even
#endif
  f->resume = reinterpret_cast<void*>(&goro_v0_1_start);
  return f;
}

// fp_shared: the policy's fp_control is shared (m_base::fp_shared); one
// runtime switches all its contexts with one kind, so each context is
// resumed by the kind that suspended it (the frame layout is the same).
// The scheduler's switches (m.hpp) make the same choice inline.
GORO_ALWAYS_INLINE void* raw_switch(void** save_sp, void* to_sp, void* arg, bool fp_shared) noexcept {
  return fp_shared ? goro_v0_1_switch_nofp(save_sp, to_sp, arg) : goro_v0_1_switch(save_sp, to_sp, arg);
}

GORO_ALWAYS_INLINE void* raw_switch_ret(void** save_sp, void* to_sp, void* arg, bool fp_shared) noexcept {
  return fp_shared ? goro_v0_1_switch_ret_nofp(save_sp, to_sp, arg) : goro_v0_1_switch_ret(save_sp, to_sp, arg);
}

// Measures the raw switch (no scheduler): two contexts on a private stack
// ping-pong `n` times; returns nanoseconds per switch. Used by the
// context-switch benchmark against Boost.Context's jump_fcontext.
// fp_shared: the switch without the FP control words (fp_control::shared).
struct bench_switch_state {
  void* main_sp;
  void* co_sp;
  bool fp_shared;
};
inline void bench_switch_entry(void* arg) {
  auto* s = static_cast<bench_switch_state*>(arg);
  for (;;) raw_switch(&s->co_sp, s->main_sp, s, s->fp_shared);
}
inline double context_switch_bench(std::size_t n, bool fp_shared = false) {
  constexpr std::size_t size = 64 * 1024;
  void* mem = os::map_memory(size);
  if (!mem) return -1;
  bench_switch_state s{nullptr, make_context(mem, size, &bench_switch_entry), fp_shared};
  raw_switch(&s.main_sp, s.co_sp, &s, fp_shared);  // first entry
  auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < n; ++i) raw_switch(&s.main_sp, s.co_sp, &s, s.fp_shared);
  auto t1 = std::chrono::steady_clock::now();
  os::unmap_memory(mem, size);
  // each iteration is two switches (there and back)
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / (2.0 * static_cast<double>(n));
}

}  // namespace goro::detail
