// The M pool (Go's startm / newm / mstart / stopm / handoffp): starting an
// M on a P, creating threads, parking an M without a P, and handing a P on
// when its M leaves. Part of scheduler<Policy> (sched.hpp).
// Included at the end of sched.hpp only.
#pragma once

namespace goro::detail {

// sysmon: some startm found no idle M and could not create one (a
// transient EAGAIN: RLIMIT_NPROC, a pids cgroup). Work may be queued
// with no M to run it: look again, as wakep (Go's newm throws instead).
template <class Policy>
inline auto scheduler<Policy>::retry_start_m() noexcept -> void {
  if (m_start_failed_.exchange(false, std::memory_order_seq_cst)) (void)wakep();  // fails: sets it again
}

// startm: runs pp on an idle M (or a new one). Returns 0 or an errno,
// in which case pp is back on the idle list.
template <class Policy>
inline auto scheduler<Policy>::startm(p* pp, spin_token spinning) -> int {
  m* mm;
  {
    sched_lock lk(*this);
    mm = m_idle_get(lk);
  }
  if (mm) {
    GORO_CHAOS_POINT("startm.wake");
    mm->spinning = std::move(spinning);
    mm->nextp = pp;
    wake_idle_m(mm);
    return 0;
  }
  // Thread creation is deep (os::create_thread): run it on g0, not on a
  // possibly tiny goroutine stack.
  struct newm_call {
    scheduler* self;
    p* pp;
    spin_token& spinning;
    int err;
  } call{this, pp, spinning, 0};
  on_g0(
      [](void* a) {
        auto* c = static_cast<newm_call*>(a);
        c->err = c->self->newm(c->pp, c->spinning);
      },
      &call);
  int err = call.err;
  if (err != 0) {
    {
      sched_lock lk(*this);
      pidle_put(lk, pp);
    }
    spinning_.release(spinning);
    // Retried by sysmon, which does not sleep deeply while this is set.
    // Dekker with sysmon's deep_sleep: it publishes sleeping_, then reads
    // m_start_failed_; we publish m_start_failed_, then read sleeping_.
    m_start_failed_.store(true, std::memory_order_seq_cst);
    sysmon_.on_p_busy();
  }
  return err;
}

// lockosthread: joins the threads that exited with a locked G (Go's mexit
// frees them): unjoined, each kept its stack and guard page mapped until
// shutdown, and a program ending ~30k goroutines locked ran out of mappings
// (vm.max_map_count) and so of threads. Their records stay in allm_. Never
// waits for reap_lock_: shutdown holds it while it joins every M, this one
// included; whoever holds it finishes the joins it took (each such thread
// has left the scheduler and ends on its own).
template <class Policy>
inline auto scheduler<Policy>::join_exited_ms() noexcept -> void {
  std::unique_lock<std::mutex> reap(reap_lock_, std::try_to_lock);
  if (!reap.owns_lock()) return;
  m* dead = nullptr;
  {
    sched_lock lk(*this);
    // Only those whose creator has stored the thread's handle (newm's
    // thread.start returns after the thread may have run and exited).
    for (m** link = &mexited_; *link;) {
      m* mm = *link;
      if (!mm->thread_published) {
        link = &mm->link;
        continue;
      }
      *link = mm->link;
      mm->link = std::exchange(dead, mm);
    }
  }
  while (dead) {
    m* next = std::exchange(dead->link, nullptr);
    dead->thread.join();  // shutdown's join is then a no-op
    dead = next;
  }
}

// Go's checkmcount (lock_ held), when an M is added: past
// options::max_threads Ms the program ends. The Ms are the runtime's M
// threads alive (allm_ less those that exited) and the run() caller while
// it is one: from run()'s start (run_m_ set) until it leaves the scheduler
// (run_m_left_, set by leave() before it hands its P to another M). Go
// counts every M, m0 included, but a runtime has no m0 outside run()
// (goroutines started by go() from a plain thread run on its own Ms).
template <class Policy>
inline auto scheduler<Policy>::checkmcount(const sched_lock&) noexcept -> void {
  const std::size_t run_caller = run_m_.load(std::memory_order_relaxed) != nullptr && !run_m_left_ ? 1 : 0;
  if (allm_.size() - nmexited_ + run_caller <= threads_.max_threads) return;
  char msg[96];
  std::snprintf(msg, sizeof msg, "goro: program exceeds %u-thread limit (options::max_threads)", threads_.max_threads);
  fatal(msg);
}

template <class Policy>
inline auto scheduler<Policy>::newm(p* pp, spin_token& spinning) -> int {
  join_exited_ms();  // on g0 (startm's on_g0)
  m* mm = nullptr;
  GORO_TRY { mm = allocate_record<m>(ra_.get()).release(); }  // the runtime's allocator; freed at shutdown
  GORO_CATCH_ALL { return ENOMEM; }
  mm->sched = this;
  mm->fp_shared = fp_shared;
  mm->spinning = std::move(spinning);
  mm->nextp = pp;
  mm->rng = fast_rand(reinterpret_cast<std::uintptr_t>(mm) * 0x9e3779b97f4a7c15ull + 1);
  {
    sched_lock lk(*this);
    // The list grows from the runtime's allocator, which may refuse: then
    // no M, as for a thread the OS refused (startm's caller retries). Out
    // of here the bad_alloc unwound the scheduler loop (on g0) into run().
    GORO_TRY { allm_.push_back(mm); }  // checkdead: counted before it can go idle
    GORO_CATCH_ALL {
      spinning = std::move(mm->spinning);
      record_delete<alloc_of<m>>{alloc_of<m>(ra_.get())}(mm);
      return ENOMEM;
    }
    mm->id = static_cast<std::int32_t>(allm_.size());
    checkmcount(lk);
  }
  threads_alive_.fetch_add(1);
  char role[16];
  std::snprintf(role, sizeof role, "m%d", static_cast<int>(mm->id));
  int err = mm->thread.start(
      threads_, role,
      [](void* arg) -> void* {
        auto* self = static_cast<m*>(arg);
        static_cast<scheduler*>(self->sched)->m_thread_main(self);
        return nullptr;
      },
      mm);
  if (err != 0) {
    threads_alive_.fetch_sub(1);
    {
      sched_lock lk(*this);
      allm_.erase(std::find(allm_.begin(), allm_.end(), mm));  // checkdead
    }
    spinning = std::move(mm->spinning);  // back to startm, which releases it
    record_delete<alloc_of<m>>{alloc_of<m>(ra_.get())}(mm);  // from allocate_record above
    return err;
  }
  threads_created_.fetch_add(1, std::memory_order_relaxed);
  sched_lock lk(*this);  // publishes mm->thread's handle to shutdown, which joins it after taking lock_
  mm->thread_published = true;  // and to join_exited_ms: the thread may have exited already
  return 0;
}

template <class Policy>
inline auto scheduler<Policy>::m_thread_main(m* mm) -> void {
  os::thread_altstack altstack;
  set_current_m(mm);
  mm->os_thread = async_signal ? os::open_preemption_target() : os::current_thread();  // async preemption
  mm->async_signal = async_signal;
  mm->g0_tsan_fiber = tsan_current_fiber();
  if (mm->nextp) {
    acquirep(mm, mm->nextp);
    mm->nextp = nullptr;
  }
  m_loop(mm);
  set_current_m(nullptr);
  threads_alive_.fetch_sub(1);
}

// stopm: parks mm (no P) until startm hands it a P (got_p), until it must
// leave (leave), or, when `until` != 0, no later than that nanotime() if
// it becomes the timer M (again; also when a timer waker took it off the
// idle list). See park_idle for the protocol.
//
// Who may wake mm: whoever takes it off the idle list (under lock_) owns
// its wake-up — startm (with nextp), main_finished, wake_for_timer — plus
// shutdown, which wakes every M. So after a timed-out sleep mm looks
// whether it is still on the list: if so it removes itself and looks for
// work; if not, a wake is on its way and it waits for it.
template <class Policy>
inline auto scheduler<Policy>::stopm(m* mm, std::int64_t until) -> wake_reason {
  // netpoll: goroutines wait on I/O: become the M blocked in epoll_wait
  // (no timeout unless a timer is pending).
  if (until == 0 && poller_.waiters() > 0) until = INT64_MAX;
  bool timed = false;
  GORO_CHAOS_POINT("stopm.publish");
  {
    sched_lock lk(*this);
    if (should_leave(mm)) return wake_reason::leave;
    mm->park_note.clear();
    m_idle_put(lk, mm);
    if (until != 0 && (timer_m_ == nullptr || until < timer_m_until_.until(std::memory_order_relaxed))) {
      timer_m_ = mm;
      timer_m_until_.publish(until);
      timed = true;
    }
    checkdead(lk, mm);
  }
  m_parks_.fetch_add(1, std::memory_order_relaxed);
  GORO_CHAOS_POINT("stopm.published");
  if (shutdown_waiting_.load(std::memory_order_seq_cst)) shutdown_note_.wake();
  bool woken = true;
  if (timed) {
    // The sleeper's half of timer_sleeper's handshake (wake_for_timer is
    // the adder's): a timer published before our deadline was would not
    // wake us.
    std::int64_t next = earliest_timer();
    std::int64_t now = nanotime();
    if (timer_sleeper::look_again(next, until))
      woken = false;  // look again at once
    else
      woken = netpoll_ops::sleep(*this, mm, until, now);  // netpoll: epoll_wait, or the note
    if (!woken) {
      sched_lock lk(*this);
      if (mm->in_idle_list) {
        m_idle_remove(lk, mm);
        return wake_reason::again;
      }
      // Taken off the list meanwhile: its taker's wake is on the way.
    }
  }
  GORO_CHAOS_POINT("stopm.sleep");
  if (mm->run_caller)
    deadcheck_ops::sleep(*this, mm);  // checkdead: confirms a suspected deadlock
  else
    mm->park_note.sleep();  // returns at once if already woken
  if (mm->nextp) {
    acquirep(mm, mm->nextp);
    mm->nextp = nullptr;
    return wake_reason::got_p;
  }
  if (should_leave(mm)) return wake_reason::leave;
  return wake_reason::again;  // taken off the list without a P: look again
}

// mm leaves the scheduler: hand its P (and its spinning role) on.
template <class Policy>
inline auto scheduler<Policy>::leave(m* mm) -> void {
  if (mm->run_caller) {
    sched_lock lk(*this);
    run_m_left_ = true;  // checkmcount: the M handoffp may start replaces it
  }
  p* pp = mm->pp;
  if (!pp)
    pp = std::exchange(mm->nextp, nullptr);
  else
    releasep(mm);
  spin_token spinning = std::move(mm->spinning);
  if (pp)
    handoffp(pp, std::move(spinning));
  else
    spinning_.release(spinning);
}

// handoffp (Go's handoffp): a P whose M leaves — for a locked thread, at
// exit, or stuck in a blocking call (sysmon's retake) — goes to another
// M if there is work for it; else, if no M spins and no P idles, to a
// spinning M (the busy Ps may have work to steal, and nobody else would
// look for it until the next wakep); else to the idle list.
template <class Policy>
inline auto scheduler<Policy>::handoffp(p* pp, spin_token spinning) -> void {
  GORO_CHAOS_POINT("handoffp");
  if (exiting_.load(std::memory_order_acquire)) {
    spinning_.release(spinning);
    sched_lock lk(*this);
    pidle_put(lk, pp);
    return;
  }
  if (spinning || !pp->runq.empty() || !globq_.empty()) {
    (void)startm(pp, std::move(spinning));  // on failure pp is back on the idle list
    return;
  }
  if (npidle_.load(std::memory_order_seq_cst) == 0) {
    if (spin_token t = spinning_.claim_if_none()) {
      (void)startm(pp, std::move(t));
      return;
    }
  }
  {
    sched_lock lk(*this);
    pidle_put(lk, pp);
  }
  // The checks above can miss work published by a submitter that then
  // saw this P busy in its wakep: look again now that it is idle.
  GORO_CHAOS_POINT("handoffp.recheck");
  if (work_after_going_idle()) wakep();
}

}  // namespace goro::detail
