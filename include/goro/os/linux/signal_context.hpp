// The interrupted context a signal handler receives (ucontext_t), per ISA:
// reading its pc and sp, and making the interrupted code call a
// trampoline when the handler returns (Go's sigctxt and its pushCall,
// signal_linux_amd64.go / signal_amd64.go, signal_arm64.go). Used by
// asynchronous preemption (detail/async_preempt.hpp, which explains the
// scheme); the trampoline is goro_v0_1_async_preempt in arch/*.S.
#pragma once

#include <signal.h>
#include <ucontext.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace goro::detail::os {

using signal_context = ucontext_t;

// Asynchronous preemption works here (os/os.hpp).
inline constexpr bool async_preemption_ported = true;

inline std::uintptr_t context_pc(const signal_context* uc) noexcept {
#if defined(__x86_64__)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__riscv)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.__gregs[REG_PC]);
#else
  return static_cast<std::uintptr_t>(uc->uc_mcontext.pc);
#endif
}

inline std::uintptr_t context_sp(const signal_context* uc) noexcept {
#if defined(__x86_64__)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
#elif defined(__riscv)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.__gregs[REG_SP]);
#else
  return static_cast<std::uintptr_t>(uc->uc_mcontext.sp);
#endif
}

// Word-wise copy that the compiler cannot turn into a memcpy call (ASan's
// interceptor would check the goroutine stack below sp, whose shadow may
// hold stale poison from earlier deeper frames).
__attribute__((no_sanitize("address"))) inline void signal_frame_copy(std::uintptr_t dst, const void* src,
                                                                      std::size_t n) noexcept {
  auto* d = reinterpret_cast<volatile unsigned char*>(dst);
  const auto* s = static_cast<const volatile unsigned char*>(src);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    *reinterpret_cast<volatile std::uint64_t*>(d + i) = *reinterpret_cast<const volatile std::uint64_t*>(s + i);
  for (; i < n; ++i) d[i] = s[i];
}

