// Idle Ps and Ms and the park/wake protocol (Go's "Worker thread
// parking/unparking"): the idle lists (scheduler lock held), wakep and the
// idle side of its Dekker pair (work_after_going_idle), the spinning role,
// and the timer M that sleeps until the next timer (park_idle,
// wake_for_timer). Part of scheduler<Policy> (sched.hpp).
// Included at the end of sched.hpp only.
#pragma once

namespace goro::detail {

// Runs the due timers of every P but pp. Returns true if it ran any.
// Reads the clock only if some P has a timer at all.
template <class Policy>
inline auto scheduler<Policy>::run_other_timers(p* pp) noexcept -> bool {
  return run_timers_of(0, created_ps(), pp);
}

template <class Policy>
inline auto scheduler<Policy>::run_timers_of(unsigned from, unsigned to, p* skip) noexcept -> bool {
  bool ran = false;
  std::int64_t now = 0;
  for (unsigned i = from; i < to; ++i) {
    p* other = allp_[i];
    if (other == skip) continue;
    std::int64_t w = other->timers.earliest();
    if (w == 0) continue;
    if (now == 0) now = nanotime();
    if (w <= now) {
      other->timers.run_due(now);
      ran = true;
    }
  }
  return ran;
}

// The earliest pending timer over all Ps (Go's timeSleepUntil); 0: none.
template <class Policy>
inline auto scheduler<Policy>::earliest_timer() const noexcept -> std::int64_t {
  std::int64_t next = 0;
  for_each_p([&](const p* pp) {
    std::int64_t w = pp->timers.earliest();
    if (w != 0 && (next == 0 || w < next)) next = w;
  });
  return next;
}

// An M without a P and without work goes to sleep here, for no longer
// than until the next timer (Go: findRunnable's `stop` path, blocking in
// netpoll until pollUntil). Returns with a P (true: go look for work
// again), without one (true: look again, e.g. a timer was added), or
// false: mm must leave.
//
// Only one idle M at a time sleeps with a timeout — the "timer M",
// timer_m_, waking at timer_m_until_ (Go allows one M blocked in netpoll);
// the others sleep until handed a P. An M whose next timer is earlier
// than the timer M's takes the role over.
//
// Why no timer is missed: timer_sleeper's handshake (timer_sleeper.hpp),
// with wake_for_timer as the adder's half and stopm as the sleeper's. With
// no timer M at all the adder calls wakep, which pairs with the delicate
// dance (nmspinning) and npidle the same way.
template <class Policy>
inline auto scheduler<Policy>::park_idle(m* mm) -> bool {
  std::int64_t next = earliest_timer();
  if (next != 0 && next <= nanotime()) {
    // A timer is due: take a P and run it.
    p* pp;
    {
      sched_lock lk(*this);
      pp = pidle_get(lk);
    }
    if (pp) {
      acquirep(mm, pp);
      return true;
    }
    // Every P is running: their Ms run due timers when they next
    // schedule, and look at the next timer before they sleep.
    next = 0;
  }
  GORO_CHAOS_POINT("park_idle.stopm");
  switch (stopm(mm, next)) {
    case wake_reason::leave:
      return false;
    case wake_reason::got_p:
    case wake_reason::again:
      return true;
  }
  return true;
}

// wakeNetPoller: a timer at `when` was just queued. If the timer M would
// sleep past it, wake the timer M (it will sleep again, shorter); with no
// timer M, make sure some M will look at the timers (wakep: an idle P
// gets a spinning M, which finds nothing to run and becomes the timer M;
// with no idle P or a spinner already about, an M passes through
// park_idle anyway).
template <class Policy>
inline auto scheduler<Policy>::wake_for_timer(std::int64_t when) -> void {
  GORO_CHAOS_POINT("wake_for_timer");
  // The adder's half of timer_sleeper's handshake (its must_wake, with
  // "no timer M" told apart).
  const std::int64_t until = timer_m_until_.until();
  if (until == 0) {
    wakep();
    return;
  }
  if (when >= until) return;
  m* sleeper = nullptr;
  {
    sched_lock lk(*this);
    if (timer_m_ && when < timer_m_until_.until(std::memory_order_relaxed)) {
      sleeper = timer_m_;
      m_idle_remove(lk, sleeper);  // also clears timer_m_: we own its wake-up now
    }
  }
  if (sleeper) {
    GORO_CHAOS_POINT("wake_for_timer.wake");
    wake_idle_m(sleeper);
  }
}

// Wakes mm, which its caller took off the idle list (and so owns its
// wake-up). An idle M may sleep in epoll_wait instead of on its note: the
// timer M, and also an M that was the timer M until another took the role
// with an earlier timer; that one sleeps on to its own deadline, forever
// when it watched only I/O. So the poll is broken whenever mm is the M in
// it, not only when mm is the timer M now: main_finished's wake of the
// run() caller's M, asleep there after it lost the role, was lost, and
// run() never returned (net_misuse's race stress, 6 hangs in ~400 runs).
// Dekker with netpoll_sched::sleep, which publishes poll_sleeper_, fences,
// then reads the note: we wake the note, fence, then read poll_sleeper_
// (a pointer compared, never followed: mm may be gone once woken).
//
// Once woken, mm may run the rest of the program at once: the runtime may
// end while we still read poll_sleeper_ and break the poll, when we are
// not one of its Ms (another runtime's M readying one of our goroutines
// from its poll, a plain thread). wakes_in_flight_ counts us from before
// the wake, which comes before anything mm does; shutdown waits for it to
// drop to 0 before it frees the Ms and the scheduler (TSan saw the read
// of a freed scheduler: net_ext's idle-owner case).
template <class Policy>
inline auto scheduler<Policy>::wake_idle_m(m* mm) noexcept -> void {
  wakes_in_flight_.fetch_add(1, std::memory_order_seq_cst);
  mm->park_note.wake();
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (poll_sleeper_.load(std::memory_order_relaxed) == mm) poller_.brk();
  wakes_in_flight_.fetch_sub(1, std::memory_order_release);  // our last touch of this runtime
}

// A spinning M found work: stop spinning, and if it was the last spinner
// wake another M, so the next burst of work finds a spinner (spinners
// chain one at a time instead of stampeding).
template <class Policy>
inline auto scheduler<Policy>::reset_spinning(m* mm) -> void {
  spinning_.release(mm->spinning);
  GORO_CHAOS_POINT("reset_spinning.wakep");
  wakep();
}

// wakep: if a P is idle and nobody spins, start an M spinning on it.
//
// The submit-side barrier. Every path that makes a G runnable publishes
// it first — runq.put's release store of runnext or tail (spawn, ready,
// netpoll inject), a global-queue push (plain threads, overflow, netpoll,
// yield) — and then calls wakep, which reads npidle_ and the spinning count (spinning_).
// Its pair is every M that gives up a P (find_runnable, handoffp): it
// publishes the P idle (npidle_) and drops its spinning role
// (spinning_.release), then work_after_going_idle fences and reads every run
// queue. Store-then-load on both sides (Dekker): without a StoreLoad
// barrier on this side, x86 lets the loads below pass the publishing
// store still in the store buffer, so the submitter sees the P busy or
// an M spinning while the M sees the queues empty, and nobody runs the
// G until its submitter's P schedules again — never, with cooperative
// preemption, if the submitter spins in plain code (tests/wakeup_test.cpp,
// the chaos soak's spawn-then-spin). With a seq_cst fence on both sides
// at least one sees the other's write. Go gets this fence from runqput's
// runnext CAS; a release store is cheaper there, so the fence lives
// here, once, for every caller.
//
// A wakep that took the spinning role but found no idle P after all (an
// M took the P back between our read of npidle_ and pidle_get) gives the
// role up. While it held the role, another submitter's wakep may have
// seen it and skipped its own wake-up, leaving its G to "the spinner":
// so, like every M that drops the role (the delicate dance in
// find_runnable), wakep drops it first and then looks at the queues again
// (work_after_going_idle fences, then reads). That submitter read the
// role held, so our release comes after its fence and our look sees its
// G; it pushed after our look only if it read the role dropped, and then
// it wakes an M itself. Work found: try again from the top (a P may be
// idle by now). Without the second look, a P left idle meanwhile by its
// M sat beside the skipped G for good (the chaos soak's feeders under
// TSan; tests/wakeup_test.cpp).
//
// Returns 0, or startm's errno when no M could be started (start_g
// decides whether that fails the spawn).
template <class Policy>
inline auto scheduler<Policy>::wakep() -> int {
  GORO_CHAOS_POINT("wakep");
  for (;;) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (GORO_CHAOS_FAULT("drop_wakep")) return 0;  // the chaos self-test's lost wake-up
    if (npidle_.load(std::memory_order_seq_cst) == 0) return 0;
    spin_token spinning = spinning_.claim_if_none();
    if (!spinning) return 0;
    GORO_CHAOS_POINT("wakep.claimed");
    testing::wakep_seam(0);
    p* pp;
    {
      sched_lock lk(*this);
      pp = pidle_get(lk);
    }
    if (pp) {
      GORO_CHAOS_POINT("wakep.startm");
      return startm(pp, std::move(spinning));
    }
    testing::wakep_seam(1);
    spinning_.release(spinning);
    GORO_CHAOS_POINT("wakep.released");
    if (!work_after_going_idle()) return 0;
  }
}

