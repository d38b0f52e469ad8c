// Stacks for the goroutine dump, found without frame pointers: the C++
// unwinder (libgcc's _Unwind_Backtrace, which reads the DWARF call frame
// information every -O2 build carries in .eh_frame) walks a parked
// goroutine's frames from its saved context.
//
// The walk starts on the dumping thread's own stack, in a trampoline,
// goro_v0_1_unwind_from(frame, fn, arg), whose call frame information
// does not describe its real caller: it says that the frame above it is
// the one a switch saved at `frame` (the goroutine's saved stack pointer,
// context.hpp's switch_frame): the canonical frame address is frame + the
// frame's size, the return address is the saved resume address, and the
// callee-saved registers are in their slots. So the unwinder, started in
// fn, steps through the trampoline into the goroutine's stack and on to
// its entry (goro_v0_1_start, which has no unwind info: the walk ends).
// The goroutine is not resumed and its stack is only read; the caller
// keeps it from running meanwhile (dump.hpp).
#pragma once

#if defined(_WIN64)
// Windows x64: the system unwinder, not libgcc's DWARF one.
#include "unwind_win64.hpp"
#else

#include <unwind.h>

#include <cstddef>
#include <cstdint>

#include "config.hpp"
#include "context.hpp"

#if defined(__x86_64__)
// DWARF expressions: DW_CFA_def_cfa_expression (0x0f) rbx + 64, then
// DW_CFA_expression (0x10) reg, rbx + slot for rip (16), rbp, rbx, r12-r15
// (DW_OP_breg3 = 0x73; offsets as SLEB128: 64 is 0xc0 0x00).
asm(R"goro_asm(
.ifndef goro_v0_1_unwind_from
.pushsection .text.goro_v0_1_unwind_from,"axG",%progbits,goro_v0_1_unwind_from,comdat
.weak goro_v0_1_unwind_from
.hidden goro_v0_1_unwind_from
.type goro_v0_1_unwind_from,%function
.weak goro_v0_1_unwind_from_end
.hidden goro_v0_1_unwind_from_end
.p2align 4
goro_v0_1_unwind_from:
    .cfi_startproc
    endbr64
    pushq %rbx
    .cfi_def_cfa_offset 16
    .cfi_offset %rbx, -16
    movq %rdi, %rbx
    movq %rdx, %rdi
    .cfi_escape 0x0f,0x03,0x73,0xc0,0x00
    .cfi_escape 0x10,0x10,0x02,0x73,0x38
    .cfi_escape 0x10,0x06,0x02,0x73,0x30
    .cfi_escape 0x10,0x03,0x02,0x73,0x28
    .cfi_escape 0x10,0x0c,0x02,0x73,0x20
    .cfi_escape 0x10,0x0d,0x02,0x73,0x18
    .cfi_escape 0x10,0x0e,0x02,0x73,0x10
    .cfi_escape 0x10,0x0f,0x02,0x73,0x08
    callq *%rsi
    popq %rbx
    ret
    .cfi_endproc
goro_v0_1_unwind_from_end:
.size goro_v0_1_unwind_from, .-goro_v0_1_unwind_from
.popsection
.endif
)goro_asm");
#elif defined(__aarch64__)
// The same with x19 holding the frame (DW_OP_breg19 = 0x83): CFA = x19 +
// 176; x30 (the return address column), x29 and x19-x28 from their slots.
asm(R"goro_asm(
.ifndef goro_v0_1_unwind_from
.pushsection .text.goro_v0_1_unwind_from,"axG",%progbits,goro_v0_1_unwind_from,comdat
.weak goro_v0_1_unwind_from
.hidden goro_v0_1_unwind_from
.type goro_v0_1_unwind_from,%function
.weak goro_v0_1_unwind_from_end
.hidden goro_v0_1_unwind_from_end
.p2align 4
goro_v0_1_unwind_from:
    .cfi_startproc
    hint #34
    stp x29, x30, [sp, #-32]!
    .cfi_def_cfa_offset 32
    .cfi_offset 29, -32
    .cfi_offset 30, -24
    str x19, [sp, #16]
    .cfi_offset 19, -16
    mov x19, x0
    mov x0, x2
    .cfi_escape 0x0f,0x03,0x83,0xb0,0x01
    .cfi_escape 0x10,0x1e,0x03,0x83,0xd8,0x00
    .cfi_escape 0x10,0x1d,0x03,0x83,0xd0,0x00
    .cfi_escape 0x10,0x13,0x02,0x83,0x00
    .cfi_escape 0x10,0x14,0x02,0x83,0x08
    .cfi_escape 0x10,0x15,0x02,0x83,0x10
    .cfi_escape 0x10,0x16,0x02,0x83,0x18
    .cfi_escape 0x10,0x17,0x02,0x83,0x20
    .cfi_escape 0x10,0x18,0x02,0x83,0x28
    .cfi_escape 0x10,0x19,0x02,0x83,0x30
    .cfi_escape 0x10,0x1a,0x02,0x83,0x38
    .cfi_escape 0x10,0x1b,0x03,0x83,0xc0,0x00
    .cfi_escape 0x10,0x1c,0x03,0x83,0xc8,0x00
    blr x1
    ldr x19, [sp, #16]
    ldp x29, x30, [sp], #32
    ret
    .cfi_endproc
goro_v0_1_unwind_from_end:
.size goro_v0_1_unwind_from, .-goro_v0_1_unwind_from
.popsection
.endif
)goro_asm");
#elif defined(__riscv) && __riscv_xlen == 64
// The same with s1 holding the frame (DWARF register 9, DW_OP_breg9 =
// 0x79): CFA = s1 + 208; ra (register 1, the return address column) from
// offset 96, s0 (8), s1 (9) and s2-s11 (18-27) from their slots.
asm(R"goro_asm(
.ifndef goro_v0_1_unwind_from
.pushsection .text.goro_v0_1_unwind_from,"axG",%progbits,goro_v0_1_unwind_from,comdat
.weak goro_v0_1_unwind_from
.hidden goro_v0_1_unwind_from
.type goro_v0_1_unwind_from,%function
.weak goro_v0_1_unwind_from_end
.hidden goro_v0_1_unwind_from_end
.p2align 4
goro_v0_1_unwind_from:
    .cfi_startproc
    addi sp, sp, -16
    .cfi_def_cfa_offset 16
    sd ra, 8(sp)
    .cfi_offset 1, -8
    sd s1, 0(sp)
    .cfi_offset 9, -16
    mv s1, a0
    mv a0, a2
    .cfi_escape 0x0f,0x03,0x79,0xd0,0x01
    .cfi_escape 0x10,0x01,0x03,0x79,0xe0,0x00
    .cfi_escape 0x10,0x08,0x02,0x79,0x00
    .cfi_escape 0x10,0x09,0x02,0x79,0x08
    .cfi_escape 0x10,0x12,0x02,0x79,0x10
    .cfi_escape 0x10,0x13,0x02,0x79,0x18
    .cfi_escape 0x10,0x14,0x02,0x79,0x20
    .cfi_escape 0x10,0x15,0x02,0x79,0x28
    .cfi_escape 0x10,0x16,0x02,0x79,0x30
    .cfi_escape 0x10,0x17,0x02,0x79,0x38
    .cfi_escape 0x10,0x18,0x03,0x79,0xc0,0x00
    .cfi_escape 0x10,0x19,0x03,0x79,0xc8,0x00
    .cfi_escape 0x10,0x1a,0x03,0x79,0xd0,0x00
    .cfi_escape 0x10,0x1b,0x03,0x79,0xd8,0x00
    jalr a1
    ld s1, 0(sp)
    ld ra, 8(sp)
    addi sp, sp, 16
    ret
    .cfi_endproc
goro_v0_1_unwind_from_end:
.size goro_v0_1_unwind_from, .-goro_v0_1_unwind_from
.popsection
.endif
)goro_asm");
#endif

extern "C" {
__attribute__((visibility("hidden"))) void goro_v0_1_unwind_from(const void* frame, void (*fn)(void*), void* arg);
__attribute__((visibility("hidden"))) extern const char goro_v0_1_unwind_from_end[];
}

namespace goro::detail {

inline constexpr std::size_t max_dump_frames = 64;

struct backtrace_buf {
  std::uintptr_t pc[max_dump_frames];
  std::size_t n = 0;
};

inline _Unwind_Reason_Code backtrace_step(_Unwind_Context* ctx, void* arg) noexcept {
  auto* b = static_cast<backtrace_buf*>(arg);
  const std::uintptr_t pc = _Unwind_GetIP(ctx);
  if (pc == 0 || b->n == max_dump_frames) return _URC_END_OF_STACK;
  b->pc[b->n++] = pc;
  return _URC_NO_REASON;
}

GORO_NOINLINE inline void backtrace_here(void* arg) noexcept { _Unwind_Backtrace(&backtrace_step, arg); }

// The return addresses of the frames of a goroutine switched out with its
// saved stack pointer at sp, innermost first (its entry's frame last).
// The goroutine must not run meanwhile.
inline void backtrace_from(const void* sp, backtrace_buf& out) noexcept {
  backtrace_buf all;
  goro_v0_1_unwind_from(sp, &backtrace_here, &all);
  // Drop backtrace_here and the trampoline.
  const auto lo = reinterpret_cast<std::uintptr_t>(&goro_v0_1_unwind_from);
  const auto hi = reinterpret_cast<std::uintptr_t>(goro_v0_1_unwind_from_end);
  std::size_t i = 0;
  while (i < all.n && !(all.pc[i] > lo && all.pc[i] <= hi)) ++i;
  out.n = 0;
  for (++i; i < all.n; ++i) out.pc[out.n++] = all.pc[i];
}

// The calling thread's own frames, innermost first (this one excluded).
GORO_NOINLINE inline void backtrace_self(backtrace_buf& out) noexcept {
  out.n = 0;
  _Unwind_Backtrace(&backtrace_step, &out);
}

}  // namespace goro::detail

#endif  // !_WIN64
