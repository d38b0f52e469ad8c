// The goroutine's side of main_return::unwind (runtime.hpp options): when
// the main goroutine returns, every goroutine still alive ends as if it had
// called goro::exit(). The runtime's side (waking parked goroutines, the
// 1 s report, waiting) is main_return.hpp; this header holds the checks a
// goro call makes on the way in and after a wait.
//
// - call_point(): at the entry of a goro call that can switch (channel
//   operations, select, preempt_point, yield, go, sleep, the end of
//   goro::blocking), and check_may_park() (inside_blocking.hpp) where a
//   sync primitive is about to park. It honours a preemption request, then
//   ends the goroutine if its runtime is ending goroutines. Fast path: the
//   one relaxed load of preempt_pending that safe_point() makes anyway (an
//   ending runtime counts one there, see main_return.hpp).
// - exit_if_killed(): after a park, where the runtime may have woken the
//   goroutine to end it (its waiter taken off the queue: the wait did not
//   happen, and nothing was handed over).
//
// Ending a goroutine sets its exit_state to unwinding and throws
// goexit_unwind (destructors run); from then on its goro calls behave
// normally, so destructors may send, close, unlock, signal a wait_group,
// even park (Go runs deferred calls normally during Goexit). A handler that
// swallows goexit_unwind (catch (...) without rethrow) puts the goroutine
// back to `killed`: its next goro call throws again. Without exceptions the
// goroutine switches out for good, as goro::exit() does there (no
// destructors run).
#pragma once

#include <atomic>

#include "../error.hpp"
#include "config.hpp"
#include "g.hpp"
#include "m.hpp"
#include "preempt.hpp"

namespace goro::detail {

// Whether gp must end at this goro call.
GORO_ALWAYS_INLINE bool must_end(const g* gp) noexcept {
  const exit_state st = gp->exiting.load(std::memory_order_relaxed);
  if (GORO_LIKELY(st == exit_state::none)) return gp->sched->ending() && !gp->no_kill;
  return st == exit_state::killed;
}

// Ends the calling goroutine gp (goro::exit()'s unwinding, or its switch
// without exceptions).
#if !GORO_COMPILE_RUNTIME
[[noreturn]] void end_goroutine(g* gp);
#else
[[noreturn]] GORO_NOINLINE GORO_DECL void end_goroutine(g* gp) {
  gp->exiting.store(exit_state::unwinding, std::memory_order_relaxed);
#if GORO_EXCEPTIONS
  throw goexit_unwind{};
#else
  m_base* m = current_m();
  gp->closure_op = nullptr;
  m->after = after_switch::exit;
  switch_to_g0(m, gp);
  fatal("goro: internal error: an exited goroutine was resumed");
#endif
}
#endif

// The slow path of call_point(): a preemption request, then the end.
#if !GORO_COMPILE_RUNTIME
void call_point_slow();
#else
GORO_NOINLINE GORO_DECL void call_point_slow() {
  preempt_check_slow();
  m_base* m = current_m();
  if (!m || !m->curg || m->in_blocking) return;
  if (must_end(m->curg)) end_goroutine(m->curg);
}
#endif

// A goro call's entry (see the top of this file). Inlined: one relaxed
// load of a global and a branch that is not taken.
GORO_ALWAYS_INLINE void call_point() {
  if (GORO_UNLIKELY(preempt_requested_anywhere())) call_point_slow();
}

// After a park of gp (nullptr: a plain thread): ends gp if the runtime
// woke it for that.
GORO_ALWAYS_INLINE void exit_if_killed(g* gp) {
  if (gp && GORO_UNLIKELY(gp->exiting.load(std::memory_order_relaxed) == exit_state::killed)) end_goroutine(gp);
}

// Around goro calls that cannot unwind (a library destructor, noexcept:
// goexit_unwind would be std::terminate): the goroutine is neither woken
// to end nor ended at its goro calls meanwhile; it ends at its next goro
// call after the scope. Its waits must end by themselves.
class no_unwind_scope {
 public:
  no_unwind_scope() noexcept : gp_(current_g()), prev_(gp_ && gp_->no_kill) {
    if (gp_) gp_->no_kill = true;
  }
  ~no_unwind_scope() {
    if (gp_) gp_->no_kill = prev_;
  }
  no_unwind_scope(const no_unwind_scope&) = delete;
  no_unwind_scope& operator=(const no_unwind_scope&) = delete;

 private:
  g* gp_;
  bool prev_;
};

// Whether gp was woken to end: then it is unwinding from here on (its goro
// calls behave normally) and the caller must restore what the wait's
// contract says before calling end_goroutine (cond::wait re-locks).
GORO_ALWAYS_INLINE bool take_kill(g* gp) noexcept {
  if (!gp || GORO_LIKELY(gp->exiting.load(std::memory_order_relaxed) != exit_state::killed)) return false;
  gp->exiting.store(exit_state::unwinding, std::memory_order_relaxed);
  return true;
}

}  // namespace goro::detail