// The idle side of wakep's Dekker pair (the pair is written down at
// wakep). Called after a P was published idle (pidle_put's npidle_
// increment) and, for a spinning M, after its spinning role was released:
// fences, then reads every run queue and the global queue. Either this
// sees the submitter's G, or the submitter's wakep (publish, fence, read
// npidle_ and the spinning count (spinning_)) sees the idle P and no spinner. The global
// queue is read under its lock as well, which also orders this against
// a pusher that holds the lock without relying on its fence.
template <class Policy>
inline auto scheduler<Policy>::work_after_going_idle() noexcept -> bool {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  GORO_CHAOS_POINT("findrunnable.recheck");
  for (unsigned i = 0, n = created_ps(); i < n; ++i)  // gomaxprocs: a retired P may still hold work
    if (!allp_[i]->runq.empty()) return true;
  return !globq_.empty_synced();
}

template <class Policy>
inline auto scheduler<Policy>::pidle_put(const sched_lock& held, p* pp) noexcept -> void {
  if (GORO_UNLIKELY(pp->id >= nprocs_.load(std::memory_order_relaxed))) {  // gomaxprocs: retired
    retire_locked(held, pp);
    return;
  }
  pp->status.store(p_status::idle, std::memory_order_relaxed);
  pp->link = pidle_;
  pidle_ = pp;
  npidle_.fetch_add(1, std::memory_order_seq_cst);
  if (shutdown_waiting_.load(std::memory_order_relaxed)) shutdown_note_.wake();
}

