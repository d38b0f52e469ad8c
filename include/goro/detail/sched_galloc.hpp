// G records, stacks and ids (Go's gfget / gfput, stackalloc), and a
// goroutine's first and last steps: goroutine_main (the first frame on
// every stack) and goexit0. Part of scheduler<Policy> (sched.hpp).
// Included at the end of sched.hpp only.
#pragma once

namespace goro::detail {

// A stack from the allocator; the default one also says whether it has a guard region.
template <class Policy>
inline auto scheduler<Policy>::allocate_stack(std::size_t size) -> cached_stack {
  cached_stack c{{}, false};
  if constexpr (lazy_stacks)
    c.mem = alloc_.allocate(size, c.guarded);
  else
    c.mem = alloc_.allocate(size);
  return c;
}

// start_g's bookkeeping for run()'s main goroutine when this thread has a
// P: it runs here at once instead of being queued (lockosthread: main
// starts on the run() caller's thread).
template <class Policy>
inline auto scheduler<Policy>::start_main_here(p* pp, g* gp) -> void {
  set_dump_field(gp->sched, this);
  gp->status.store(g_status::runnable, std::memory_order_relaxed);
  sysmon_.ensure_started();
  new_g_on_p(pp, gp);
}

// A new G on P pp (newproc): its stack now with a custom allocator (may
// throw: then nothing changed but the stack cache), an id from pp's batch
// (Go hands out goids 16 at a time per P), and pp's spawn count.
template <class Policy>
inline auto scheduler<Policy>::new_g_on_p(p* pp, g* gp) -> void {
  if constexpr (!lazy_stacks)
    if (!gp->stack.lo) attach_stack(pp, gp);  // run()'s main has its stack already (run_main)
  if (pp->goid_next == pp->goid_end) {
    pp->goid_next = goid_gen_.fetch_add(goid_batch, std::memory_order_relaxed);
    pp->goid_end = pp->goid_next + goid_batch;
  }
  set_dump_field(gp->id, pp->goid_next++);
  pp->spawns.inc();
}

// gfget / gfput (Go's gfget / gfput): a P keeps up to p_gfree_max free
// G records; it refills gfree_batch at a time from the global list and
// gives half back when full.
template <class Policy>
inline auto scheduler<Policy>::gfget(p* pp) -> g* {
  if (pp->ngfree == 0) {
    std::lock_guard<std::mutex> lk(gfree_lock_);
    if (gfree_.empty()) new_g_block_locked();
    const std::size_t n = std::min<std::size_t>(gfree_batch, gfree_.size());
    std::copy(gfree_.end() - static_cast<std::ptrdiff_t>(n), gfree_.end(), pp->gfree);
    gfree_.resize(gfree_.size() - n);
    pp->ngfree = static_cast<std::uint32_t>(n);
  }
  g* gp = pp->gfree[--pp->ngfree];
  // The next spawn's record: fetch it (for writing) while this one runs.
  if (pp->ngfree) prefetch_for_write(pp->gfree[pp->ngfree - 1]);
  return gp;
}

template <class Policy>
inline auto scheduler<Policy>::gfput(p* pp, g* gp) noexcept -> void {
  gp->status.store(g_status::idle, std::memory_order_relaxed);
  clear_preempt(gp);  // it ended before a safe point: no request is outstanding (preempt.hpp's count)
  if (pp->ngfree == p_gfree_max) {
    // The older half to the global list (capacity reserved: no
    // allocation); the recently freed, cache-hot half stays.
    constexpr std::uint32_t half = p_gfree_max / 2;
    {
      std::lock_guard<std::mutex> lk(gfree_lock_);
      gfree_.insert(gfree_.end(), pp->gfree, pp->gfree + half);
    }
    std::copy(pp->gfree + half, pp->gfree + p_gfree_max, pp->gfree);
    pp->ngfree -= half;
  }
  pp->gfree[pp->ngfree++] = gp;
}

template <class Policy>
inline auto scheduler<Policy>::gfget_global_or_new() -> g* {
  std::lock_guard<std::mutex> lk(gfree_lock_);
  if (gfree_.empty()) new_g_block_locked();
  g* gp = gfree_.back();
  gfree_.pop_back();
  return gp;
}

template <class Policy>
inline auto scheduler<Policy>::gfput_global(g* gp) noexcept -> void {
  gp->status.store(g_status::idle, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lk(gfree_lock_);
  gfree_.push_back(gp);  // capacity reserved: no allocation
}

// Allocates gfree_batch G records in one block onto the global free list
// (gfree_lock_ held). The list and the global run queue get room for
// every record first, so their pushes never allocate. May raise
// bad_alloc; nothing changes then.
template <class Policy>
inline auto scheduler<Policy>::new_g_block_locked() -> void {
  const std::size_t total = (g_blocks_.size() + 1) * gfree_batch;
  globq_.reserve(total);
  gfree_.reserve(total);
  // Geometric: an exact +1 moved every block's owner at each new block.
  if (g_blocks_.size() == g_blocks_.capacity()) g_blocks_.reserve(2 * g_blocks_.size() + 1);
  auto block = allocate_records<g>(ra_.get(), gfree_batch);  // the runtime's allocator (may throw)
  debug_add_block(block.get(), gfree_batch, this, memory);  // debugger: tools/goro-gdb.py (may throw: nothing added)
  for (std::uint32_t i = gfree_batch; i-- > 0;) {
    block[i].sched = this;
    gfree_.push_back(&block[i]);
  }
  g_blocks_.push_back(std::move(block));
}

// The default allocator's stacks are attached as a goroutine first runs
// (execute, on g0), long after its spawn returned: a refusal (mmap's
// ENOMEM: RLIMIT_AS, vm.max_map_count) has nobody to be thrown to, and
// Go's stackalloc fails the same way ("out of memory"). Unwinding the
// scheduler loop with the bad_alloc ended in std::terminate on an M's
// thread and in a misleading abort out of run() on the caller's.
template <class Policy>
inline auto scheduler<Policy>::attach_stack_at_first_run(p* pp, g* gp) noexcept -> void {
  GORO_TRY {
    attach_stack(pp, gp);
    return;
  }
  GORO_CATCH_ALL {}
  char msg[96];
  std::snprintf(msg, sizeof msg, "goro: out of memory (goroutine %llu's %zu-byte stack)",
                static_cast<unsigned long long>(dump_field(gp->id)),
                static_cast<std::size_t>(gp->stack_request != 0 ? gp->stack_request : stack_bytes));
  fatal(msg);
}

// Gives gp a stack from pp's cache (refilled from the allocator in a
// batch: the most recently freed stacks are cache-hot).
template <class Policy>
inline auto scheduler<Policy>::attach_stack(p* pp, g* gp) -> void {
  if (GORO_UNLIKELY(gp->stack_request != 0) && gp->stack_request != stack_bytes) {
    // spawn_options::stack_size: the newest of its class in pp's cache of
    // other classes, else from the allocator (a free list per class).
    for (std::uint32_t i = pp->nclass_stack; i-- > 0;) {
      if (pp->class_stacks[i].mem.size != gp->stack_request) continue;
      const cached_stack c = pp->class_stacks[i];
      std::copy(pp->class_stacks + i + 1, pp->class_stacks + pp->nclass_stack, pp->class_stacks + i);
      --pp->nclass_stack;
      init_stack(gp, c);
      return;
    }
    init_stack(gp, allocate_stack(gp->stack_request));  // may throw bad_alloc
    return;
  }
  if (pp->nstack == 0) {
    std::uint32_t want = lazy_stacks ? stack_refill : 1;
    while (pp->nstack < want) {
      cached_stack c;
      if (pp->nstack == 0) {
        c = allocate_stack(stack_bytes);  // may throw bad_alloc
      } else {
        GORO_TRY { c = allocate_stack(stack_bytes); }
        GORO_CATCH_ALL { break; }
      }
      pp->stack_cache[pp->nstack++] = c;
    }
  }
  init_stack(gp, pp->stack_cache[--pp->nstack]);
}

template <class Policy>
inline auto scheduler<Policy>::init_stack(g* gp, cached_stack c) noexcept -> void {
  stack_memory s = c.mem;
  asan_unpoison(s.lo, s.size);
  gp->stack = s;
  gp->stack_canary = !c.guarded;
  if (gp->stack_canary) write_canary(s);
  gp->sp = make_context(s.lo, s.size - stack_color(s), &goroutine_main);
  if (!gp->tsan_fiber) gp->tsan_fiber = tsan_create_fiber();
}

// Stack colouring: stacks are page-aligned (and usually 64 KiB + guard
// apart), so without an offset every goroutine's top frames would sit at
// the same offset within a page, all in one L1/L2 cache set, and a run
// queue of a thousand goroutines would miss the cache at every switch. The
// initial frame starts a pseudo-random number of cache lines below the top
// (at most 1/16 of the stack, at most 2 KiB: more would often push a
// parked goroutine's few hundred bytes of frames into a second page).
template <class Policy>
inline auto scheduler<Policy>::stack_color(const stack_memory& s) noexcept -> std::size_t {
  const std::size_t lines = std::min<std::size_t>(s.size / 16, 2048) / 64;
  if (lines <= 1) return 0;
  const std::uint64_t k = reinterpret_cast<std::uintptr_t>(s.lo) >> 12;
  return static_cast<std::size_t>((k * 0x9e3779b97f4a7c15ull) >> 58) % lines * 64;
}

template <class Policy>
inline auto scheduler<Policy>::release_stack(p* pp, g* gp, bool was_main) noexcept -> void {
  stack_memory s = gp->stack;
  gp->stack = {};
  gp->sp = nullptr;
  if (s.size != stack_bytes) {
    if (was_main) {  // main_stack_size: one of its kind
      asan_unpoison(s.lo, s.size);
      alloc_.deallocate(s);
      return;
    }
    // A spawn_options::stack_size class: pp's cache of other classes,
    // whose oldest goes back to the allocator when it is full.
    if (pp->nclass_stack == p_class_stack_max) {
      stack_memory x = pp->class_stacks[0].mem;
      std::copy(pp->class_stacks + 1, pp->class_stacks + p_class_stack_max, pp->class_stacks);
      --pp->nclass_stack;
      asan_unpoison(x.lo, x.size);
      alloc_.deallocate(x);
    }
    pp->class_stacks[pp->nclass_stack++] = {s, !gp->stack_canary};
    return;
  }
  pp->stack_cache[pp->nstack++] = {s, !gp->stack_canary};
  if (pp->nstack == p_stack_cache_max) {
    while (pp->nstack > p_stack_cache_max / 2) {
      stack_memory x = pp->stack_cache[--pp->nstack].mem;
      asan_unpoison(x.lo, x.size);
      alloc_.deallocate(x);
    }
  }
}

// goexit0: gp finished; recycle its stack and record.
template <class Policy>
inline auto scheduler<Policy>::goexit0(p* pp, g* gp) noexcept -> void {
  bool was_main = gp->is_main;
  gp->status.store(g_status::dead, std::memory_order_relaxed);
  // Written only for main (already false for every other G): main_return's
  // kill pass reads is_main of records whose goroutines may be exiting
  // meanwhile (TSan: a race with an unconditional store); main's is
  // cleared before main_finished starts that pass.
  if (was_main) gp->is_main = false;
  clear_preempt(gp);
  release_stack(pp, gp, was_main);
  gp->eh_caught = nullptr;  // the record's next goroutine starts with no exception state
  gp->eh_uncaught = 0;
  gp->exiting.store(exit_state::none, std::memory_order_relaxed);  // main_return
  gp->no_kill = false;
  pp->exits.inc();  // before main_finished: live_goroutines() is exact when run() returns
  gfput(pp, gp);
  if (was_main) main_finished();
}

// thread_lane (lane.hpp): a goroutine that a lane runs never sits on a
// P, so it takes its stack from the allocator at once (no per-P cache),
// its id from the global counter, and is counted off-P, like a spawn from
// outside the runtime.
template <class Policy>
inline auto scheduler<Policy>::start_lane_g(g* gp, sched_base* lane) -> void {
  if (shut_down_) raise_usage("thread_lane::go: the runtime is shutting down");
  init_stack(gp, allocate_stack(gp->stack_request != 0 ? gp->stack_request : stack_bytes));  // may throw bad_alloc
  set_dump_field(gp->sched, lane);
  set_dump_field(gp->id, goid_gen_.fetch_add(1, std::memory_order_relaxed));
  gp->status.store(g_status::runnable, std::memory_order_relaxed);
  lane_live_.fetch_add(1, std::memory_order_relaxed);
  offp_spawns_.fetch_add(1, std::memory_order_relaxed);
}

// A test seam (test_seam.hpp): lane_g_exit calls it just
// before the record goes back to the free list (tests/lane_test.cpp holds
// the lane's thread there while run() returns).
namespace testing {
inline test_seam<> lane_exit_seam;
}  // namespace testing

// goexit0 for a lane's goroutine, on the lane's thread. Once the live
// count drops, run() may return and the runtime be destroyed: so that
// comes last (the record went back after it: a use after free). gp stays
// `running` until then (gfput_global: idle), or main_return's stuck()
// took it for a goroutine that can never run and run() returned early.
template <class Policy>
inline auto scheduler<Policy>::lane_g_exit(g* gp) noexcept -> void {
  clear_preempt(gp);
  stack_memory s = gp->stack;
  gp->stack = {};
  gp->sp = nullptr;
  asan_unpoison(s.lo, s.size);
  alloc_.deallocate(s);
  gp->eh_caught = nullptr;
  gp->eh_uncaught = 0;
  gp->exiting.store(exit_state::none, std::memory_order_relaxed);
  gp->no_kill = false;
  gp->lock_count.store(0, std::memory_order_relaxed);
  gp->lockedm.store(nullptr, std::memory_order_relaxed);
  set_dump_field(gp->sched, this);
  lane_live_.fetch_sub(1, std::memory_order_relaxed);  // shutdown waits on the live count after it
  testing::lane_exit_seam();
  gfput_global(gp);
  offp_exits_.fetch_add(1, std::memory_order_release);  // the last touch
}

// Entry of every goroutine (first frame on its stack).
// `arg` is what the switch passed (see goroutine_resumed).
template <class Policy>
inline auto scheduler<Policy>::goroutine_main(void* arg) -> void {
  g* gp = (arg ? static_cast<m_base*>(arg) : current_m())->curg;
  goroutine_resumed(gp, arg);
  // main_return: a goroutine that starts once its runtime ends its
  // goroutines is discarded (its functor destroyed here, unrun).
  const bool discard = GORO_UNLIKELY(gp->sched->ending()) && !gp->is_main;
  if (discard) gp->exiting.store(exit_state::unwinding, std::memory_order_relaxed);
  run_goroutine(gp, !discard);
  m_base* mm = current_m();
  mm->after = after_switch::exit;
  switch_to_g0(mm, gp);
  fatal("goro: internal error: a finished goroutine was resumed");
}

// Runs gp's closure. An exception escaping a goroutine other than main
// (main's closure catches its own, for run() to rethrow) is fatal.
template <class Policy>
inline auto scheduler<Policy>::run_goroutine(g* gp, bool run) noexcept -> void {
#if GORO_EXCEPTIONS
  try {
    gp->closure_op(gp, run);
  } catch (const goexit_unwind&) {
  } catch (const std::exception& e) {
    uncaught_exception(gp, e.what());
  } catch (...) {
    uncaught_exception(gp, "unknown exception (not derived from std::exception)");
  }
#else
  gp->closure_op(gp, run);
#endif
}

template <class Policy>
[[noreturn]] inline auto scheduler<Policy>::uncaught_exception(g* gp, const char* what) noexcept -> void {
  std::fprintf(stderr, "goro: goroutine %llu: uncaught exception: %s\n", static_cast<unsigned long long>(gp->id), what);
  std::fflush(stderr);
  std::abort();
}

}  // namespace goro::detail
