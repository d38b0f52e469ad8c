// gomaxprocs(n) (Go's procresize without stopping the world): P records
// are created, activated and retired. Part of scheduler<Policy> (sched.hpp).
// Included at the end of sched.hpp only.
#pragma once

namespace goro::detail {

// Go's GOMAXPROCS(n) (stopTheWorld, procresize, startTheWorld), without
// stopping the Ps that stay: returns the previous count once there are
// n Ps. Growing creates P records (or reactivates retired ones) and puts
// them on the idle list. Shrinking marks Ps [n, old) retired: idle ones
// leave the idle list at once; a busy one is given up by its M at its
// next scheduling point (its local queue goes to the global queue), so
// its running goroutine is asked to yield, and one in goro::blocking is
// taken from its call (as sysmon's retake does). Waits until every
// retired P is given up (yielding, inside a goroutine; the caller's own
// P may be one of them). A retired P keeps its timers, which every
// active P runs. A goroutine that never reaches a safe point
// (preemption::cooperative with no preempt_point()) on a retired P
// delays the return, as it would delay Go's stop-the-world.
template <class Policy>
inline auto scheduler<Policy>::resize(unsigned n) -> unsigned {
  if (n == 0) return active_ps();
  if (n > max_procs) raise_usage("gomaxprocs(n): n must be at most 4096");
  unsigned old;
  {
    std::lock_guard<std::mutex> rl(resize_lock_);
    auto fresh = make_ps(created_ps(), n);  // may throw bad_alloc: nothing changed yet
    sched_lock lk(*this);
    create_ps_locked(lk, std::move(fresh));
    old = nprocs_.load(std::memory_order_relaxed);
    if (n == old) return old;
    nprocs_.store(n, std::memory_order_seq_cst);
    if (n > old) {
      activate_locked(lk, old, n);
    } else {
      for (p** link = &pidle_; *link;) {
        p* pp = *link;
        if (pp->id < n) {
          link = &pp->link;
          continue;
        }
        *link = pp->link;
        pp->link = nullptr;
        npidle_.fetch_sub(1, std::memory_order_seq_cst);
        retire_locked(lk, pp);
      }
    }
  }
  if (n > old) {
    GORO_CHAOS_POINT("gomaxprocs.grow");
    wakep();  // work queued anywhere gets the new Ps
    return old;
  }
  while (!retired_ps_released(n)) {
    GORO_CHAOS_POINT("gomaxprocs.shrink_wait");
    m* mm = this_m();
    if (mm && mm->curg && mm->pp) {
      // Yield (Gosched): the others run meanwhile, and if this goroutine's
      // own P is retired, its M gives it up now (gosched goes through g0
      // on a retired P).
      gosched(mm);
    } else {
      os::sleep_ns(20'000);
    }
  }
  return old;
}

// New P records with ids [from, to) (none if to <= from).
template <class Policy>
inline auto scheduler<Policy>::make_ps(unsigned from, unsigned to) -> vec<owned<p>> {
  vec<owned<p>> ps{alloc_of<owned<p>>(ra_.get())};
  for (unsigned i = from; i < to; ++i) {
    ps.push_back(allocate_record<p>(ra_.get()));
    ps.back()->id = i;
    ps.back()->timers.set_memory(memory);
  }
  return ps;
}

// Publishes new P records (lock_ held): their slots, then nallp_, then a
// steal order covering them.
template <class Policy>
inline auto scheduler<Policy>::create_ps_locked(const sched_lock&, vec<owned<p>> ps) -> void {
  if (ps.empty()) return;
  unsigned to = ps.back()->id + 1;
  owned<coprime_order> order = allocate_record<coprime_order>(ra_.get());
  order->set_memory(memory);
  order->reset(to);
  steal_orders_.reserve(steal_orders_.size() + 1);
  p_records_.reserve(p_records_.size() + ps.size());  // no throw past this point
  for (auto& rec : ps) {
    allp_[rec->id] = rec.get();
    p_records_.push_back(std::move(rec));
  }
  nallp_.store(to, std::memory_order_release);
  steal_order_.store(order.get(), std::memory_order_release);
  steal_orders_.push_back(std::move(order));
}

// Ps [from, to) are active (nprocs_ covers them): fresh and retired ones
// go on the idle list; one not retired is still held by its M (or in a
// blocking call) and simply stays (lock_ held).
template <class Policy>
inline auto scheduler<Policy>::activate_locked(const sched_lock& held, unsigned from, unsigned to) noexcept -> void {
  for (unsigned i = to; i-- > from;) {  // P `from` on top of the idle list
    p* pp = allp_[i];
    if (!pp->retired) continue;
    pp->retired = false;
    pidle_put(held, pp);
  }
}

// A retired P (id >= nprocs_) loses its owner (lock_ held): its queued
// goroutines go to the global queue (the caller wakes an M for them) and
// its free G records to the global list; it then sits on no list until a
// growth reactivates it (Go's p.destroy, minus freeing the record).
template <class Policy>
inline auto scheduler<Policy>::retire_locked(const sched_lock&, p* pp) noexcept -> void {
  pp->status.store(p_status::idle, std::memory_order_relaxed);
  pp->retired = true;
  pp->runq.drain([this](g* gp) { globq_.push_back(gp); });
  if (pp->ngfree) {
    std::lock_guard<std::mutex> lk(gfree_lock_);
    gfree_.insert(gfree_.end(), pp->gfree, pp->gfree + pp->ngfree);  // capacity reserved: no allocation
    pp->ngfree = 0;
  }
  if (shutdown_waiting_.load(std::memory_order_relaxed)) shutdown_note_.wake();
}

// mm's P was retired by a shrink: give it up (find_runnable then looks
// for an active P).
template <class Policy>
inline auto scheduler<Policy>::drop_retired_p(m* mm) -> void {
  p* pp = mm->pp;
  const bool had_work = !pp->runq.empty();
  spin_token spinning = std::move(mm->spinning);
  {
    sched_lock lk(*this);
    releasep(mm);
    pidle_put(lk, pp);  // retires it (or lists it: gomaxprocs grew meanwhile)
  }
  const bool was_spinning = spinning_.release(spinning);
  GORO_CHAOS_POINT("drop_retired_p.wakep");
  if (had_work || was_spinning) wakep();
}

// resize's wait: true once no P of [n, nallp_) is held any more. Asks the
// goroutine running on each held one to yield, and takes one in a
// blocking call from it (retake), so it is retired now.
template <class Policy>
inline auto scheduler<Policy>::retired_ps_released(unsigned n) -> bool {
  bool released = true;
  for (unsigned i = n, c = created_ps(); i < c; ++i) {
    p* pp = allp_[i];
    {
      sched_lock lk(*this);
      if (pp->retired || pp->id < nprocs_.load(std::memory_order_relaxed)) continue;  // done, or active again
    }
    released = false;
    auto st = pp->status.load(std::memory_order_acquire);
    if (st == p_status::syscall &&
        pp->status.compare_exchange_strong(st, p_status::running, std::memory_order_acq_rel)) {
      handoffp(pp);
    } else if (st != p_status::idle) {
      sysmon_.preemptone(pp);  // also a G back from its call on the fast path
    }
  }
  return released;
}

}  // namespace goro::detail
