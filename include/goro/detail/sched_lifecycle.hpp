// A runtime's life: run() with the calling thread as an M, main finishing,
// checkdead (every M stopped: arm the deadlock confirmation), shutdown
// (wait for the goroutines, report those blocked forever, stop the Ms) and
// freeing the records. Part of scheduler<Policy> (sched.hpp).
// Included at the end of sched.hpp only.
#pragma once

namespace goro::detail {

// Runs the main goroutine, whose closure set_main_closure(g, arg) sets up;
// returns when it has finished.
template <class Policy>
inline auto scheduler<Policy>::run_main(void (*set_main_closure)(g*, void*), void* arg) -> void {
  if (current_m() != nullptr) raise_usage("run() called from inside a goroutine or an M (it would block the M)");
  if (run_active_.exchange(true, std::memory_order_acq_rel)) raise_usage("run() is already active on this runtime");
  struct clear_active {
    std::atomic<bool>& f;
    ~clear_active() { f.store(false, std::memory_order_release); }
  } clear{run_active_};

  g* main_g = gfget_global_or_new();
  GORO_TRY { set_main_closure(main_g, arg); }
  GORO_CATCH_ALL {
    gfput_global(main_g);
    GORO_RETHROW;
  }
  // Until this M's record is made too, a refusal gives back what run()
  // took: main's closure, stack and record (they stayed taken for good).
  struct undo_main {
    scheduler* s;
    g* gp;
    ~undo_main() {
      if (!gp) return;
      gp->closure_op(gp, false);
      if (gp->stack.lo) {
        s->alloc_.deallocate(std::exchange(gp->stack, {}));
        gp->sp = nullptr;
      }
      s->gfput_global(gp);
    }
  } undo{this, main_g};
  // main's stack, taken now, while a refusal still leaves nothing changed
  // (run() throws it, as go() would): options::main_stack_size from the
  // default allocator, the policy's stack_size from a custom one. Taken
  // as main started, its bad_alloc left this thread as the runtime's M
  // and the destructor then aborted ("destroyed from inside one of its
  // own goroutines"). new_g_on_p, start_g and execute find it attached.
  init_stack(main_g, allocate_stack(lazy_stacks ? main_stack_size_ : stack_bytes));
  owned<m> mm = allocate_record<m>(ra_.get());
  undo.gp = nullptr;
  main_g->is_main = true;
  set_dump_field(main_g->created_pc, nullptr);  // goroutine dump: main has no creator
  main_g->stack_request = 0;     // a record's last spawn_options (spawn sets it for the others)
  main_done_.store(false, std::memory_order_relaxed);
  deadlock_.store(false, std::memory_order_relaxed);  // checkdead
  run_main_g_ = main_g;                               // checkdead: detached before a deadlock is confirmed

  mm->run_caller = true;
  // checkdead: inside run() this thread is this runtime's M, not a plain
  // thread: a plain-thread past (extm.hpp) stops counting in extm_live for
  // every runtime until run() returns. (Discounted for this runtime only,
  // it kept every other runtime's deadlock from being reported while this
  // run() lasted.)
  struct extm_pause {
    const bool counted = extm_counted_here();
    extm_pause() noexcept {
      if (counted) extm_drop();  // wakes other runtimes' checkdead waiting for an external M to go
    }
    ~extm_pause() {
      if (counted) extm_hold(true);
    }
  } extm_paused;
  mm->extm_lanes = lanes_owned_here().get();
  run_lanes_ = mm->extm_lanes;  // main_return
  mm->sched = this;
  mm->fp_shared = fp_shared;
  mm->rng = fast_rand(reinterpret_cast<std::uintptr_t>(mm.get()) ^ 0x5bd1e995u);
  {
    sched_lock lk(*this);  // see main_finished
    run_m_.store(mm.get(), std::memory_order_release);
    run_m_left_ = false;
    ++run_epoch_;
    checkmcount(lk);  // the caller is an M from here on
  }
  os::thread_altstack altstack;
  thread_eh_scope caller_eh;  // the caller's exception state is not main's
  set_current_m(mm.get());
  mm->os_thread = async_signal ? os::open_preemption_target() : os::current_thread();  // async preemption
  mm->async_signal = async_signal;
  mm->keeps_main = async_signal;  // async preemption: see m_base::keeps_main
  mm->g0_tsan_fiber = tsan_current_fiber();

  p* pp;
  {
    sched_lock lk(*this);
    pp = pidle_get(lk);
  }
  // lockosthread: main is wired to this thread until its closure starts
  // (Go's runtime.main locks the main goroutine to m0 during init), and
  // released there unless it called lock_os_thread() itself. With a P it
  // runs here at once; without one it waits in the global queue and the
  // M that picks it hands its P to this M (startlockedm).
  main_g->lockedm.store(mm.get(), std::memory_order_relaxed);
  mm->lockedg = main_g;
  if (pp) {
    acquirep(mm.get(), pp);
    start_main_here(pp, main_g);  // lockosthread: not queued (a spinning M could steal it from runnext)
  } else {
    // Every P is busy with goroutines started before run(): queue main
    // globally; this M waits for a P like any idle M.
    start_g(main_g);
  }
  m_loop(mm.get(), pp ? main_g : nullptr);

  set_current_m(nullptr);
  {
    sched_lock lk(*this);  // see main_finished
    run_m_.store(nullptr, std::memory_order_release);
    deadcheck_at_ = 0;  // checkdead
  }
  {
    // m_record_lock_: once no P names this M, nothing reads the record or
    // signals this thread; the record is freed when run() returns.
    std::lock_guard<spinlock> lk(m_record_lock_);
    for_each_p([&](p* pp) {
      m_base* self = mm.get();
      pp->sysmon_m.compare_exchange_strong(self, nullptr, std::memory_order_relaxed);
    });
  }
  os::close_preemption_target(mm->os_thread);  // async preemption: nothing names this M any more (above)
  // checkdead: main is blocked forever; it is left so, and released by
  // the destructor (shutdown) like any goroutine blocked forever.
  const bool deadlocked = deadlock_.load(std::memory_order_acquire) && !main_done_.load(std::memory_order_acquire);
  // main_return: main returned (or threw): the others end before run() returns.
  if (!deadlocked && unwind_on_main_return_) main_return_ops::after_main(*this);
  if (deadlocked) {
    std::string dump = format_goroutines(collect_goroutines(this));  // goroutine dump
    remember_deadlock_shown();
    raise<deadlock_error>("goro: all goroutines are asleep - deadlock!\n\n" + dump);
  }
}

// The goroutines waiting now, as the deadlock dump just showed them (it
// stamped each wait's start, which a new wait clears: g.hpp, wait_since).
template <class Policy>
inline auto scheduler<Policy>::remember_deadlock_shown() -> void {
  deadlock_shown_.clear();
  for_each_g(
      [](g* gp, void* arg) {
        if (gp->status.load(std::memory_order_acquire) != g_status::waiting) return;
        static_cast<decltype(deadlock_shown_)*>(arg)->emplace_back(gp->id,
                                                                   gp->wait_since.load(std::memory_order_relaxed));
      },
      &deadlock_shown_);
}

// Shutdown's report of the goroutines blocked forever: a goroutine still
// in the wait a deadlock_error's dump showed is only named, not dumped
// again.
template <class Policy>
inline auto scheduler<Policy>::report_blocked_forever(std::size_t live) -> void {
  std::vector<goroutine_info> gs = collect_goroutines(this);  // stamps the waits it shows
  struct ctx_t {
    const decltype(deadlock_shown_)* shown;
    std::vector<std::uint64_t> ids;
  } ctx{&deadlock_shown_, {}};
  if (!deadlock_shown_.empty())
    for_each_g(
        [](g* gp, void* arg) {
          auto* c = static_cast<ctx_t*>(arg);
          if (gp->status.load(std::memory_order_acquire) != g_status::waiting) return;
          const std::pair<std::uint64_t, std::int64_t> key{gp->id, gp->wait_since.load(std::memory_order_relaxed)};
          if (std::find(c->shown->begin(), c->shown->end(), key) != c->shown->end()) c->ids.push_back(key.first);
        },
        &ctx);
  std::vector<goroutine_info> fresh;
  std::vector<std::uint64_t> shown;
  for (auto& gi : gs) {
    if (std::find(ctx.ids.begin(), ctx.ids.end(), gi.id) != ctx.ids.end())
      shown.push_back(gi.id);
    else
      fresh.push_back(std::move(gi));
  }
  std::string line =
      "goro: " + std::to_string(live) + (live == 1 ? " goroutine" : " goroutines") + " blocked forever at shutdown";
  if (!shown.empty()) {
    line += shown.size() == live ? " (" : " (" + std::to_string(shown.size()) + " of them ";
    line += "shown by the deadlock report: goroutine";
    line += shown.size() == 1 ? " " : "s ";
    for (std::size_t i = 0; i < shown.size(); ++i) line += (i ? ", " : "") + std::to_string(shown[i]);
    line += ")";
  }
  line += fresh.empty() ? "\n" : "\n\n" + format_goroutines(fresh);
  std::fputs(line.c_str(), stderr);
}

// Waits for every goroutine, then stops the Ms. Goroutines that can never
// run again (all Ps idle, nothing queued) are reported and released.
template <class Policy>
inline auto scheduler<Policy>::shutdown() noexcept -> void {
  if (shut_down_) return;
  shut_down_ = true;
  if (current_m() != nullptr && current_m()->sched == this)
    fatal("goro: runtime destroyed from inside one of its own goroutines");
  // thread_lane: those goroutines' stacks and records are this runtime's,
  // and only their lane's owner can run them to their end. With
  // main_return::wait they are waited for like any goroutine first (the
  // owner may be pumping them: the lane is an external M).
  auto lanes_left = [this] {
    if (std::size_t n = lane_live_.load(std::memory_order_acquire); n != 0)
      fatal(("goro: runtime destroyed while " + std::to_string(n) +
             " of its goroutines live on a thread_lane (run the lane until they finish first)")
                .c_str());
  };
  if (unwind_on_main_return_) lanes_left();
  // main_return: goroutines started by go() while no run() was active
  // (or left by one) end as when main returns.
  if (unwind_on_main_return_) main_return_ops::unwind_all(*this);
  // main_return::wait: how long nothing came from outside (see below).
  std::uint64_t quiet_epoch = 0;
  std::int64_t quiet_since = 0;
  for (;;) {
    bool idle;
    {
      // A ready() from outside still under way (sched.hpp; its goroutine
      // may have run and ended since) may yet wake an M: not idle until it
      // is over. Read first: its wakep's effects come before its decrement.
      const bool wakes_done = wakes_in_flight_.load(std::memory_order_acquire) == 0;
      sched_lock lk(*this);
      idle = wakes_done && npidle_.load(std::memory_order_relaxed) == active_ps() && globq_.empty() &&
             spinning_.count(std::memory_order_relaxed) == 0;
    }
    // No goroutine left: done, whatever timers remain (a ticker nobody
    // stopped). Otherwise a pending timer is pending work: sleeping
    // goroutines are not blocked forever (Go's checkdead says the same).
    if (idle && live_goroutines() == 0) break;
    std::int64_t next_timer = idle ? earliest_timer() : 0;
    // netpoll: a goroutine waiting on an open fd can be woken by the network.
    const bool io_wait = poller_.waiters() > 0;
    if (idle && next_timer == 0 && !io_wait) {
      std::size_t live = live_goroutines();
      if (live == 0) break;
      // main_return::wait serves goroutines fed by plain threads (SPEC), so
      // it gives up on them only as run()'s checkdead would (deadcheck.hpp):
      // no live external M but this thread's own (it feeds nobody while in
      // here), and a whole grace period with no external activity. With
      // detection off it waits however long it takes.
      if (!unwind_on_main_return_) {
        const std::uint64_t epoch = extm_epoch.load(std::memory_order_seq_cst);
        const std::uint32_t own = (extm_counted_here() ? 1u : 0u) + lanes_owned_here()->load(std::memory_order_seq_cst);
        const std::int64_t now = nanotime();
        if (!detect_deadlock_ || extm_live.load(std::memory_order_seq_cst) > own || quiet_since == 0 ||
            epoch != quiet_epoch) {
          quiet_epoch = epoch;
          quiet_since = now;
        }
        if (!detect_deadlock_ || now - quiet_since < deadlock_grace_ns) {
          shutdown_note_.clear();
          shutdown_waiting_.store(true, std::memory_order_seq_cst);
          shutdown_note_.sleep_for(std::min<std::int64_t>(quiet_since + deadlock_grace_ns - now, 50'000'000));
          shutdown_waiting_.store(false, std::memory_order_relaxed);
          continue;
        }
      }
      // Re-check after a moment: a thread outside the runtime may be
      // about to ready one of them.
      shutdown_note_.clear();
      shutdown_waiting_.store(true, std::memory_order_seq_cst);
      shutdown_note_.sleep_for(10'000'000);
      shutdown_waiting_.store(false, std::memory_order_relaxed);
      sched_lock lk(*this);
      if (npidle_.load(std::memory_order_relaxed) == active_ps() && globq_.empty() && live_goroutines() == live &&
          earliest_timer() == 0 && poller_.waiters() <= 0 /* netpoll */) {
        report_blocked_forever(live);  // goroutine dump: which ones, and where they wait
        blocked_at_shutdown_ = live;
        break;
      }
      continue;
    }
    quiet_since = 0;  // busy, or timers or I/O pending: not idle for good
    // netpoll: goroutines wait on I/O but no M watches the network (the
    // run() caller's M left): start one; it ends up blocked in epoll_wait.
    if (idle && io_wait && timer_m_until_.until() == 0) wakep();
    // Busy: look again in a millisecond (a P going idle wakes us sooner).
    // Only timers pending: look again when the next one is due.
    long long wait_ns = 1'000'000;
    if (next_timer != 0) {
      std::int64_t until_due = next_timer - nanotime();
      wait_ns = std::clamp<long long>(until_due, 1'000'000, 100'000'000);
    }
    shutdown_note_.clear();
    shutdown_waiting_.store(true, std::memory_order_seq_cst);
    shutdown_note_.sleep_for(wait_ns);
    shutdown_waiting_.store(false, std::memory_order_relaxed);
  }
  lanes_left();
  // netpoll: goroutines of other runtimes parking on our descriptors stop
  // asking our poller for an M to watch it (wakep), and those asking now
  // are done, before the Ms are stopped (netpoller::pin_owner).
  poller_.stop_watch();
  // after_func (time.hpp): a timer re-armed from a plain thread from now on
  // finds no runtime; one re-armed before was queued (and its M woken)
  // while the Ms still served, and is dropped with the other timers below.
  close_after_func_home();
  sysmon_.stop();  // sysmon: no goroutine is left to preempt or hand off
  // Stop the Ms: every one is parked (or about to be) in the idle list.
  exiting_.store(true, std::memory_order_seq_cst);
  // Read by index under the lock, not copied: a copy allocates, and the
  // allocator may refuse here (bad_alloc in a noexcept destructor).
  auto m_at = [this](std::size_t i) -> m* {
    sched_lock lk(*this);
    return i < allm_.size() ? allm_[i] : nullptr;
  };
  for (std::size_t i = 0; m* mm = m_at(i); ++i) mm->park_note.wake();
  poller_.brk();  // netpoll: the M blocked in epoll_wait
  // A wake_idle_m from outside (see there) may still be reading us. One
  // that took an M off the idle list for a P kept that P busy, so we got
  // here only after its M ran; the others run on our Ms, under lock_, or
  // for timers of goroutines and of after_func re-arms, which are over.
  while (wakes_in_flight_.load(std::memory_order_acquire) != 0) os::yield_thread();
  std::lock_guard<std::mutex> reap(reap_lock_);  // waits for a join_exited_ms in progress
  for (std::size_t i = 0; m* mm = m_at(i); ++i) {
    mm->thread.join();
    os::close_preemption_target(mm->os_thread);              // async preemption: sysmon has stopped
    record_delete<alloc_of<m>>{alloc_of<m>(ra_.get())}(mm);  // back to the runtime's allocator
  }
  unlink_blocked();
  // Timers still queued (a ticker nobody stopped, with no goroutine left)
  // are detached: deleting them later finds them on no heap.
  for_each_p([](p* pp) { pp->timers.clear(); });
  // A del() that read one of these heaps from a timer (a plain thread
  // stopping it) may still be on its way to lock it: the heaps are freed
  // below, with the Ps.
  timer_heap::wait_stale_dels();
  // goroutine dump: a dump in progress (the dump thread on SIGQUIT, or
  // goroutine_dump() on another runtime) reads our G records and Ps under
  // the registry's lock; once unregistered, none can reach them.
  unregister_runtime(this);
  release_memory();
}

// checkdead (Go's checkdead): called with lock_ held each time an M stops
// — joins the idle list (stopm), sleeps in stoplockedm, or exits. While
// run() is active (and detection is on): if every M is stopped, every P
// idle, the global queue empty, no timer pending and nobody waiting on
// I/O (dead_locked), no goroutine can be readied from inside the runtime.
// Only a thread outside it can still: a plain thread (an external M,
// extm.hpp) or another runtime. So this only arms the confirmation: the
// run() caller's M (woken here to sleep timed, unless it is the one
// stopping) sets deadlock_ once it has lasted a grace period with no
// external activity and no live external M (deadcheck.hpp), leaves, and
// run_main throws deadlock_error.
//
// Why nothing inside the runtime is missed: an M leaves the idle list /
// locked wait only under lock_ (m_idle_get, m_idle_remove, startlockedm),
// and a G is made runnable only by a running M (which is not stopped), by
// a timer (still pending on a heap, seq_cst earliest()), by the poller
// (its waiters), or from outside (external activity). A G queued from
// outside before this check is in globq_, read under the same lock. An M
// being created is in allm_ (newm adds it before os::create_thread) and not
// idle; a G in goro::blocking keeps its M out of the idle list.
//
// The grace period runs from the last M's stop: an armed check gets a new
// deadline (the run() caller's M, armed, is stopped in its confirming
// sleep or on its way there, and looks again at the old one).
template <class Policy>
inline auto scheduler<Policy>::checkdead(const sched_lock& lk, m* self) noexcept -> void {
  if (!dead_locked(lk)) return;
  const bool armed = deadcheck_at_ != 0;
  deadcheck_epoch_ = extm_epoch.load(std::memory_order_seq_cst);
  deadcheck_at_ = nanotime() + deadlock_grace_ns;
  if (armed) return;
  m* rm = run_m_.load(std::memory_order_relaxed);
  if (rm != self && take_run_m_locked(lk, rm)) wake_idle_m(rm);  // under lock_: rm cannot be freed meanwhile
}

// Whether no goroutine can be readied from inside the runtime (lock_ held).
template <class Policy>
inline auto scheduler<Policy>::dead_locked(const sched_lock&) noexcept -> bool {
  if (!detect_deadlock_ || main_done_.load(std::memory_order_acquire)) return false;
  if (!run_m_.load(std::memory_order_relaxed) || deadlock_.load(std::memory_order_relaxed)) return false;
  const std::size_t mcount = allm_.size() - nmexited_ + 1;  // + the run() caller's M
  if (nmidle_ + nmlocked_wait_ < mcount) return false;
  if (npidle_.load(std::memory_order_relaxed) != active_ps() || !globq_.empty_synced()) return false;
  if (poller_.waiters() > 0) return false;  // netpoll: the network may ready them
  return earliest_timer() == 0;
}

// Takes the run() caller's M off the idle list or out of its locked wait
// (lock_ held); true if it was there: the caller owns its wake-up.
template <class Policy>
inline auto scheduler<Policy>::take_run_m_locked(const sched_lock& held, m* rm) noexcept -> bool {
  if (rm->in_idle_list) {
    m_idle_remove(held, rm);
    return true;
  }
  if (rm->locked_wait) {
    rm->locked_wait = false;
    --nmlocked_wait_;
    return true;
  }
  return false;
}

// The main goroutine finished: the run() caller's M must leave at its
// next scheduling point; wake it if it is parked.
//
// The run() caller may see main_done_ and return (destroying its M) at any
// moment after the store, so run_m_ is read under lock_, which run_main
// holds to clear it before the M is destroyed; an M found in the idle list
// is parked and cannot go away until the wake-up below. The caller may
// also have started the next run() by then, with a new M (often at the
// same address) in run_m_: the run's epoch, read before the store (the
// caller cannot return before it), tells this run's M from the next's.
// (Seen under TSan: chan_test's run() loop, this M reading the next run's
// record; a chaos point below widens the window.)
template <class Policy>
inline auto scheduler<Policy>::main_finished() noexcept -> void {
  // main_return: the other goroutines start ending now (the ender thread
  // is published to run_main by the store below).
  if (unwind_on_main_return_) main_return_ops::main_finished(*this);
  std::uint64_t epoch;
  {
    sched_lock lk(*this);
    epoch = run_epoch_;
  }
  main_done_.store(true, std::memory_order_seq_cst);
  GORO_CHAOS_POINT("main_finished.published");
  m* rm = nullptr;
  bool was_timer_m = false;
  {
    sched_lock lk(*this);
    m* r = run_epoch_ == epoch ? run_m_.load(std::memory_order_relaxed) : nullptr;
    if (r && r != this_m() && r->in_idle_list) {
      was_timer_m = r == timer_m_;
      m_idle_remove(lk, r);
      rm = r;
    } else if (r && r != this_m() && take_run_m_locked(lk, r)) {  // lockosthread: in stoplockedm
      rm = r;
    }
  }
  if (rm) wake_idle_m(rm);  // netpoll: it may sleep in epoll_wait
  // It was watching the timers: have an M on an idle P take over (it
  // finds nothing to run and becomes the timer M).
  if (was_timer_m) wakep();
}

// Goroutines blocked forever are released unrun, but the channels and
// sync objects they wait on may outlive the runtime: take their waiter
// records (on the goroutines' stacks) off those queues first, so that a
// later operation finds no record of a freed goroutine. Every M has
// stopped: nothing else touches these Gs.
template <class Policy>
inline auto scheduler<Policy>::unlink_blocked() noexcept -> void {
  for (auto& block : g_blocks_) {
    for (std::uint32_t i = 0; i < gfree_batch; ++i) {
      g* gp = &block[i];
      if (gp->status.load(std::memory_order_relaxed) != g_status::waiting || !gp->unlink_wait) continue;
      (void)gp->unlink_wait(gp->unlink_arg);
      gp->unlink_wait = nullptr;
    }
  }
}

template <class Policy>
inline auto scheduler<Policy>::release_memory() noexcept -> void {
  for_each_p([this](p* pp) {
    while (pp->nstack) {
      stack_memory s = pp->stack_cache[--pp->nstack].mem;
      asan_unpoison(s.lo, s.size);
      alloc_.deallocate(s);
    }
    while (pp->nclass_stack) {
      stack_memory s = pp->class_stacks[--pp->nclass_stack].mem;
      asan_unpoison(s.lo, s.size);
      alloc_.deallocate(s);
    }
  });
  for (auto& block : g_blocks_) {
    for (std::uint32_t i = 0; i < gfree_batch; ++i) {
      g* gp = &block[i];
      if (gp->stack.lo) {  // blocked forever: release its stack unrun
        asan_unpoison(gp->stack.lo, gp->stack.size);
        alloc_.deallocate(gp->stack);
        gp->stack = {};
      }
      tsan_destroy_fiber(gp->tsan_fiber);
      gp->tsan_fiber = nullptr;
      // preempt.hpp's count of outstanding requests is process-wide: a
      // request left on a record (its goroutine ended before a safe
      // point, or sysmon's stale read flagged a free record) stayed
      // counted for good, and every safe point of every runtime then took
      // the slow path. sysmon and the Ms have stopped: nothing sets it again.
      clear_preempt(gp);
    }
  }
  // Unregistered (shutdown): no dump walks the records any more; the
  // lock orders this with a for_each_g that started before.
  debug_remove_blocks(this, memory);  // debugger: before the records go
  decltype(g_blocks_) blocks(g_blocks_.get_allocator());
  {
    std::lock_guard<std::mutex> lk(gfree_lock_);
    blocks.swap(g_blocks_);
  }
}

}  // namespace goro::detail
