// Asynchronous (signal) preemption, policy preemption::signal (Go's
// preemptM / doSigPreempt / asyncPreempt, src/runtime/preempt.go and
// signal_*.go; our own code, a different return path).
//
// sysmon, after setting a goroutine's cooperative preempt flag, sends
// SIGURG to the thread running it when the goroutine is inside a
// goro::async_preemptible scope (g::async_scope > 0). The handler runs on
// the M's sigaltstack and never switches there (a switch inside a handler
// leaves SIGURG blocked and carries this thread's sigaltstack to whichever
// thread resumes the goroutine). Instead, like Go's pushCall, it makes the
// interrupted goroutine "call" a trampoline when the handler returns:
//
//   1. it copies the whole signal frame the kernel built (ucontext; on
//      x86-64 also the xsave area the ucontext points at; on AArch64 the
//      fpsimd record is inside the ucontext) onto the goroutine's own
//      stack, below the interrupted sp (and below the x86-64 red zone);
//   2. it points the live context at goro_v0_1_async_preempt (the .S
//      files) with sp at that copy and the yield function in a register;
//   3. it returns: the kernel resumes the goroutine in the trampoline,
//      with the handler's mask and altstack already restored.
//
// The trampoline calls async_preempt_yield (an ordinary cooperative
// switch to g0), and when the goroutine is resumed it issues rt_sigreturn
// on the copy: the kernel restores every register — general, flags/NZCV,
// the full vector state (xsave incl. AVX/AVX-512 upper halves; q0-q31,
// FPSR, FPCR) — and the signal mask, and the interrupted instruction runs
// on. Go instead saves registers in the trampoline and returns with a
// `ret`/`JMP (R27)`; AArch64 C code leaves no register free for that jump
// (Go reserves R27), so goro returns through the kernel on both ISAs, one
// code path that restores state exactly.
//
// The rt_sigreturn also restores the sigaltstack recorded in the frame:
// that is this thread's own, because an async-preempted goroutine resumes
// on the same M (its code may also keep TLS addresses in registers). The
// scheduler guarantees it: see m_base::async_pinned (sched.hpp m_loop).
//
// When the handler does nothing (not ours, not safe), it passes the
// signal on to the SIGURG handler installed before goro's, if any.
#pragma once

#include <pthread.h>
#include <signal.h>
#include <ucontext.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "config.hpp"
#include "g.hpp"
#include "m.hpp"
#include "preempt.hpp"

extern "C" {
// The trampoline and the end of goro's assembly (context_*.S): a pc in
// [goro_v0_1_switch, goro_v0_1_asm_end) is never preempted.
__attribute__((visibility("hidden"))) void goro_v0_1_async_preempt();
__attribute__((visibility("hidden"))) void goro_v0_1_asm_end();
}

