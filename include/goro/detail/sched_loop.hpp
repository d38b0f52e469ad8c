// The schedule loop (Go's schedule / findRunnable / execute / Gosched),
// one M at a time on its g0: pick the next G (find_runnable: timers, the
// global queue's turn, runnext and the local ring, the global batch, the
// network, stealing, then idling), run it (execute), carry out what it
// asked for when it switched out. yield (gosched) takes the same next G and
// may switch to it directly. Part of scheduler<Policy> (sched.hpp).
// Included at the end of sched.hpp only.
#pragma once

namespace goro::detail {

// Gosched = goschedImpl + schedule + execute. Go runs all of it on g0
// (mcall): two switches per yield. Here, when the next G is at hand and
// nothing else needs g0, the yielding G does schedule's and execute's
// work itself and switches straight to the next G, which then queues the
// yielder (direct_switch_done): the yielder is published only once it is
// off its stack, exactly as if g0 had done it. The next G is the one
// find_runnable would pick (the global queue's turn every
// global_poll_interval ticks, then runnext, then the local ring), and the
// yielder goes to the tail of the global queue: the same order as the
// slow path. Everything else goes through g0 (yield_fast_next says when).
template <class Policy>
inline auto scheduler<Policy>::gosched(m_base* mb) noexcept -> void {
  m* mm = static_cast<m*>(mb);
  g* gp = mm->curg;
  // async preemption: a switch is in progress from here on (the SIGURG
  // handler leaves the M alone, and curg changes below).
  mm->after = after_switch::yield;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  bool inherit = false;
  g* next = yield_fast_next(mm, inherit);
  // A G without a stack yet (lazy stacks) or wired to an M
  // (lockosthread): g0 starts it or hands it over (m_loop).
  if (next && next->stack.lo && next->lockedm.load(std::memory_order_relaxed) == nullptr) {
    begin_slice(mm, mm->pp, next, inherit);  // execute(next, inherit), as g0 would do it
    mm->direct_prev = gp;
    switch_g_to_g(mm, gp, next);
    return;
  }
  mm->yield_next = next;  // nullptr: g0 looks for work (find_runnable)
  mm->yield_next_inherit = inherit;
  switch_to_g0(mm, gp);
}

// The second half of gosched's direct switch, run by the G switched to,
// on its own stack: the yielder is off its stack now; check it as
// execute() does and queue it (goschedImpl).
template <class Policy>
inline auto scheduler<Policy>::direct_switch_done(m_base* mb) noexcept -> void {
  m* mm = static_cast<m*>(mb);
  g* gp = std::exchange(mm->direct_prev, nullptr);
  check_stack_canary(gp);
  gp->status.store(g_status::runnable, std::memory_order_relaxed);
  globq_.push_back(gp);
  // Holding no lock from here on: the M may be preempted again.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  mm->after = after_switch::none;
  wakep();
}

// The G gosched may switch to directly: none (nullptr) when g0 has work
// to do first — the M or its P is in a special state (goro::blocking,
// lockosthread, async-pinned Gs, a retired P, leaving), a timer is due
// (find_runnable runs it first), or the local queue is empty (the global
// queue's batch get and stealing run on g0, whose stack holds the batch).
template <class Policy>
inline auto scheduler<Policy>::yield_fast_next(m* mm, bool& inherit) noexcept -> g* {
  p* pp = mm->pp;
  if (!pp || mm->in_blocking || mm->lockedg || mm->async_pinned || should_leave(mm)) return nullptr;
  if (tracing::enabled()) return nullptr;  // the tracer records every run slice in execute()
  if (pp->id >= active_ps() || created_ps() != active_ps()) return nullptr;  // gomaxprocs
  if (std::int64_t when = pp->timers.earliest(); when != 0 && when <= nanotime()) return nullptr;
  // Not on g0: one G from the global queue, no batch.
  return next_local(pp, inherit, [&] {
    g* gp = globq_.pop_front();
    if (gp) pp->global_polls.inc(1);
    return gp;
  });
}

// The pick-next rule (Go's schedule): every global_poll_interval ticks the
// global queue first (take_global), so local ping-pong cannot starve it;
// then runnext (inherit: it takes over the current time slice) and the
// local ring. gosched's direct switch and an M with async-pinned
// goroutines pick by it; find_runnable writes the same rule out.
template <class Policy>
template <class TakeGlobal>
inline auto scheduler<Policy>::next_local(p* pp, bool& inherit, TakeGlobal&& take_global) -> g* {
  if (pp->schedtick % Policy::global_poll_interval == 0) {
    if (g* gp = take_global()) {
      inherit = false;
      return gp;
    }
  }
  auto r = pp->runq.get();
  inherit = r.inherit_time;
  return static_cast<g*>(r.item);
}

// `first`: a G to run at once (run()'s main goroutine, see run_main).
//
// lockosthread (Go's schedule): an M with a locked G runs nothing else:
// once that G stops running it hands its P away and sleeps until the G
// is runnable and some M hands it a P back (stoplockedm). An M that picks
// a G locked to another M hands its P to that M (startlockedm) and goes
// back to looking for work without a P.
template <class Policy>
inline auto scheduler<Policy>::m_loop(m* mm, g* first) -> void {
  for (;;) {
    bool inherit = false;
    g* gp;
    // async preemption: the locked G beside a token unlocked or exited: the
    // token is the M's wired G again, as park_pinned leaves it.
    if (GORO_UNLIKELY(mm->async_token != nullptr) && mm->lockedg == nullptr) mm->lockedg = mm->async_token;
    if (first) {  // lockosthread
      gp = std::exchange(first, nullptr);
    } else if (mm->lockedg) {  // lockosthread
      // async preemption: a G locked this M in a queue turn while it held
      // pinned Gs, which only it may resume: they wait for a P as a token
      // wired to this M beside the locked G (park_pinned), so the M resumes
      // them while the locked G is not running. Waiting for the locked G
      // alone stranded them (and it, if it waited for them: a false deadlock).
      if (GORO_UNLIKELY(mm->async_pinned != nullptr) && mm->async_token == nullptr) queue_token(mm);
      if (!stoplockedm(mm)) {
        leave(mm);
        return;
      }
      gp = mm->locked_handed ? std::exchange(mm->locked_handed, nullptr) : mm->lockedg;  // set with nextp
      if (GORO_UNLIKELY(gp == mm->async_token)) unwire_token(mm, gp);              // async preemption
    } else if (GORO_UNLIKELY(mm->async_pinned != nullptr &&
                             (mm->pp == nullptr || mm->pp->id >= active_ps()))) {  // async preemption
      // gomaxprocs: a retired P is given up here too (find_runnable, which
      // does it otherwise, waits for the pinned Gs): kept, it ran them
      // for good and the shrink never returned.
      if (mm->pp) drop_retired_p(mm);
      park_pinned(mm);
      continue;
    } else {
      if (mm->yield_next) {  // gosched took it from the run queues
        gp = std::exchange(mm->yield_next, nullptr);
        inherit = mm->yield_next_inherit;
      } else {
        gp = mm->async_pinned ? next_with_pinned(mm) : find_runnable(mm, inherit);  // async preemption
        if (!gp) return;
      }
      GORO_CHAOS_POINT("schedule.found");
      if (mm->spinning) reset_spinning(mm);
      if (m_base* lm = gp->lockedm.load(std::memory_order_relaxed); lm && lm != mm) {  // lockosthread
        // With pinned Gs, mm then waits for a P itself (park_pinned).
        if (startlockedm(mm, gp)) continue;
      }
    }
    for (;;) {
      gp = execute(mm, gp, inherit);  // returns a G to resume at once, if any
      if (!gp) break;
      inherit = true;
    }
    if (GORO_UNLIKELY(mm->exit_thread) && !drop_locked_thread(mm)) return;  // lockosthread
  }
}

// Gosched's tail (Go's goschedImpl): gp to the global queue, and wake an
// M for it if a P is idle.
template <class Policy>
inline auto scheduler<Policy>::requeue_global(g* gp) -> void {
  globq_.push_back(gp);
  GORO_CHAOS_POINT("gosched.wakep");
  wakep();
}

// The start of a run slice (Go's execute), for execute and for gosched's
// direct switch: a new slice unless gp inherits the current one (runnext),
// then gp is published to sysmon. A request made for an earlier slice is
// void (Go's execute clears gp.preempt), but an expired slice that gp
// inherits stays expired: gp yields at its first safe point (slice_over,
// see the park case in execute). pp is null only when gp resumes inside
// goro::blocking after an on_g0 call (its request is kept for the end of
// the call; it always inherits).
template <class Policy>
inline auto scheduler<Policy>::begin_slice(m* mm, p* pp, g* gp, bool inherit_time) noexcept -> void {
  gp->status.store(g_status::running, std::memory_order_relaxed);
  dump_resume_check(gp);  // goroutine dump
  if (pp) {
    if (!inherit_time) {
      ++pp->schedtick;
      pp->slice_over = false;
    }
    pp->sysmon_schedtick.store(pp->schedtick, std::memory_order_relaxed);
    pp->sysmon_m.store(mm, std::memory_order_relaxed);     // async preemption (published by the release below)
    pp->sysmon_curg.store(gp, std::memory_order_release);  // sysmon's request_preempt writes *gp
    if (GORO_UNLIKELY(pp->slice_over)) {
      pp->slice_over = false;
      request_preempt(gp);
    } else {
      clear_preempt(gp);
    }
  }
  mm->curg = gp;
}

// Runs gp on mm until it switches out; then carries out its request.
template <class Policy>
inline auto scheduler<Policy>::execute(m* mm, g* gp, bool inherit_time) -> g* {
  p* pp = mm->pp;
  if (gp->stack.lo == nullptr) attach_stack_at_first_run(pp, gp);
  begin_slice(mm, pp, gp, inherit_time);
  const std::int64_t trace_start = GORO_UNLIKELY(tracing::enabled()) ? tracing::now() : 0;
  const std::int32_t trace_p = pp ? static_cast<std::int32_t>(pp->id) : -1;
  const std::uint64_t trace_flow = GORO_UNLIKELY(trace_start != 0) ? std::exchange(gp->trace_flow, 0) : 0;
  if (GORO_UNLIKELY(trace_start != 0)) mm->trace_p_cut = 0;  // left by a slice not traced
  switch_to_g(mm, gp);
  gp = mm->curg;  // gosched: gp may have switched directly to other Gs since
  mm->curg = nullptr;
  check_stack_canary(gp);
  if (GORO_UNLIKELY(trace_start != 0)) trace_run(mm, gp, trace_p, trace_start, trace_flow);
  pp = mm->pp;
  switch (mm->after) {
    case after_switch::preempt:  // sysmon: counted, then as yield
      sysmon_.count_preemption();
      [[fallthrough]];
    case after_switch::yield:
      gp->status.store(g_status::runnable, std::memory_order_relaxed);
      requeue_global(gp);
      break;
    case after_switch::park: {
      pp->parks.inc();
      // Parked with its slice's preemption request pending (it came
      // after gp's last safe point): the slice is over for whoever
      // inherits it. Dropping the request let a pair of goroutines
      // waking each other through runnext keep the P for good (Go's
      // PingPongHog, tests/preempt_test.cpp).
      if (GORO_UNLIKELY(clear_preempt(gp))) pp->slice_over = true;
      // tracer: read now, gp may be readied, run and gone once unlocked
      const std::uint64_t id = trace_start != 0 ? gp->id : 0;
      gp->status.store(g_status::waiting, std::memory_order_release);
      auto unlock = mm->park_unlock;
      void* arg = mm->park_arg;
      mm->park_unlock = nullptr;
      mm->after = after_switch::none;
      GORO_CHAOS_POINT("park.unlock");
      if (unlock && !unlock(arg)) {
        gp->status.store(g_status::running, std::memory_order_relaxed);
        return gp;  // resumed with inherit_time: slice_over gives its request back
      }
      if (GORO_UNLIKELY(trace_start != 0) && tracing::enabled())
        tracing::record(
            {tracing::now(), 0, id, trace_rt_, static_cast<std::int32_t>(pp->id), mm->id, tracing::kind::block, 0},
            true);
      break;
    }
    case after_switch::exit:
      if (GORO_UNLIKELY(gp->lockedm.load(std::memory_order_relaxed) == mm)) {  // lockosthread
        gp->lockedm.store(nullptr, std::memory_order_relaxed);
        mm->lockedg = nullptr;
        // m_loop: drop_locked_thread; not while this M holds async-pinned
        // Gs (only its thread may resume them): it goes on as a plain M.
        mm->exit_thread = mm->async_pinned == nullptr && mm->async_token == nullptr;
      }
      gp->lock_count.store(
          0, std::memory_order_relaxed);  // lockosthread: also when unwired by a leaving M (the record is reused)
      goexit0(pp, gp);
      break;
    case after_switch::call:
      mm->after = after_switch::none;
      mm->g0_call(mm->g0_arg);
      keep_request(pp, gp);
      return gp;                       // resume it on this M (it never left the running state)
    case after_switch::async_preempt:  // async preemption: counted; pinned to this M, in no queue
      sysmon_.count_preemption();
      gp->status.store(g_status::runnable, std::memory_order_relaxed);
      if (gp->lockedm.load(std::memory_order_relaxed) == mm) {
        // Wired to this M already (lock_os_thread, or main on the run()
        // caller's M): queued like any preempted G; whoever picks it hands
        // its P back to this M (startlockedm), which resumes it here.
        requeue_global(gp);
        break;
      }
      gp->link = nullptr;
      if (mm->async_pinned_tail)
        mm->async_pinned_tail->link = gp;
      else
        mm->async_pinned = gp;
      mm->async_pinned_tail = gp;
      break;
    case after_switch::exitsyscall:  // sysmon: goro::blocking found no P
      mm->after = after_switch::none;
      if (sysmon_.exit_syscall0(mm, gp)) {
        keep_request(mm->pp, gp);  // the slice ended during the call: yield at the call's end
        return gp;
      }
      break;
    case after_switch::none:
      fatal("goro: internal error: goroutine switched out without a request");
  }
  mm->after = after_switch::none;
  return nullptr;
}

// findRunnable: blocks until it finds a G for mm (with mm->pp set), or
// returns nullptr when mm must leave (run() finished / shutdown).
template <class Policy>
inline auto scheduler<Policy>::find_runnable(m* mm, bool& inherit) -> g* {
  for (;;) {
    if (should_leave(mm)) {
      leave(mm);
      return nullptr;
    }
    p* pp = mm->pp;
    if (pp == nullptr) {  // no P (run() found none, or woken for a timer): wait for one
      if (!park_idle(mm)) {
        leave(mm);
        return nullptr;
      }
      continue;
    }
    // gomaxprocs: this P was retired by a shrink; give it up (its queue
    // goes to the global queue) and look for an active one.
    if (GORO_UNLIKELY(pp->id >= active_ps())) {
      drop_retired_p(mm);
      continue;
    }
    // checkTimers: this P's due timers run first; what they ready lands
    // in this P's run queue.
    if (pp->timers.earliest() != 0) pp->timers.run_due(nanotime());
    // gomaxprocs: retired Ps keep their timers; every active P runs them.
    if (GORO_UNLIKELY(created_ps() != active_ps())) run_retired_timers();
    GORO_CHAOS_POINT("findrunnable.local");
    // next_local's rule, written out: through next_local this loop ran
    // spawn ~8% slower at 2 procs (measured, alternating builds).
    if (pp->schedtick % Policy::global_poll_interval == 0) {
      if (g* gp = glob_get(pp, 1)) {
        inherit = false;
        return gp;
      }
    }
    auto r = pp->runq.get();
    if (r.item) {
      inherit = r.inherit_time;
      return static_cast<g*>(r.item);
    }
    if (g* gp = glob_get(pp, 0)) {
      inherit = false;
      return gp;
    }
    // netpoll: goroutines whose I/O is ready (non-blocking, one poller at a time).
    if (g* gp = netpoll_ops::ready(*this, mm)) {
      inherit = false;
      return gp;
    }
    // Other Ps' due timers (Go's stealWork runs them too): an idle P's
    // timers have nobody else to run them. Whatever they ready comes to
    // this P: look again.
    if (run_other_timers(pp)) continue;
    // Steal, if this M is spinning or few enough Ms are: spinning Ms
    // are limited to half the busy Ps so they cannot burn every CPU.
    if (mm->spinning || 2 * spinning_.count(std::memory_order_relaxed) < busy_ps()) {
      spinning_.join(mm->spinning);
      const auto spin_start = std::chrono::steady_clock::now();
      const auto deadline = spin_start + spin_duration;
      auto next_poll = spin_start + spin_poll_interval;
      for (;;) {
        GORO_CHAOS_POINT("findrunnable.spin");
        if (g* gp = steal_work(mm, pp)) {
          inherit = false;
          return gp;
        }
        if (g* gp = glob_get(pp, 0)) {
          inherit = false;
          return gp;
        }
        auto now = std::chrono::steady_clock::now();
        if (now >= next_poll) {  // I/O that became ready meanwhile (else seen only once this M parks)
          next_poll = now + spin_poll_interval;
          if (g* gp = netpoll_ops::ready(*this, mm)) {
            inherit = false;
            return gp;
          }
        }
        if (should_leave(mm) || now >= deadline) break;
        if (GORO_CHAOS_IF(512)) break;  // chaos: a shorter spin
        cpu_relax();
      }
    }
    GORO_CHAOS_POINT("findrunnable.giveup");
    // Nothing to do: give up the P. The global queue is checked again
    // after the P is on the idle list (pidle_put's seq_cst npidle_ first,
    // then the queue's lock), so a G queued by a thread outside the
    // runtime is seen either here or by its pusher's wakep. Pushes made
    // under lock_ (exit_syscall0, netpoll) are ordered by lock_ itself.
    if (g* gp = glob_get(pp, 0)) {
      inherit = false;
      return gp;
    }
    {
      sched_lock lk(*this);
      releasep(mm);
      pidle_put(lk, pp);
      if (!globq_.empty_synced()) {
        // pp is still the head of the idle list (lock_ held) — unless a
        // gomaxprocs shrink retired it: then take any idle P, and if
        // there is none, the busy Ps will find the G.
        if (p* again = pidle_get(lk)) {
          acquirep(mm, again);
          continue;
        }
      }
    }
    // The delicate dance: a spinning M must drop nmspinning *before*
    // re-checking every source of work. Otherwise work submitted after
    // the check but before the decrement would see nmspinning > 0, skip
    // wakep, and be left with nobody to run it. (Timers are re-checked
    // by park_idle, after this decrement, for the same reason.)
    //
    // A non-spinning M re-checks too (Go's findrunnable does not): its P
    // went idle after a submitter's wakep may have read npidle_ == 0, and
    // with cooperative preemption the submitter's P may never schedule
    // again (a goroutine spinning in plain C++ code): the G it queued
    // would wait for it forever while this P sleeps.
    if (mm->spinning) {
      GORO_CHAOS_POINT("findrunnable.drop_spinning");
      spinning_.release(mm->spinning);
      GORO_CHAOS_POINT("findrunnable.dropped");
    }
    if (work_after_going_idle()) {
      p* again;
      {
        sched_lock lk(*this);
        again = pidle_get(lk);
      }
      if (again) {
        acquirep(mm, again);
        spinning_.join(mm->spinning);
        continue;
      }
    }
    GORO_CHAOS_POINT("findrunnable.park");
    if (!park_idle(mm)) {
      leave(mm);
      return nullptr;
    }
  }
}

// stealWork: four passes over all Ps in a random coprime order; runnext
// is only stolen on the last pass.
template <class Policy>
inline auto scheduler<Policy>::steal_work(m* mm, p* pp) -> g* {
  constexpr int steal_tries = 4;
  // Over every P record (gomaxprocs: a retired P may still hold work;
  // idle ones are skipped).
  const coprime_order* order = steal_order_.load(std::memory_order_acquire);
  // Waits for a victim's runnext in this call (Go's runqgrab usleep(3)s
  // before taking a running P's runnext: its owner probably runs it next).
  // A 3 us nanosleep takes ~90 us on these VMs (50 us of timer slack, then
  // the wake-up; Windows rounds it to a millisecond), long enough for this
  // thief to miss a burst of new work: a frame's jobs spawned by the
  // goroutine it waited for. So the first wait spins 3 us on the clock,
  // while that leads to steals. When it has not twice in a row (ping-pong
  // pairs: the owners keep readying goroutines into runnext, never into
  // the ring), the waits sleep as Go's do, which keeps this M spinning (no
  // wakep per ready()) and off the owners' cache lines; a steal from a
  // ring after a wait switches the clock back on. Twice, not once: at a
  // frame's end the spawner can take 3 us to spawn the next frame's first
  // jobs, and a thief that then slept 90 us missed them (frame_loop at 2
  // Ps: 600-670 such sleeps per 1,000 frames, 143 after; p50 749 -> 730
  // us, p99 897 -> 873, pingpong unchanged). Only a lone spinning M spins here:
  // with others spinning, they cover the sleeper, and many thieves
  // spinning on one spawner take its goroutines one at a time as they
  // appear, each a transfer of the spawner's queue lines (spawn at 16 Ps
  // on a 16-core VM: 335 ns per goroutine spinning, 109 sleeping; the
  // frame loop's p99 at 16 Ps 574 against 255 us).
  constexpr std::uint8_t steal_wait_miss_limit = 2;
  int waits = 0;
  bool spun = false;
  const g* waited_for = nullptr;
  auto wait_for_runnext = [&](const g* next) {
    waited_for = next;
    if (waits++ == 0 && mm->steal_wait_misses < steal_wait_miss_limit &&
        spinning_.count(std::memory_order_relaxed) <= 1) {
      spun = true;
      const std::int64_t until = nanotime() + runnext_steal_grace_ns;
      while (nanotime() < until) cpu_relax();
    } else {
      os::sleep_ns(runnext_steal_grace_ns);
    }
  };
  for (int i = 0; i < steal_tries; ++i) {
    bool last = i == steal_tries - 1;
    for (auto e = order->start(mm->rng.next()); !e.done(); e.next()) {
      p* victim = allp_[e.position()];
      GORO_CHAOS_POINT("stealwork.victim");
      if (victim == pp || victim->status.load(std::memory_order_relaxed) == p_status::idle) continue;
      g* gp = pp->runq.steal_from(victim->runq, last, [&] {
        if (victim->status.load(std::memory_order_relaxed) == p_status::running)
          wait_for_runnext(victim->runq.runnext_snapshot());
      });
      if (gp) {
        if (waits != 0 && gp != waited_for) mm->steal_wait_misses = 0;
        pp->steals.inc();
        if (GORO_UNLIKELY(tracing::enabled()))
          tracing::record({tracing::now(), 0, gp->id, trace_rt_, static_cast<std::int32_t>(pp->id), mm->id,
                           tracing::kind::steal, victim->id},
                          true);
        return gp;
      }
    }
  }
  if (spun) ++mm->steal_wait_misses;  // only while under the limit: no overflow
  return nullptr;
}

// globrunqget: takes a fair share — size/nprocs + 1, at most `max` (when
// > 0) and at most half a local queue — returns one and queues the rest
// on pp. Runs on g0 (the batch is on its stack).
template <class Policy>
inline auto scheduler<Policy>::glob_get(p* pp, std::uint32_t max) -> g* {
  if (globq_.empty()) return nullptr;
  g* batch[run_queue::capacity / 2 + 1];  // + 1: no false -Warray-bounds when the queue holds 2
  std::uint32_t n = globq_.pop_batch(batch, [&](std::uint32_t size) {
    std::uint32_t k = std::min(size, size / active_ps() + 1);
    if (max > 0 && k > max) k = max;
    return std::min<std::uint32_t>(k, run_queue::capacity / 2);
  });
  if (n == 0) return nullptr;
  pp->global_polls.inc(n);
  // Overflow (impossible at half capacity unless the local queue was
  // already half full) goes back to the global queue.
  for (std::uint32_t i = 1; i < n; ++i)
    pp->runq.put(batch[i], false, [this](g** b, std::uint32_t k) { glob_put_batch(b, k); });
  return batch[0];
}

}  // namespace goro::detail
