// Goroutines wired to one M: lock_os_thread hand-offs (Go's startlockedm /
// stoplockedm, and a thread that exits with its locked G), and goroutines
// pinned to their M by async preemption, which wait for a P the same way.
// Part of scheduler<Policy> (sched.hpp).
// Included at the end of sched.hpp only.
#pragma once

namespace goro::detail {

// startlockedm: mm picked gp, which is wired to another M: hand mm's P
// to that M, which runs gp. Returns false if gp was unwired meanwhile
// (its M left: see stoplockedm); mm then runs it itself.
//
// Under lock_, so that the locked M cannot leave (and be freed) between
// our read of gp->lockedm and the hand-off. The locked M may still be on
// its way to stoplockedm, holding its old P: it gives that one away first
// and then finds nextp.
template <class Policy>
inline auto scheduler<Policy>::startlockedm(m* mm, g* gp) -> bool {
  sched_lock lk(*this);
  m* lm = static_cast<m*>(gp->lockedm.load(std::memory_order_relaxed));
  if (!lm || lm == mm) return false;
  if (GORO_UNLIKELY(lm->nextp != nullptr)) {
    // async preemption: lm has two wired Gs (its locked G and the token of
    // its pinned ones, see m_loop) and was handed a P for the other: gp
    // waits its turn in the global queue; mm keeps its P.
    globq_.push_back(gp);
    return true;
  }
  p* pp = mm->pp;
  releasep(mm);
  lm->nextp = pp;
  lm->locked_handed = gp;
  if (lm->locked_wait) {
    lm->locked_wait = false;
    --nmlocked_wait_;
  }
  lm->park_note.wake();  // under lock_: lm cannot be freed before we return
  return true;
}

// stoplockedm: mm's locked G stopped running (it parked, yielded or was
// preempted, or left goro::blocking without a P): give mm's P away and
// sleep until a P is handed back with the G (startlockedm). Returns false
// when mm must leave instead (shutdown, or the run() caller's M once main
// finished or deadlocked): then the G is unwired, under the same lock
// hold, so no startlockedm can hand this M a P any more.
//
// Also the "wedged" state of the run() caller's M after a goroutine exited
// locked to it (drop_locked_thread): no lockedg, it sleeps until it must
// leave.
//
// Wake-ups: every waker changes state (nextp, deadlock_, main_done_,
// exiting_) before its wake; the note is cleared before the state is read
// under lock_, so either the read sees the change or the wake comes after
// the clear.
template <class Policy>
inline auto scheduler<Policy>::stoplockedm(m* mm) -> bool {
  if (mm->pp) handoffp_locked_m(mm);
  for (;;) {
    mm->park_note.clear();
    {
      sched_lock lk(*this);
      if (mm->nextp) {
        acquirep(mm, std::exchange(mm->nextp, nullptr));
        return true;
      }
      if (should_leave(mm)) {
        if (mm->locked_wait) {
          mm->locked_wait = false;
          --nmlocked_wait_;
        }
        if (g* gp = std::exchange(mm->lockedg, nullptr)) gp->lockedm.store(nullptr, std::memory_order_relaxed);
        return false;
      }
      if (!mm->locked_wait) {
        mm->locked_wait = true;
        ++nmlocked_wait_;
        checkdead(lk, mm);
      }
    }
    if (mm->run_caller)
      deadcheck_ops::sleep(*this, mm);  // checkdead: confirms a suspected deadlock
    else
      mm->park_note.sleep();
  }
}

// goexit0 with a locked G (Go: "the thread may have tainted state"): the
// thread does not go back to the pool. A thread M hands its P on and its
// thread exits (returns false: leave m_loop). The run() caller's thread
// cannot exit: once main finished it leaves run() as usual; before that
// it is wedged (sleeps, without a P) until it must leave (Go keeps a
// wedged m0 the same way).
template <class Policy>
inline auto scheduler<Policy>::drop_locked_thread(m* mm) -> bool {
  mm->exit_thread = false;
  if (mm->run_caller) {
    if (!should_leave(mm)) (void)stoplockedm(mm);  // no lockedg: returns only when mm must leave
    leave(mm);
    return false;
  }
  handoffp_locked_m(mm);
  {
    // async preemption: no P names this M any more, so sysmon never
    // signals its thread once joined (as run_main does for the run() caller).
    std::lock_guard<spinlock> lk(m_record_lock_);
    for_each_p([&](p* pp) {
      m_base* self = mm;
      pp->sysmon_m.compare_exchange_strong(self, nullptr, std::memory_order_relaxed);
    });
  }
  sched_lock lk(*this);
  ++nmexited_;                             // its record stays in allm_ until shutdown
  mm->link = std::exchange(mexited_, mm);  // its thread is joined by the next newm (join_exited_ms)
  checkdead(lk, mm);
  return false;
}

// handoffp(releasep()) for an M that will not look for work itself: if
// the P goes idle with timers, make sure some M watches them (the end of
// Go's handoffp: wakeNetPoller). Otherwise a locked G's own sleep timer,
// left on this P, could have no M to fire it.
template <class Policy>
inline auto scheduler<Policy>::handoffp_locked_m(m* mm) -> void {
  p* pp = mm->pp;
  releasep(mm);
  handoffp(pp);
  if (std::int64_t when = pp->timers.earliest(); when != 0) wake_for_timer(when);
}

// async preemption: mm holds goroutines preempted by SIGURG, which only
// mm may resume (their code may keep this thread's TLS addresses in
// registers, and their rt_sigreturn restores this thread's sigaltstack).
// Alternate: one G from the run queues (local, then global) if there is
// one, then the oldest pinned G. mm keeps its P meanwhile; find_runnable
// (timers, stealing, idling, leaving) waits until no pinned G is left.
// When mm loses its P (a goro::blocking call, or a hand-off to a locked
// M) it waits for one in park_pinned.
template <class Policy>
inline auto scheduler<Policy>::next_with_pinned(m* mm) -> g* {
  p* pp = mm->pp;
  // checkTimers, as find_runnable does first: while hogs keep being
  // async-preempted this M never gets to find_runnable, and the P's
  // timers (a ticker, a sleeper) would never fire (benchmarks/tail_latency
  // --async 1 hung). What they ready lands in pp's run queue, taken below.
  if (pp && pp->timers.earliest() != 0) pp->timers.run_due(nanotime());
  // gomaxprocs: and those of retired Ps, as find_runnable does (else a
  // sleeper left on one waited for the hogs to end).
  if (GORO_UNLIKELY(created_ps() != active_ps())) run_retired_timers();
  if (!mm->async_queued_turn && pp) {
    bool inherit_unused;  // a new slice: m_loop runs it with inherit false
    g* gp = next_local(pp, inherit_unused, [&] { return glob_get(pp, 1); });
    if (!gp) gp = glob_get(pp, 0);
    if (gp) {
      mm->async_queued_turn = true;
      return gp;
    }
  }
  mm->async_queued_turn = false;
  g* gp = mm->async_pinned;
  mm->async_pinned = gp->link;
  if (!mm->async_pinned) mm->async_pinned_tail = nullptr;
  gp->link = nullptr;
  return gp;
}

// async preemption: mm holds pinned Gs but no P. It waits for one the way
// a locked M does (Go's stoplockedm / startlockedm): its oldest pinned G
// goes to the global queue wired to mm for the time being (the token), so
// whichever M picks it hands its P to mm, which resumes it here and runs
// its other pinned Gs. A token is never unwired by stoplockedm's leave
// path: only shutdown (no goroutine left) or the run() caller's M (which
// never pins, see m_base::keeps_main) leave there.
template <class Policy>
inline auto scheduler<Policy>::park_pinned(m* mm) -> void {
  mm->lockedg = mm->async_pinned;
  queue_token(mm);
}

// The oldest pinned G goes to the global queue as mm's token (wired to mm).
template <class Policy>
inline auto scheduler<Policy>::queue_token(m* mm) -> void {
  g* gp = mm->async_pinned;
  mm->async_pinned = gp->link;
  if (!mm->async_pinned) mm->async_pinned_tail = nullptr;
  gp->link = nullptr;
  mm->async_token = gp;
  gp->lockedm.store(mm, std::memory_order_relaxed);  // published by the queue's lock
  requeue_global(gp);
}

// The token came back with a P: an ordinary pinned G again (mm stays
// wired to a G that locked it meanwhile, see m_loop).
template <class Policy>
inline auto scheduler<Policy>::unwire_token(m* mm, g* gp) noexcept -> void {
  mm->async_token = nullptr;
  if (mm->lockedg == gp) mm->lockedg = nullptr;
  gp->lockedm.store(nullptr, std::memory_order_relaxed);
}

}  // namespace goro::detail