template <class Policy>
inline auto scheduler<Policy>::pidle_get(const sched_lock&) noexcept -> p* {
  p* pp = pidle_;
  if (!pp) return nullptr;
  pidle_ = pp->link;
  pp->link = nullptr;
  pp->status.store(p_status::running, std::memory_order_relaxed);
  npidle_.fetch_sub(1, std::memory_order_seq_cst);
  sysmon_.on_p_busy();  // sysmon: leave its deep sleep
  return pp;
}

template <class Policy>
inline auto scheduler<Policy>::m_idle_put(const sched_lock&, m* mm) noexcept -> void {
  mm->link = midle_;
  midle_ = mm;
  mm->in_idle_list = true;
  ++nmidle_;  // checkdead
}

// Prefers an M other than the timer M: the timer M keeps watching the
// timers (Go's startm never takes the M blocked in netpoll). Taken when
// it is the only idle M, its role ends; it comes back through park_idle
// when it runs out of work, and so does every other M (none is parked).
template <class Policy>
inline auto scheduler<Policy>::m_idle_get(const sched_lock& held) noexcept -> m* {
  m* mm = midle_;
  if (!mm) return nullptr;
  if (mm == timer_m_ && mm->link) {
    m* next = mm->link;
    mm->link = next->link;
    next->link = nullptr;
    next->in_idle_list = false;
    --nmidle_;  // checkdead
    return next;
  }
  midle_ = mm->link;
  mm->link = nullptr;
  mm->in_idle_list = false;
  --nmidle_;  // checkdead
  if (mm == timer_m_) clear_timer_m(held);
  return mm;
}

// The timer M is always on the idle list: whoever takes it off ends its
// role (the M will come back through park_idle and look at the timers).
template <class Policy>
inline auto scheduler<Policy>::clear_timer_m(const sched_lock&) noexcept -> void {
  timer_m_ = nullptr;
  timer_m_until_.clear();
}

template <class Policy>
inline auto scheduler<Policy>::m_idle_remove(const sched_lock& held, m* target) noexcept -> void {
  for (m** pm = &midle_; *pm; pm = &(*pm)->link) {
    if (*pm == target) {
      *pm = target->link;
      target->link = nullptr;
      target->in_idle_list = false;
      --nmidle_;  // checkdead
      if (target == timer_m_) clear_timer_m(held);
      return;
    }
  }
}

}  // namespace goro::detail