namespace goro::detail {

#if GORO_TSAN
// ThreadSanitizer cannot follow a goroutine that leaves a signal handler
// through a rewritten context (its signal bookkeeping and fiber switch
// would disagree): signal mode stays cooperative under TSan.
inline constexpr bool async_preempt_supported = false;
#else
inline constexpr bool async_preempt_supported = true;
#endif

// Stack left free below the frame copy for the yield path (the trampoline,
// async_preempt_yield, switch_to_g0, sanitizer hooks). A goroutine with
// less room is not preempted asynchronously (it stays cooperative).
inline constexpr std::size_t async_preempt_stack_margin = 4096;

// Goroutine side, called by the trampoline on the goroutine's stack, on
// the thread it was interrupted on, outside any signal handler: a plain
// cooperative switch. m->after is set first so that a SIGURG arriving
// from here on sees a switch in progress and leaves it alone.
inline void async_preempt_yield(m_base* m) noexcept {
  g* gp = m->curg;
  m->after = after_switch::async_preempt;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  clear_preempt(gp);
  switch_to_g0(m, gp);
  // Resumed on this same M (async_pinned), back to the trampoline.
}

// Word-wise copy that the compiler cannot turn into a memcpy call (ASan's
// interceptor would check the goroutine stack below sp, whose shadow may
// hold stale poison from earlier deeper frames).
__attribute__((no_sanitize("address"))) inline void async_copy(std::uintptr_t dst, const void* src, std::size_t n) noexcept {
  auto* d = reinterpret_cast<volatile unsigned char*>(dst);
  const auto* s = static_cast<const volatile unsigned char*>(src);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    *reinterpret_cast<volatile std::uint64_t*>(d + i) = *reinterpret_cast<const volatile std::uint64_t*>(s + i);
  for (; i < n; ++i) d[i] = s[i];
}

// The handler's decision and the context rewrite; true when injected.
__attribute__((no_sanitize("address"))) inline bool async_preempt_inject(ucontext_t* uc) noexcept {
  m_base* m = tls_current_m;  // direct read: this thread, no switch in between
  if (!m || !m->async_signal) return false;  // not an M of a signal-mode runtime
  g* gp = m->curg;
  // A goroutine (not g0), not in goro::blocking (no P), not already
  // switching (m->after is set before any switch and cleared by g0),
  // inside an async_preemptible scope, with a request outstanding.
  if (!gp || !gp->stack.lo || m->in_blocking || m->after != after_switch::none) return false;
  if (gp->async_scope.load(std::memory_order_relaxed) == 0 || !gp->preempt.load(std::memory_order_relaxed))
    return false;
  const auto lo = reinterpret_cast<std::uintptr_t>(gp->stack.lo);
  const auto hi = lo + gp->stack.size;
#if defined(__x86_64__)
  const auto pc = static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
  const auto sp = static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
#else
  const auto pc = static_cast<std::uintptr_t>(uc->uc_mcontext.pc);
  const auto sp = static_cast<std::uintptr_t>(uc->uc_mcontext.sp);
#endif
  // Never inside the switch or the trampoline.
  if (pc >= reinterpret_cast<std::uintptr_t>(&goro_v0_1_switch) &&
      pc < reinterpret_cast<std::uintptr_t>(&goro_v0_1_asm_end))
    return false;
  // The interrupted sp must be on gp's stack (it is not while g0 runs the
  // scheduler with curg already set, nor on some other stack).
  if (sp <= lo || sp > hi) return false;
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
  const std::uintptr_t top = sp - 128;                       // skip the red zone
  const std::uintptr_t fp_dst = (top - fp_size) & ~std::uintptr_t{63};  // xrstor needs 64-byte alignment
  const std::uintptr_t uc_dst = (fp_dst - uc_size) & ~std::uintptr_t{15};  // rsp at the trampoline: 16-aligned
  if (uc_dst < lo + async_preempt_stack_margin) return false;
  async_copy(fp_dst, fp, fp_size);
  async_copy(uc_dst, uc, uc_size);
  auto* copy = reinterpret_cast<ucontext_t*>(uc_dst);
  copy->uc_mcontext.fpregs = reinterpret_cast<fpregset_t>(fp_dst);
  uc->uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(uc_dst);
  uc->uc_mcontext.gregs[REG_RIP] = reinterpret_cast<greg_t>(&goro_v0_1_async_preempt);
  uc->uc_mcontext.gregs[REG_RAX] = reinterpret_cast<greg_t>(&async_preempt_yield);
  uc->uc_mcontext.gregs[REG_RDI] = reinterpret_cast<greg_t>(m);
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
  if (frame < lo + async_preempt_stack_margin) return false;
  async_copy(uc_dst, uc, uc_size);
  uc->uc_mcontext.sp = frame;
  uc->uc_mcontext.pc = reinterpret_cast<std::uintptr_t>(&goro_v0_1_async_preempt);
  uc->uc_mcontext.regs[0] = reinterpret_cast<std::uintptr_t>(m);
  uc->uc_mcontext.regs[1] = reinterpret_cast<std::uintptr_t>(&async_preempt_yield);
  uc->uc_mcontext.pstate &= ~std::uint64_t{0xc00};  // BTYPE: the trampoline is entered by no branch
#endif
  return true;
}

inline struct sigaction& previous_urg_action() noexcept {
  static struct sigaction prev;
  return prev;
}

inline void urg_handler(int sig, siginfo_t* info, void* ctx) noexcept {
  if (async_preempt_inject(static_cast<ucontext_t*>(ctx))) return;
  // Not a preemption we can take: the application's SIGURG handler, if any.
  struct sigaction& prev = previous_urg_action();
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
    prev.sa_sigaction(sig, info, ctx);
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler != nullptr) {
    prev.sa_handler(sig);
  }
  // SIGURG's default action is to ignore it.
}

// Once per process, by the first signal-mode runtime.
inline void install_async_preempt_handler() noexcept {
  if constexpr (async_preempt_supported) {
    static std::once_flag once;
    std::call_once(once, [] {
      struct sigaction sa {};
      sa.sa_sigaction = &urg_handler;
      sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
      sigemptyset(&sa.sa_mask);
      sigaction(SIGURG, &sa, &previous_urg_action());
    });
  }
}

// sysmon side (preemptM), after request_preempt(gp): signal the thread
// running gp if gp is inside an async_preemptible scope. mm may be stale
// (gp moved on): the handler then finds nothing to do. Ms' threads live
// until the runtime shuts down, after sysmon has stopped.
inline void async_preempt_signal(g* gp, m_base* mm) noexcept {
  if constexpr (async_preempt_supported) {
    if (mm && mm->async_signal && gp->async_scope.load(std::memory_order_relaxed) != 0)
      pthread_kill(mm->os_thread, SIGURG);
  }
}

}  // namespace goro::detail
