// Asynchronous (signal) preemption, policy preemption::signal (Go's
// preemptM / doSigPreempt / asyncPreempt, src/runtime/preempt.go and
// signal_*.go; our own code, a different return path).
//
// sysmon, after setting a goroutine's cooperative preempt flag, sends
// SIGURG (os::preempt_thread) to the thread running it when the goroutine is inside a
// goro::async_preemptible scope (g::async_scope > 0). The handler runs on
// the M's sigaltstack and never switches there (a switch inside a handler
// leaves SIGURG blocked and carries this thread's sigaltstack to whichever
// thread resumes the goroutine). Instead, like Go's pushCall, it makes the
// interrupted goroutine "call" a trampoline when the handler returns
// (os::push_sigreturn_call, os/linux/signal_context.hpp):
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

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "../os/os.hpp"
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
inline constexpr bool async_preempt_supported = os::async_preemption_ported;
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

// Whether pc is in goro's own assembly (the switch, the first frame, the
// trampoline), which is never preempted: its stack and, on Windows, the
// thread information block's stack fields are mid-change there. On ELF
// the functions share one section, [goro_v0_1_switch, goro_v0_1_asm_end).
// On Windows each has a section of its own, placed by the linker, and
// os::pc_preemptible excludes their ranges (os/windows/preempt.hpp).
inline bool pc_in_goro_asm(std::uintptr_t pc) noexcept {
#if defined(_WIN32)
  (void)pc;
  return false;
#else
  return pc >= reinterpret_cast<std::uintptr_t>(&goro_v0_1_switch) &&
         pc < reinterpret_cast<std::uintptr_t>(&goro_v0_1_asm_end);
#endif
}

// The decision and the context rewrite for the M m, which is stopped in
// the state uc holds (on Linux: the handler on m's own thread; on Windows:
// sysmon, with m's thread suspended); true when injected.
__attribute__((no_sanitize("address"))) inline bool async_preempt_inject_m(os::signal_context* uc,
                                                                           m_base* m) noexcept {
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
  const std::uintptr_t pc = os::context_pc(uc);
  const std::uintptr_t sp = os::context_sp(uc);
  // Never inside the switch or the trampoline, nor where the OS layer
  // says no (Windows: outside the module holding goro's code).
  if (pc_in_goro_asm(pc) || !os::pc_preemptible(pc)) return false;
  // The interrupted sp must be on gp's stack (it is not while g0 runs the
  // scheduler with curg already set, nor on some other stack).
  if (sp <= lo || sp > hi) return false;
  return os::push_sigreturn_call(uc, lo + async_preempt_stack_margin,
                                 reinterpret_cast<std::uintptr_t>(&goro_v0_1_async_preempt),
                                 reinterpret_cast<std::uintptr_t>(&async_preempt_yield),
                                 reinterpret_cast<std::uintptr_t>(m));
}

// The Linux handler's entry: the M is this thread's own.
// When it declines, the handler passes the signal on (os::install_preempt_handler).
__attribute__((no_sanitize("address"))) inline bool async_preempt_inject(os::signal_context* uc) noexcept {
  return async_preempt_inject_m(uc, tls_current_m);  // direct read: this thread, no switch in between
}

// Once per process, by the first signal-mode runtime.
inline void install_async_preempt_handler() noexcept {
  if constexpr (async_preempt_supported) {
    static std::once_flag once;
    std::call_once(once, [] { os::install_preempt_handler<&async_preempt_inject>(); });
  }
}

// sysmon side (preemptM), after request_preempt(gp): signal the thread
// running gp if gp is inside an async_preemptible scope. mm may be stale
// (gp moved on): the handler then finds nothing to do. The caller holds
// the scheduler's m_record_lock_, so mm and its thread are alive: other
// Ms live until shutdown, after sysmon has stopped, and the run() caller's
// M is taken off every P under that lock before run() returns.
inline void async_preempt_signal(g* gp, m_base* mm) noexcept {
  if constexpr (async_preempt_supported) {
    if (mm && mm->async_signal && gp->async_scope.load(std::memory_order_relaxed) != 0)
      os::preempt_thread<m_base, &async_preempt_inject_m>(mm->os_thread, mm);
  }
}

}  // namespace goro::detail