// Copies the signal frame the kernel built (the ucontext; on x86-64 also
// the xsave area it points at; on AArch64 the fpsimd record and on RISC-V
// the f/d state are inside it)
// onto the interrupted stack below its sp (and below the x86-64 red zone),
// then points the live context at `trampoline` with sp at that copy and
// `fn` and `arg` in the registers the trampoline reads (x86-64: rax = fn,
// rdi = arg; AArch64: x1 = fn, x0 = arg; RISC-V: a1 = fn, a0 = arg). When the handler returns, the
// kernel resumes the interrupted code in the trampoline, which calls
// fn(arg) and then issues rt_sigreturn on the copy. False, leaving the
// context untouched, when the copy would reach below stack_limit or the
// frame cannot be copied (a malformed or spilled-out record).
__attribute__((no_sanitize("address"))) inline bool push_sigreturn_call(signal_context* uc, std::uintptr_t stack_limit,
                                                                        std::uintptr_t trampoline, std::uintptr_t fn,
                                                                        std::uintptr_t arg) noexcept {
  const std::uintptr_t sp = context_sp(uc);
#if defined(__x86_64__)
  // The xsave area: its size is in the software bytes the kernel stores
  // in the fxsave area's reserved tail (struct _fpx_sw_bytes, offset 464).
  const auto* fp = reinterpret_cast<const unsigned char*>(uc->uc_mcontext.fpregs);
  if (!fp) return false;
  std::uint32_t magic1 = 0, extended = 0;
  std::memcpy(&magic1, fp + 464, 4);
  std::memcpy(&extended, fp + 468, 4);
  std::size_t fp_size = magic1 == 0x46505853u ? extended : 512;  // FP_XSTATE_MAGIC1
  if (fp_size < 512 || fp_size > 64 * 1024) return false;
  // Kernel ucontext: everything up to the first 8 bytes of uc_sigmask
  // (glibc's ucontext_t adds a larger sigset and more after it).
  constexpr std::size_t uc_size = offsetof(ucontext_t, uc_sigmask) + 8;
  const std::uintptr_t top = sp - 128;                                     // skip the red zone
  const std::uintptr_t fp_dst = (top - fp_size) & ~std::uintptr_t{63};     // xrstor needs 64-byte alignment
  const std::uintptr_t uc_dst = (fp_dst - uc_size) & ~std::uintptr_t{15};  // rsp at the trampoline: 16-aligned
  if (uc_dst < stack_limit) return false;
  signal_frame_copy(fp_dst, fp, fp_size);
  signal_frame_copy(uc_dst, uc, uc_size);
  auto* copy = reinterpret_cast<ucontext_t*>(uc_dst);
  copy->uc_mcontext.fpregs = reinterpret_cast<fpregset_t>(fp_dst);
  uc->uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(uc_dst);
  uc->uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(trampoline);
  uc->uc_mcontext.gregs[REG_RAX] = static_cast<greg_t>(fn);
  uc->uc_mcontext.gregs[REG_RDI] = static_cast<greg_t>(arg);
#elif defined(__aarch64__)
  // A frame whose state spills out of the ucontext (extra_context, large
  // SVE state) is not copied: leave that preemption to the next request.
  {
    const unsigned char* rec = uc->uc_mcontext.__reserved;
    std::size_t off = 0;
    while (off + 8 <= sizeof uc->uc_mcontext.__reserved) {
      std::uint32_t magic, size;
      std::memcpy(&magic, rec + off, 4);
      std::memcpy(&size, rec + off + 4, 4);
      if (magic == 0) break;
      if (magic == 0x45585401u || size < 8) return false;  // EXTRA_MAGIC, or a malformed record
      off += size;
    }
  }
  // rt_sigreturn reads struct rt_sigframe { siginfo_t info; ucontext uc; }
  // at sp (16-aligned); AArch64 has no red zone.
  static_assert(sizeof(siginfo_t) == 128);
  constexpr std::size_t uc_size = sizeof(ucontext_t);
  const std::uintptr_t uc_dst = ((sp & ~std::uintptr_t{15}) - uc_size) & ~std::uintptr_t{15};
  const std::uintptr_t frame = uc_dst - sizeof(siginfo_t);
  if (frame < stack_limit) return false;
  signal_frame_copy(uc_dst, uc, uc_size);
  uc->uc_mcontext.sp = frame;
  uc->uc_mcontext.pc = trampoline;
  uc->uc_mcontext.regs[0] = arg;
  uc->uc_mcontext.regs[1] = fn;
  uc->uc_mcontext.pstate &= ~std::uint64_t{0xc00};  // BTYPE: the trampoline is entered by no branch
#elif defined(__riscv)
  // rt_sigreturn reads struct rt_sigframe { siginfo_t info; ucontext uc; }
  // at sp (16-aligned); RISC-V has no red zone.
  static_assert(sizeof(siginfo_t) == 128 && sizeof(ucontext_t) == 960);
  static_assert(sizeof uc->uc_mcontext.__fpregs == 528);
  constexpr std::size_t uc_size = sizeof(ucontext_t);
  constexpr std::size_t fp_off = offsetof(ucontext_t, uc_mcontext.__fpregs);
  // qemu-user builds a shorter frame than the kernel (its sigcontext ends
  // after fcsr: a 704-byte ucontext) and puts it at the very top of the
  // alternate stack, so reading a whole ucontext_t there would run past
  // the stack. Read no further than the top of the stack the frame is on;
  // the part left out is zeroed in the copy (rt_sigreturn ignores it).
  std::size_t avail = uc_size;
  {
    stack_t ss{};
    const auto src = reinterpret_cast<std::uintptr_t>(uc);
    if (sigaltstack(nullptr, &ss) == 0 && (ss.ss_flags & SS_ONSTACK)) {
      const auto lo = reinterpret_cast<std::uintptr_t>(ss.ss_sp);
      const std::uintptr_t hi = lo + ss.ss_size;
      if (src >= lo && src < hi && hi - src < avail) avail = hi - src;
    }
  }
  if (avail < fp_off + 32 * 8 + 4) return false;  // not even f0-f31 and fcsr: not a frame we know
  // The kernel's fp state ends in struct __riscv_extra_ext_header: a
  // reserved word (zero) at 516, then the first extension header's magic
  // and size, which chain state that the kernel puts after the ucontext
  // (the vector registers, RISCV_V_MAGIC); the end header is all zero.
  // Such a frame is larger than the ucontext and is not copied: leave that
  // preemption to the next request (a thread that has used the vector
  // unit is not preempted asynchronously while its V state is live).
  if (avail == uc_size) {
    const auto* fp = reinterpret_cast<const unsigned char*>(&uc->uc_mcontext.__fpregs);
    std::uint32_t reserved, magic;
    std::memcpy(&reserved, fp + 516, 4);
    std::memcpy(&magic, fp + 520, 4);
    if (reserved != 0 || magic != 0) return false;
  }
  const std::uintptr_t uc_dst = ((sp & ~std::uintptr_t{15}) - uc_size) & ~std::uintptr_t{15};
  const std::uintptr_t frame = uc_dst - sizeof(siginfo_t);
  if (frame < stack_limit) return false;
  signal_frame_copy(uc_dst, uc, avail);
  for (std::size_t i = avail; i < uc_size; ++i) reinterpret_cast<volatile unsigned char*>(uc_dst)[i] = 0;
  uc->uc_mcontext.__gregs[REG_SP] = frame;
  uc->uc_mcontext.__gregs[REG_PC] = trampoline;
  uc->uc_mcontext.__gregs[REG_A0] = arg;
  uc->uc_mcontext.__gregs[REG_A0 + 1] = fn;
#else
#error "goro: push_sigreturn_call: unsupported architecture"
#endif
  return true;
}

}  // namespace goro::detail::os
