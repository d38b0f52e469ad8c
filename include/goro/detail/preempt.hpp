// Cooperative preemption requests (Go's gp.preempt + preemptone).
//
// sysmon sets a running goroutine's g::preempt flag when its P has run the
// same schedule tick for a whole time slice; the goroutine honours it at
// its next safe point (goro::preempt_point(), goro::go(), the end of
// goro::blocking) by yielding to the global run queue.
//
// The fast path of preempt_point() must not touch TLS: the current M is
// read only through the non-inlined current_m() (DESIGN.md section 7), a
// call that would cost more than the check itself. So besides the per-G
// flag there is one process-wide count of set flags, preempt_pending: the
// inlined check is a relaxed load of that global and a never-taken branch;
// only while some goroutine somewhere has a request outstanding does the
// check go on to read its own G's flag.
//
// A request is honoured at every goro call that can switch (Go checks at
// every runtime call's prologue): safe_point() at the entry of channel
// operations, select and the semaphore behind the sync primitives, and
// preempt_point(). A call that parks instead ends the slice for whoever
// inherits it (the scheduler's park path, sched.hpp execute): without
// that, a pair of goroutines handing a value back and forth through
// runnext would drop every request and keep the P for ever (Go's
// PingPongHog).
//
// Invariant: preempt_pending == number of g records whose preempt is true
// (each false->true exchange adds one, each true->false exchange removes
// one), plus one per runtime ending its goroutines after main returned
// (main_return.hpp: every safe point then takes the slow path, where
// goexit.hpp's call_point() ends the goroutine). A stale request (sysmon flagged a G that meanwhile switched out)
// is cleared by execute() before the G runs again, as Go's execute does,
// and one left on the record of a goroutine that ended by gfput and by
// the runtime's end (release_memory), so the count drops back to 0 as
// soon as no request is outstanding.
#pragma once

#include <atomic>
#include <cstdint>

#include "config.hpp"
#include "g.hpp"
#include "m.hpp"

namespace goro::detail {

// On its own cache line: every preempt_point() reads it, only sysmon and
// preempted goroutines write it.
alignas(64) inline std::atomic<std::uint32_t> preempt_pending{0};

// sysmon side (preemptone). Relaxed is enough: a request is a hint, seen
// a little late at worst; the goroutine reads its flag after seeing the
// count, and both are the same thread's eventual writes.
inline void request_preempt(g* gp) noexcept {
  if (!gp->preempt.exchange(true, std::memory_order_relaxed))
    preempt_pending.fetch_add(1, std::memory_order_relaxed);
}

// Clears gp's request, if any (the goroutine honoured it, or a new slice starts).
GORO_ALWAYS_INLINE bool clear_preempt(g* gp) noexcept {
  if (GORO_LIKELY(!gp->preempt.load(std::memory_order_relaxed))) return false;
  if (!gp->preempt.exchange(false, std::memory_order_relaxed)) return false;
  preempt_pending.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

// Whether any goroutine (of any runtime) has a request outstanding.
GORO_ALWAYS_INLINE bool preempt_requested_anywhere() noexcept {
  return preempt_pending.load(std::memory_order_relaxed) != 0;
}

// The slow path of safe_point(): some goroutine has a request; if it is
// the caller, clear it and yield to the global run queue (counted in
// stats().preemptions). Never inside goro::blocking (the M has no P), on
// g0 (a timer callback) or on a plain thread.
#if !GORO_COMPILE_RUNTIME
void preempt_check_slow() noexcept;
#else
GORO_NOINLINE GORO_DECL void preempt_check_slow() noexcept {
  m_base* m = current_m();
  if (!m || !m->curg || m->in_blocking) return;
  g* gp = m->curg;
  if (!clear_preempt(gp)) return;
  m->after = after_switch::preempt;
  switch_to_g0(m, gp);
}
#endif

// A safe point: honours a pending preemption request of the caller. Inlined:
// one relaxed load of a global and a branch that is not taken.
GORO_ALWAYS_INLINE void safe_point() noexcept {
  if (GORO_UNLIKELY(preempt_requested_anywhere())) preempt_check_slow();
}

}  // namespace goro::detail
