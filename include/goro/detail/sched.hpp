// The scheduler: Ps, Ms and the global state for one runtime, with Go's
// algorithms (src/runtime/proc.go): schedule / findRunnable / execute,
// runqput into runnext with time-slice inheritance, the fair global batch
// get, stealing over a random coprime order, spinning Ms bounded by
// nmspinning, wakep / startm / stopm / handoffp, and the "delicate dance"
// before an M parks. Everything policy-dependent is a template parameter.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "../dump.hpp"  // goroutine dump
#include "../error.hpp"
#include "../policy.hpp"
#include "../stack.hpp"
#include "cet.hpp"
#include "config.hpp"
#include "context.hpp"
#include "deadcheck.hpp"  // checkdead: the confirmation, external Ms
#include "extm.hpp"       // checkdead: external Ms
#include "futex.hpp"
#include "g.hpp"
#include "main_return.hpp"  // main_return::unwind: ending the goroutines when main returns
#include "global_queue.hpp"
#include "m.hpp"
#include "netpoll.hpp"  // netpoll
#include "os_thread.hpp"
#include "random.hpp"
#include "run_queue.hpp"
#include "sanitizer.hpp"
#include "stall_monitor.hpp"  // chaos builds: the stall monitor
#include "signals.hpp"
#include "chaos.hpp"  // chaos (test builds only)
#include "async_preempt.hpp"  // async preemption
#include "preempt.hpp"  // sysmon
#include "sysmon.hpp"   // sysmon
#include "timer_heap.hpp"
#include "debug_info.hpp"  // debugger anchor (tools/goro-gdb.py)
#include "trace.hpp"  // execution tracer

namespace goro {

// Counters since the runtime started (snapshots; exact when quiescent).
struct runtime_stats {
  std::uint64_t spawns = 0;         // goroutines created
  std::uint64_t exits = 0;          // goroutines finished
  std::uint64_t steals = 0;         // successful steals from another P
  std::uint64_t global_polls = 0;   // Gs taken from the global run queue
  std::uint64_t preemptions = 0;    // goroutines preempted by sysmon (they yielded at a safe point)
  std::uint64_t syscall_handoffs = 0;  // Ps handed to another M around goro::blocking calls
  std::uint64_t parks = 0;          // goroutines parked (blocked)
  std::uint64_t unparks = 0;        // goroutines readied
  std::uint64_t m_parks = 0;        // Ms that went to sleep for lack of work
  std::uint64_t m_spins = 0;        // times an M started spinning
  std::uint64_t threads = 0;        // OS threads (Ms) created
  std::uint64_t sysmon_parks = 0;   // times sysmon slept until a P got busy (every P idle for 1 ms)
};

namespace detail {

// An owner-written counter others may read: a relaxed load+store instead
// of a locked read-modify-write on the hot path.
struct owned_counter {
  std::atomic<std::uint64_t> v{0};
  void inc(std::uint64_t n = 1) noexcept { v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  std::uint64_t get() const noexcept { return v.load(std::memory_order_relaxed); }
};

// How long an M with nothing to do keeps looking (stealing, polling the
// global queue) before it gives up its P and parks. Bounded in time: long
// enough to bridge the gap between bursts of work without a futex round
// trip, short enough that an idle runtime costs no CPU.
inline constexpr std::chrono::nanoseconds spin_duration{30'000};
// How often a spinning M polls the network (a non-blocking epoll_wait,
// only while goroutines wait on I/O and no other M polls).
inline constexpr std::chrono::nanoseconds spin_poll_interval{5'000};
// Free Gs kept per P before half move to the global list (Go: 64 / 32).
inline constexpr std::uint32_t p_gfree_max = 64;
inline constexpr std::uint32_t gfree_batch = 32;
// Stacks cached per P before half go back to the allocator.
inline constexpr std::uint32_t p_stack_cache_max = 32;
inline constexpr std::uint32_t stack_refill = 16;
// The most Ps a runtime may have (options::maxprocs, GORO_MAXPROCS,
// gomaxprocs(n)); the table of P records has this many slots.
inline constexpr unsigned max_procs = 4096;
// Goroutine ids are handed to Ps in batches (Go: 16).
inline constexpr std::uint64_t goid_batch = 16;
// Go sleeps ~3 us before stealing a running P's runnext: its owner is
// probably about to run it.
inline constexpr long runnext_steal_grace_us = 3;

inline unsigned online_cpus() noexcept {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<unsigned>(n);
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<unsigned>(n) : 1u;
}

template <class Policy>
class scheduler final : public sched_base {
  static_assert(check_policy<Policy>());
  using steal_ratio = typename Policy::steal_fraction;
  using run_queue = local_run_queue<g, static_cast<std::uint32_t>(Policy::local_queue_capacity),
                                    static_cast<std::uint32_t>(steal_ratio::num),
                                    static_cast<std::uint32_t>(steal_ratio::den)>;
  using allocator = typename Policy::stack_allocator;
  // With the default allocator stacks are virtual memory that never runs out
  // in practice, so a goroutine gets its stack when it first runs. A custom
  // allocator may be a finite pool: then the stack is taken at spawn, so
  // exhaustion is reported by the go() call that needed it.
  static constexpr bool lazy_stacks = std::is_same_v<allocator, default_stack_allocator>;
  static constexpr std::size_t stack_bytes = (Policy::stack_size + 15) & ~std::size_t{15};
  // async preemption: Ms of this runtime take SIGURG preemption (not under TSan).
  static constexpr bool async_signal = Policy::preempt == preemption::signal && async_preempt_supported;
  // With the default allocator, run()'s main goroutine gets at least 256 KiB
  // whatever the policy: it usually does the program's heavier work
  // (I/O, formatting), which tiny goroutine stacks cannot hold.
  static constexpr std::size_t main_stack_size = std::max<std::size_t>(stack_bytes, 256 * 1024);

  enum class p_status : std::uint32_t { idle, running, syscall /* in goro::blocking, no owner: see sysmon.hpp */ };

  struct cached_stack {
    stack_memory mem;
    bool guarded;
  };

  // A stack from the allocator; the default one also says whether it has a guard region.
  cached_stack allocate_stack(std::size_t size) {
    cached_stack c{{}, false};
    if constexpr (lazy_stacks)
      c.mem = alloc_.allocate(size, c.guarded);
    else
      c.mem = alloc_.allocate(size);
    return c;
  }

  struct m;

  struct alignas(cache_line) p {
    std::uint32_t id = 0;
    std::atomic<p_status> status{p_status::idle};
    m* owner = nullptr;
    std::uint32_t schedtick = 0;
    // The running slice is over: a G parked with its preemption request
    // pending; the G that inherits the slice (runnext) gets the request.
    bool slice_over = false;
    p* link = nullptr;  // idle list
    run_queue runq;
    // Free G records (no stacks), most recently freed last. An array, not
    // a list through the records: taking one reads no record (the next
    // one's address is known, so it is prefetched), and moving a batch
    // to or from the global list touches none (they are usually in another
    // core's cache: spawned here, run and freed by a thief).
    g* gfree[p_gfree_max];
    std::uint32_t ngfree = 0;
    cached_stack stack_cache[p_stack_cache_max];
    std::uint32_t nstack = 0;
    std::uint64_t goid_next = 0, goid_end = 0;
    owned_counter spawns, exits, steals, global_polls, parks, unparks;
    timer_heap timers;  // this P's timers (own lock: other Ms add and run them)
    // sysmon (sysmon.hpp): what it reads of a P from its own thread.
    std::atomic<std::uint32_t> sysmon_schedtick{0};  // schedtick, published by execute
    std::atomic<g*> sysmon_curg{nullptr};            // the G execute last ran (may be stale)
    std::atomic<m_base*> sysmon_m{nullptr};          // async preemption: the M that ran it (SIGURG target)
    std::atomic<std::uint32_t> syscalltick{0};       // +1 at each enter/exit of goro::blocking
    // gomaxprocs: on no list and owned by nobody (lock_): a fresh record,
    // or one given up by its last M after a shrink. Cleared when the P
    // becomes active (activate_locked).
    bool retired = true;
  };

  struct m : m_base {
    p* pp = nullptr;
    p* nextp = nullptr;  // handed over by startm before the wake-up
    bool spinning = false;
    bool run_caller = false;  // the thread inside run(): leaves when main finishes
    bool extm_self = false;   // checkdead: run()'s thread counts in extm_live (its plain-thread past), not as this M
    bool in_idle_list = false;
    note park_note;
    m* link = nullptr;  // idle list
    fast_rand rng;
    pthread_t thread{};
    bool has_thread = false;
    p* oldp = nullptr;  // sysmon: the P left in `syscall` status by goro::blocking
    // lockosthread: sleeping in stoplockedm (outside the idle list; counted
    // in nmlocked_wait_), under lock_. Whoever clears it owns the wake-up.
    bool locked_wait = false;
    bool exit_thread = false;  // lockosthread: a G exited while locked to this M
    // gosched (yield): the G that switched straight to curg, queued by curg
    // once running (direct_switch_done); or a G gosched took from the run
    // queues but could not switch to directly: g0 runs it next (m_loop).
    g* direct_prev = nullptr;
    g* yield_next = nullptr;
    bool yield_next_inherit = false;
    g* async_token = nullptr;  // async preemption: the pinned G queued while this M waits for a P (park_pinned)
    std::int32_t id = 0;                  // 0: the run() caller's M (Go's m0); others from 1 (traces)
    std::int64_t trace_blocking_since = 0;  // tracer: when curg entered goro::blocking (0: not traced)
  };

 public:
  explicit scheduler(unsigned nprocs, bool detect_deadlock = true)  // checkdead: detect_deadlock
      : nprocs_(nprocs == 0 ? 1 : nprocs), allp_(new p*[max_procs]()), detect_deadlock_(detect_deadlock) {
    if (nprocs > max_procs) raise_usage("maxprocs must be at most 4096");
    if (shadow_stack_active())  // see cet.hpp
      raise_usage(
          "runtime: CET shadow stacks are enabled in this process and goro's context switch does not "
          "keep them; compile the files that include goro with -fcf-protection=branch (goro's CMake "
          "target does) or run with GLIBC_TUNABLES=glibc.cpu.x86_shstk=off");
    install_fault_handler();
    if constexpr (async_signal) install_async_preempt_handler();  // async preemption
    std::lock_guard<std::mutex> lk(lock_);
    create_ps_locked(make_ps(0, nprocs_.load(std::memory_order_relaxed)));
    activate_locked(0, nprocs_.load(std::memory_order_relaxed));
    install_dump_handlers();  // goroutine dump: SIGQUIT, GORO_DEBUG check
    register_runtime(this);
  }

  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;

  ~scheduler() override {
    shutdown();  // unregisters this runtime from the goroutine dump before freeing G records
  }

  // ---- sched_base ----

  g* alloc_g() override {
    m* mm = this_m();
    if (mm && mm->pp) return gfget(mm->pp);
    return gfget_global_or_new();
  }

  void free_g(g* gp) noexcept override {
    m* mm = this_m();
    if (mm && mm->pp)
      gfput(mm->pp, gp);
    else
      gfput_global(gp);
  }

  // newproc: the new G goes into the current P's runnext (it runs next,
  // and the spawner's locality is kept), or to the global queue when
  // spawned from a thread that is not one of this runtime's Ms.
  void start_g(g* gp) override {
    m* mm = this_m();
    p* pp = mm ? mm->pp : nullptr;
    gp->sched = this;
    gp->status.store(g_status::runnable, std::memory_order_relaxed);
    sysmon_.ensure_started();  // sysmon: the first spawn comes from outside any goroutine
    if (pp) {
      if constexpr (!lazy_stacks) attach_stack(pp, gp);  // may throw: nothing queued yet
      if (pp->goid_next == pp->goid_end) {
        pp->goid_next = goid_gen_.fetch_add(goid_batch, std::memory_order_relaxed);
        pp->goid_end = pp->goid_next + goid_batch;
      }
      gp->id = pp->goid_next++;
      if (GORO_UNLIKELY(tracing::enabled())) trace_create(mm, gp);
      pp->spawns.inc();
      pp->runq.put(gp, true, [this](g** batch, std::uint32_t n) { glob_put_batch(batch, n); });
    } else {
      if (!mm) extm_outside_op();  // checkdead: a spawn from outside is external activity
      if constexpr (!lazy_stacks) attach_stack_global(gp);
      gp->id = goid_gen_.fetch_add(1, std::memory_order_relaxed);
      if (GORO_UNLIKELY(tracing::enabled())) trace_create(mm, gp);
      offp_spawns_.fetch_add(1, std::memory_order_relaxed);
      globq_.push_back(gp);
    }
    GORO_CHAOS_POINT("newproc.wakep");
    const int err = wakep();
    // go() from outside with no M at all, and none could be started:
    // nothing would ever run gp. Undo the spawn, unless an M started by a
    // concurrent go() took gp meanwhile (then it runs: a success). With
    // some M alive, the work runs on it, and the start is retried
    // (m_start_failed_, sysmon).
    if (GORO_UNLIKELY(err != 0) && !pp && threads_alive_.load() == 0 && run_m_.load() == nullptr &&
        globq_.remove(gp)) {
      offp_spawns_.fetch_sub(1, std::memory_order_relaxed);
      raise_system(err, "go(): cannot create an OS thread (M)");
    }
  }

  // ready: waiting -> runnable, into the current P's runnext (the woken G
  // runs next and inherits the waker's time slice), or the global queue
  // from outside.
  void ready(g* gp) noexcept override {
    gp->status.store(g_status::runnable, std::memory_order_relaxed);
    m* mm = this_m();
    if (GORO_UNLIKELY(tracing::enabled())) trace_wake(mm, gp);
    if (mm && mm->pp) {
      mm->pp->unparks.inc();  // per P: a shared counter here costs pingpong ~8%
      mm->pp->runq.put(gp, true, [this](g** batch, std::uint32_t n) { glob_put_batch(batch, n); });
    } else {
      if (!mm) extm_outside_op();  // checkdead: a wake from outside is external activity
      unparks_.fetch_add(1, std::memory_order_relaxed);
      globq_.push_back(gp);
    }
    GORO_CHAOS_POINT("ready.wakep");
    wakep(false);
  }

  // addtimer: t goes on the current P's heap (the P whose M is most likely
  // to be awake when it fires), or, from a thread that is not one of this
  // runtime's Ms, on a P picked round-robin. Then wake_for_timer.
  void add_timer(timer* t) override {
    m* mm = this_m();
    p* pp = mm ? mm->pp : nullptr;
    if (!pp) pp = allp_[timer_rr_.fetch_add(1, std::memory_order_relaxed) % active_ps()];  // a retired P's timers still run
    const std::int64_t when = t->when;  // t may fire (and be gone) once queued
    pp->timers.add(t);
    GORO_CHAOS_POINT("addtimer.wake");
    wake_for_timer(when);
  }

  std::size_t live_goroutines() const noexcept override {
    std::uint64_t created = offp_spawns_.load(std::memory_order_relaxed), done = 0;
    for_each_p([&](const p* pp) {
      created += pp->spawns.get();
      done += pp->exits.get();
    });
    return created > done ? static_cast<std::size_t>(created - done) : 0;
  }

  unsigned procs() const noexcept override { return active_ps(); }
  unsigned resize_procs(unsigned n) override { return resize(n); }

  netpoller* poller() noexcept override { return &poller_; }  // netpoll

  // goroutine dump (dump.hpp)
  void for_each_g(void (*fn)(g*, void*), void* ctx) override {
    std::lock_guard<std::mutex> lk(gfree_lock_);
    for (auto& block : g_blocks_)
      for (std::uint32_t i = 0; i < gfree_batch; ++i) fn(&block[i], ctx);
  }
  int running_m(const g* gp) const noexcept override {
    int id = -1;
    for_each_p([&](const p* pp) {
      if (pp->sysmon_curg.load(std::memory_order_acquire) == gp)
        if (m_base* mb = pp->sysmon_m.load(std::memory_order_relaxed)) id = static_cast<m*>(mb)->id;
    });
    return id;
  }

  runtime_stats stats() const noexcept {
    runtime_stats s;
    s.spawns = offp_spawns_.load(std::memory_order_relaxed);
    for_each_p([&](const p* pp) {
      s.spawns += pp->spawns.get();
      s.exits += pp->exits.get();
      s.steals += pp->steals.get();
      s.global_polls += pp->global_polls.get();
      s.parks += pp->parks.get();
      s.unparks += pp->unparks.get();
    });
    s.unparks += unparks_.load(std::memory_order_relaxed);
    s.m_parks = m_parks_.load(std::memory_order_relaxed);
    s.m_spins = m_spins_.load(std::memory_order_relaxed);
    s.threads = threads_created_.load(std::memory_order_relaxed);
    sysmon_.fill_stats(s);  // sysmon: preemptions, syscall_handoffs
    return s;
  }

  // ---- gomaxprocs(n) ----

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
  unsigned resize(unsigned n) {
    if (n == 0) return active_ps();
    if (n > max_procs) raise_usage("gomaxprocs(n): n must be at most 4096");
    unsigned old;
    {
      std::lock_guard<std::mutex> rl(resize_lock_);
      auto fresh = make_ps(created_ps(), n);  // may throw bad_alloc: nothing changed yet
      std::lock_guard<std::mutex> lk(lock_);
      create_ps_locked(std::move(fresh));
      old = nprocs_.load(std::memory_order_relaxed);
      if (n == old) return old;
      nprocs_.store(n, std::memory_order_seq_cst);
      if (n > old) {
        activate_locked(old, n);
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
          retire_locked(pp);
        }
      }
    }
    if (n > old) {
      GORO_CHAOS_POINT("gomaxprocs.grow");
      wakep(false);  // work queued anywhere gets the new Ps
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
        timespec ts{0, 20'000};
        nanosleep(&ts, nullptr);
      }
    }
    return old;
  }

  // main_return (main_return.hpp): end the goroutines still alive when
  // main returns, and at shutdown (options::on_main_return == unwind).
  void set_unwind_on_main_return(bool on) noexcept { unwind_on_main_return_ = on; }

  // ---- run(): the calling thread serves as an M while `main` runs ----

  // Runs `body` (which must set up the main goroutine's closure) as the
  // main goroutine; returns when it has finished.
  template <class SetClosure>
  void run_main(SetClosure&& set_main_closure) {
    if (current_m() != nullptr) raise_usage("run() called from inside a goroutine or an M (it would block the M)");
    if (run_active_.exchange(true, std::memory_order_acq_rel)) raise_usage("run() is already active on this runtime");
    struct clear_active {
      std::atomic<bool>& f;
      ~clear_active() { f.store(false, std::memory_order_release); }
    } clear{run_active_};

    g* main_g = gfget_global_or_new();
    GORO_TRY { set_main_closure(main_g); }
    GORO_CATCH_ALL {
      gfput_global(main_g);
      GORO_RETHROW;
    }
    main_g->is_main = true;
    main_g->created_pc = nullptr;  // goroutine dump: main has no creator
    main_done_.store(false, std::memory_order_relaxed);
    deadlock_.store(false, std::memory_order_relaxed);  // checkdead

    auto mm = std::make_unique<m>();
    mm->run_caller = true;
    mm->extm_self = extm_counted_here();  // checkdead
    mm->sched = this;
    mm->rng = fast_rand(reinterpret_cast<std::uintptr_t>(mm.get()) ^ 0x5bd1e995u);
    run_m_.store(mm.get(), std::memory_order_release);
    thread_altstack altstack;
    thread_eh_scope caller_eh;  // the caller's exception state is not main's
    set_current_m(mm.get());
    mm->os_thread = pthread_self();  // async preemption
    mm->async_signal = async_signal;
    mm->keeps_main = async_signal;  // async preemption: see m_base::keeps_main
    mm->g0_tsan_fiber = tsan_current_fiber();

    p* pp;
    {
      std::lock_guard<std::mutex> lk(lock_);
      pp = pidle_get();
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
      std::lock_guard<std::mutex> lk(lock_);  // see main_finished
      run_m_.store(nullptr, std::memory_order_release);
      deadcheck_at_ = 0;  // checkdead
    }
    // checkdead: main is blocked forever; it is left so, and released by
    // the destructor (shutdown) like any goroutine blocked forever.
    const bool deadlocked = deadlock_.load(std::memory_order_acquire) && !main_done_.load(std::memory_order_acquire);
    // main_return: main returned (or threw): the others end before run() returns.
    if (!deadlocked && unwind_on_main_return_) main_return_ops::after_main(*this);
    if (deadlocked)
      raise<deadlock_error>("goro: all goroutines are asleep - deadlock!\n\n" +
                            format_goroutines(collect_goroutines(this)));  // goroutine dump
  }

  // Waits for every goroutine, then stops the Ms. Goroutines that can never
  // run again (all Ps idle, nothing queued) are reported and released.
  void shutdown() noexcept {
    if (shut_down_) return;
    shut_down_ = true;
    if (current_m() != nullptr && current_m()->sched == this)
      fatal("goro: runtime destroyed from inside one of its own goroutines");
    // main_return: goroutines started by go() while no run() was active
    // (or left by one) end as when main returns.
    if (unwind_on_main_return_) main_return_ops::unwind_all(*this);
    for (;;) {
      bool idle;
      {
        std::lock_guard<std::mutex> lk(lock_);
        idle = npidle_.load(std::memory_order_relaxed) == active_ps() && globq_.empty() &&
               nmspinning_.load(std::memory_order_relaxed) == 0;
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
        // Re-check after a moment: a thread outside the runtime may be
        // about to ready one of them.
        shutdown_note_.clear();
        shutdown_waiting_.store(true, std::memory_order_seq_cst);
        shutdown_note_.sleep_for(10'000'000);
        shutdown_waiting_.store(false, std::memory_order_relaxed);
        std::lock_guard<std::mutex> lk(lock_);
        if (npidle_.load(std::memory_order_relaxed) == active_ps() && globq_.empty() && live_goroutines() == live &&
            earliest_timer() == 0 && poller_.waiters() <= 0 /* netpoll */) {
          // goroutine dump: which ones, and where they wait
          const std::string dump = format_goroutines(collect_goroutines(this));
          std::fprintf(stderr, "goro: %zu goroutine%s blocked forever at shutdown\n\n%s", live, live == 1 ? "" : "s",
                       dump.c_str());
          blocked_at_shutdown_ = live;
          break;
        }
        continue;
      }
      // netpoll: goroutines wait on I/O but no M watches the network (the
      // run() caller's M left): start one; it ends up blocked in epoll_wait.
      if (idle && io_wait && timer_m_until_.load(std::memory_order_seq_cst) == 0) wakep(false);
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
    sysmon_.stop();  // sysmon: no goroutine is left to preempt or hand off
    // Stop the Ms: every one is parked (or about to be) in the idle list.
    exiting_.store(true, std::memory_order_seq_cst);
    std::vector<m*> ms;
    {
      std::lock_guard<std::mutex> lk(lock_);
      ms = allm_;
    }
    for (m* mm : ms) mm->park_note.wake();
    poller_.brk();  // netpoll: the M blocked in epoll_wait
    for (m* mm : ms) {
      if (mm->has_thread) pthread_join(mm->thread, nullptr);
      delete mm;
    }
    unlink_blocked();
    // Timers still queued (a ticker nobody stopped, with no goroutine left)
    // are detached: deleting them later finds them on no heap.
    for_each_p([](p* pp) { pp->timers.clear(); });
    // goroutine dump: a dump in progress (the dump thread on SIGQUIT, or
    // goroutine_dump() on another runtime) reads our G records and Ps under
    // the registry's lock; once unregistered, none can reach them.
    unregister_runtime(this);
    release_memory();
  }

  std::size_t blocked_at_shutdown() const noexcept { return blocked_at_shutdown_; }

  // ---- sysmon: goro::blocking (sysmon.hpp) ----
  void enter_syscall(bool long_call) noexcept override {
    m* mm = this_m();
    if (GORO_UNLIKELY(tracing::enabled())) mm->trace_blocking_since = tracing::now();
    sysmon_.enter_syscall(mm, long_call);
  }
  void exit_syscall() noexcept override {
    m* mm = this_m();
    // Recorded before exit_syscall, which may move the goroutine to another M.
    if (GORO_UNLIKELY(mm->trace_blocking_since != 0)) {
      const std::int64_t t0 = std::exchange(mm->trace_blocking_since, 0);
      if (tracing::enabled())
        tracing::record({t0, tracing::now() - t0, mm->curg ? mm->curg->id : 0, trace_rt_, -1, mm->id,
                         tracing::kind::syscall, 0},
                        false);
    }
    sysmon_.exit_syscall(mm);
  }

  // ---- goro::yield (Go's Gosched) ----

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
  void gosched(m_base* mb) noexcept override {
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
      p* pp = mm->pp;
      // execute(next, inherit), as g0 would do it.
      if (!inherit) ++pp->schedtick;
      next->status.store(g_status::running, std::memory_order_relaxed);
      dump_resume_check(next);  // goroutine dump
      pp->sysmon_schedtick.store(pp->schedtick, std::memory_order_relaxed);
      pp->sysmon_m.store(mm, std::memory_order_relaxed);
      pp->sysmon_curg.store(next, std::memory_order_release);
      clear_preempt(next);
      mm->curg = next;
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
  void direct_switch_done(m_base* mb) noexcept override {
    m* mm = static_cast<m*>(mb);
    g* gp = std::exchange(mm->direct_prev, nullptr);
    if (GORO_UNLIKELY(gp->stack_canary && !canary_intact(gp->stack)))
      report_stack_overflow(gp, reinterpret_cast<std::uintptr_t>(gp->stack.lo));
    gp->status.store(g_status::runnable, std::memory_order_relaxed);
    globq_.push_back(gp);
    // Holding no lock from here on: the M may be preempted again.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    mm->after = after_switch::none;
    wakep(false);
  }

  // The G gosched may switch to directly: none (nullptr) when g0 has work
  // to do first — the M or its P is in a special state (goro::blocking,
  // lockosthread, async-pinned Gs, a retired P, leaving), a timer is due
  // (find_runnable runs it first), or the local queue is empty (the global
  // queue's batch get and stealing run on g0, whose stack holds the batch).
  g* yield_fast_next(m* mm, bool& inherit) noexcept {
    p* pp = mm->pp;
    if (!pp || mm->in_blocking || mm->lockedg || mm->async_pinned || should_leave(mm)) return nullptr;
    if (tracing::enabled()) return nullptr;  // the tracer records every run slice in execute()
    if (pp->id >= active_ps() || created_ps() != active_ps()) return nullptr;  // gomaxprocs
    if (std::int64_t when = pp->timers.earliest(); when != 0 && when <= nanotime()) return nullptr;
    if (pp->schedtick % Policy::global_poll_interval == 0) {  // find_runnable's fairness rule
      if (g* gp = globq_.pop_front()) {
        pp->global_polls.inc(1);
        inherit = false;
        return gp;
      }
    }
    auto r = pp->runq.get();
    inherit = r.inherit_time;
    return static_cast<g*>(r.item);
  }

 private:
  m* this_m() const noexcept {
    m_base* b = current_m();
    return (b && b->sched == this) ? static_cast<m*>(b) : nullptr;
  }

  // ---- the scheduling loop (runs on g0) ----

  // `first`: a G to run at once (run()'s main goroutine, see run_main).
  //
  // lockosthread (Go's schedule): an M with a locked G runs nothing else:
  // once that G stops running it hands its P away and sleeps until the G
  // is runnable and some M hands it a P back (stoplockedm). An M that picks
  // a G locked to another M hands its P to that M (startlockedm) and goes
  // back to looking for work without a P.
  void m_loop(m* mm, g* first = nullptr) {
    for (;;) {
      bool inherit = false;
      g* gp;
      if (first) {  // lockosthread
        gp = std::exchange(first, nullptr);
      } else if (mm->lockedg) {  // lockosthread
        if (!stoplockedm(mm)) {
          leave(mm);
          return;
        }
        gp = mm->lockedg;
        if (GORO_UNLIKELY(gp == mm->async_token)) unwire_token(mm, gp);  // async preemption
      } else if (GORO_UNLIKELY(mm->async_pinned != nullptr && mm->pp == nullptr)) {  // async preemption
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
  void requeue_global(g* gp) {
    globq_.push_back(gp);
    GORO_CHAOS_POINT("gosched.wakep");
    wakep(false);
  }

  // ---- lockosthread (Go's startlockedm / stoplockedm / goexit0+mexit) ----

  // startlockedm: mm picked gp, which is wired to another M: hand mm's P
  // to that M, which runs gp. Returns false if gp was unwired meanwhile
  // (its M left: see stoplockedm); mm then runs it itself.
  //
  // Under lock_, so that the locked M cannot leave (and be freed) between
  // our read of gp->lockedm and the hand-off. The locked M may still be on
  // its way to stoplockedm, holding its old P: it gives that one away first
  // and then finds nextp.
  bool startlockedm(m* mm, g* gp) {
    std::lock_guard<std::mutex> lk(lock_);
    m* lm = static_cast<m*>(gp->lockedm.load(std::memory_order_relaxed));
    if (!lm || lm == mm) return false;
    p* pp = mm->pp;
    releasep(mm);
    lm->nextp = pp;
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
  bool stoplockedm(m* mm) {
    if (mm->pp) handoffp_locked_m(mm);
    for (;;) {
      mm->park_note.clear();
      {
        std::lock_guard<std::mutex> lk(lock_);
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
          checkdead(mm);
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
  bool drop_locked_thread(m* mm) {
    mm->exit_thread = false;
    if (mm->run_caller) {
      if (!should_leave(mm)) (void)stoplockedm(mm);  // no lockedg: returns only when mm must leave
      leave(mm);
      return false;
    }
    handoffp_locked_m(mm);
    std::lock_guard<std::mutex> lk(lock_);
    ++nmexited_;  // it stays in allm_ (joined by shutdown)
    checkdead(mm);
    return false;
  }

  // handoffp(releasep()) for an M that will not look for work itself: if
  // the P goes idle with timers, make sure some M watches them (the end of
  // Go's handoffp: wakeNetPoller). Otherwise a locked G's own sleep timer,
  // left on this P, could have no M to fire it.
  void handoffp_locked_m(m* mm) {
    p* pp = mm->pp;
    releasep(mm);
    handoffp(pp, false);
    if (std::int64_t when = pp->timers.earliest(); when != 0) wake_for_timer(when);
  }

  // ---- checkdead ----

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
  // being created is in allm_ (newm adds it before pthread_create) and not
  // idle; a G in goro::blocking keeps its M out of the idle list.
  //
  // The grace period runs from the last M's stop: an armed check gets a new
  // deadline (the run() caller's M, armed, is stopped in its confirming
  // sleep or on its way there, and looks again at the old one).
  void checkdead(m* self) noexcept {
    if (!dead_locked()) return;
    const bool armed = deadcheck_at_ != 0;
    deadcheck_epoch_ = extm_epoch.load(std::memory_order_seq_cst);
    deadcheck_at_ = nanotime() + deadlock_grace_ns;
    if (armed) return;
    m* rm = run_m_.load(std::memory_order_relaxed);
    if (rm != self && take_run_m_locked(rm)) rm->park_note.wake();  // under lock_: rm cannot be freed meanwhile
  }

  // Whether no goroutine can be readied from inside the runtime (lock_ held).
  bool dead_locked() noexcept {
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
  bool take_run_m_locked(m* rm) noexcept {
    if (rm->in_idle_list) {
      m_idle_remove(rm);
      return true;
    }
    if (rm->locked_wait) {
      rm->locked_wait = false;
      --nmlocked_wait_;
      return true;
    }
    return false;
  }

  // start_g's bookkeeping for run()'s main goroutine when this thread has a
  // P: it runs here at once instead of being queued (lockosthread: main
  // starts on the run() caller's thread).
  void start_main_here(p* pp, g* gp) {
    gp->sched = this;
    gp->status.store(g_status::runnable, std::memory_order_relaxed);
    sysmon_.ensure_started();
    if constexpr (!lazy_stacks) attach_stack(pp, gp);
    if (pp->goid_next == pp->goid_end) {
      pp->goid_next = goid_gen_.fetch_add(goid_batch, std::memory_order_relaxed);
      pp->goid_end = pp->goid_next + goid_batch;
    }
    gp->id = pp->goid_next++;
    pp->spawns.inc();
  }

  // async preemption: mm holds goroutines preempted by SIGURG, which only
  // mm may resume (their code may keep this thread's TLS addresses in
  // registers, and their rt_sigreturn restores this thread's sigaltstack).
  // Alternate: one G from the run queues (local, then global) if there is
  // one, then the oldest pinned G. mm keeps its P meanwhile; find_runnable
  // (timers, stealing, idling, leaving) waits until no pinned G is left.
  // When mm loses its P (a goro::blocking call, or a hand-off to a locked
  // M) it waits for one in park_pinned.
  g* next_with_pinned(m* mm) {
    p* pp = mm->pp;
    // checkTimers, as find_runnable does first: while hogs keep being
    // async-preempted this M never gets to find_runnable, and the P's
    // timers (a ticker, a sleeper) would never fire (benchmarks/tail_latency
    // --async 1 hung). What they ready lands in pp's run queue, taken below.
    if (pp && pp->timers.earliest() != 0) pp->timers.run_due(nanotime());
    if (!mm->async_queued_turn && pp) {
      g* gp = static_cast<g*>(pp->runq.get().item);
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
  void park_pinned(m* mm) {
    g* gp = mm->async_pinned;
    mm->async_pinned = gp->link;
    if (!mm->async_pinned) mm->async_pinned_tail = nullptr;
    gp->link = nullptr;
    mm->async_token = gp;
    gp->lockedm.store(mm, std::memory_order_relaxed);  // published by the queue's lock
    mm->lockedg = gp;
    requeue_global(gp);
  }
  // The token came back with a P: an ordinary pinned G again.
  static void unwire_token(m* mm, g* gp) noexcept {
    mm->async_token = nullptr;
    mm->lockedg = nullptr;
    gp->lockedm.store(nullptr, std::memory_order_relaxed);
  }

  // Runs gp on mm until it switches out; then carries out its request.
  g* execute(m* mm, g* gp, bool inherit_time) {
    p* pp = mm->pp;
    if (!inherit_time) {
      ++pp->schedtick;
      pp->slice_over = false;
    }
    if (gp->stack.lo == nullptr) {
      if (lazy_stacks && gp->is_main)
        init_stack(gp, allocate_stack(main_stack_size));
      else
        attach_stack(pp, gp);
    }
    gp->status.store(g_status::running, std::memory_order_relaxed);
    dump_resume_check(gp);  // goroutine dump
    // sysmon: publish the slice and the G; a request made for an earlier
    // slice is void (Go's execute clears gp.preempt), but an expired slice
    // that gp inherits stays expired: gp yields at its first safe point
    // (slice_over, see the park case). pp is null only when gp resumes
    // inside goro::blocking after an on_g0 call (its request is kept for
    // the end of the call).
    if (pp) {
      pp->sysmon_schedtick.store(pp->schedtick, std::memory_order_relaxed);
      pp->sysmon_m.store(mm, std::memory_order_relaxed);  // async preemption (published by the release below)
      pp->sysmon_curg.store(gp, std::memory_order_release);  // sysmon's request_preempt writes *gp
      if (GORO_UNLIKELY(pp->slice_over)) {
        pp->slice_over = false;
        request_preempt(gp);
      } else {
        clear_preempt(gp);
      }
    }
    mm->curg = gp;
    const std::int64_t trace_start = GORO_UNLIKELY(tracing::enabled()) ? tracing::now() : 0;
    const std::int32_t trace_p = pp ? static_cast<std::int32_t>(pp->id) : -1;
    const std::uint64_t trace_flow = GORO_UNLIKELY(trace_start != 0) ? std::exchange(gp->trace_flow, 0) : 0;
    switch_to_g(mm, gp);
    gp = mm->curg;  // gosched: gp may have switched directly to other Gs since
    mm->curg = nullptr;
    if (GORO_UNLIKELY(gp->stack_canary && !canary_intact(gp->stack)))
      report_stack_overflow(gp, reinterpret_cast<std::uintptr_t>(gp->stack.lo));
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
          tracing::record({tracing::now(), 0, id, trace_rt_, static_cast<std::int32_t>(pp->id), mm->id,
                           tracing::kind::block, 0},
                          true);
        break;
      }
      case after_switch::exit:
        if (GORO_UNLIKELY(gp->lockedm.load(std::memory_order_relaxed) == mm)) {  // lockosthread
          gp->lockedm.store(nullptr, std::memory_order_relaxed);
          mm->lockedg = nullptr;
          mm->exit_thread = true;  // m_loop: drop_locked_thread
        }
        gp->lock_count = 0;  // lockosthread: also when unwired by a leaving M (the record is reused)
        goexit0(pp, gp);
        break;
      case after_switch::call:
        mm->after = after_switch::none;
        mm->g0_call(mm->g0_arg);
        keep_request(pp, gp);
        return gp;  // resume it on this M (it never left the running state)
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

  // gp goes on running (execute with inherit_time) with its pending
  // request, if any: execute must not clear it.
  static void keep_request(p* pp, g* gp) noexcept {
    if (pp && gp->preempt.load(std::memory_order_relaxed)) pp->slice_over = true;
  }

  // ---- execution tracer (trace.hpp) ----

  // A run slice of gp that began at t0 on P trace_p has ended (on g0,
  // before mm->after is carried out); a preemption is also an instant event.
  // `flow`: the wake-up or creation arrow that ends at this slice (0: none).
  GORO_NOINLINE void trace_run(m* mm, g* gp, std::int32_t trace_p, std::int64_t t0, std::uint64_t flow) noexcept {
    if (!tracing::enabled()) return;
    const char* why = "other";
    switch (mm->after) {
      case after_switch::yield: why = "yield"; break;
      case after_switch::preempt: why = "preempted"; break;
      case after_switch::park: why = "blocked"; break;
      case after_switch::exit: why = "exit"; break;
      case after_switch::call: why = "runtime call"; break;
      case after_switch::async_preempt: why = "preempted (signal)"; break;
      case after_switch::exitsyscall: why = "blocking call, no P"; break;
      case after_switch::none: break;
    }
    const std::int64_t t1 = tracing::now();
    tracing::record({t0, t1 - t0, gp->id, trace_rt_, trace_p, mm->id, tracing::kind::run, flow & 1, why, flow}, true);
    if (mm->after == after_switch::preempt || mm->after == after_switch::async_preempt)
      tracing::record({t1, 0, gp->id, trace_rt_, trace_p, mm->id, tracing::kind::preempt,
                       mm->after == after_switch::async_preempt ? 1u : 0u},
                      true);
  }

  // ready(gp) by mm (nullptr: a thread outside this runtime). Formatting
  // waits when called on a goroutine's stack (see tracing::record).
  // A flow arrow goes from here to gp's next run slice (gp->trace_flow,
  // read by the M that runs it: the run queue orders the two).
  GORO_NOINLINE void trace_wake(m* mm, g* gp) noexcept {
    const std::int32_t p_id = mm && mm->pp ? static_cast<std::int32_t>(mm->pp->id) : -1;
    gp->trace_flow = tracing::new_flow(false);
    tracing::record({tracing::now(), 0, gp->id, trace_rt_, p_id, mm ? mm->id : -1, tracing::kind::wake, 0, "",
                     gp->trace_flow},
                    current_g() == nullptr);
  }

  // newproc of gp (its id set, not queued yet) by mm's goroutine, or by a
  // thread outside the runtime (mm nullptr): a "go" marker and an arrow to
  // gp's first run slice.
  GORO_NOINLINE void trace_create(m* mm, g* gp) noexcept {
    const std::int32_t p_id = mm && mm->pp ? static_cast<std::int32_t>(mm->pp->id) : -1;
    const std::uint64_t parent = mm && mm->curg ? mm->curg->id : 0;
    gp->trace_flow = tracing::new_flow(true);
    tracing::record({tracing::now(), 0, gp->id, trace_rt_, p_id, mm ? mm->id : -1, tracing::kind::create, parent, "",
                     gp->trace_flow},
                    current_g() == nullptr);
  }

  // findRunnable: blocks until it finds a G for mm (with mm->pp set), or
  // returns nullptr when mm must leave (run() finished / shutdown).
  g* find_runnable(m* mm, bool& inherit) {
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
      // Fairness: every global_poll_interval ticks look at the global
      // queue first, so local ping-pong cannot starve it.
      if (pp->schedtick % Policy::global_poll_interval == 0) {
        if (g* gp = glob_get(pp, 1)) {
          inherit = false;
          return gp;
        }
      }
      GORO_CHAOS_POINT("findrunnable.local");
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
      if (mm->spinning || 2 * nmspinning_.load(std::memory_order_relaxed) < busy_ps()) {
        if (!mm->spinning) {
          mm->spinning = true;
          nmspinning_.fetch_add(1, std::memory_order_seq_cst);
          m_spins_.fetch_add(1, std::memory_order_relaxed);
        }
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
        std::lock_guard<std::mutex> lk(lock_);
        releasep(mm);
        pidle_put(pp);
        if (!globq_.empty_synced()) {
          // pp is still the head of the idle list (lock_ held) — unless a
          // gomaxprocs shrink retired it: then take any idle P, and if
          // there is none, the busy Ps will find the G.
          if (p* again = pidle_get()) {
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
        mm->spinning = false;
        nmspinning_.fetch_sub(1, std::memory_order_seq_cst);
        GORO_CHAOS_POINT("findrunnable.dropped");
      }
      if (work_after_going_idle()) {
        p* again;
        {
          std::lock_guard<std::mutex> lk(lock_);
          again = pidle_get();
        }
        if (again) {
          acquirep(mm, again);
          mm->spinning = true;
          nmspinning_.fetch_add(1, std::memory_order_seq_cst);
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

  // Runs the due timers of every P but pp. Returns true if it ran any.
  // Reads the clock only if some P has a timer at all.
  bool run_other_timers(p* pp) noexcept {
    return run_timers_of(0, created_ps(), pp);
  }

  // gomaxprocs: the due timers of retired Ps (they are not moved: a timer
  // stays on the heap it was added to, see timer_heap.hpp).
  bool run_retired_timers() noexcept { return run_timers_of(active_ps(), created_ps(), nullptr); }

  bool run_timers_of(unsigned from, unsigned to, p* skip) noexcept {
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
  std::int64_t earliest_timer() const noexcept {
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
  // Why no timer is missed: a timer is published (its heap's earliest(),
  // seq_cst) before its adder reads timer_m_until_ (seq_cst) in
  // wake_for_timer; an M about to sleep publishes timer_m_until_ (seq_cst)
  // before it reads every heap's earliest() again. So either the adder sees
  // the sleeper's deadline and wakes it if the new timer is earlier, or the
  // sleeper sees the new timer and does not sleep past it. With no timer M
  // at all the adder calls wakep, which pairs with the delicate dance
  // (nmspinning) and npidle the same way.
  bool park_idle(m* mm) {
    std::int64_t next = earliest_timer();
    if (next != 0 && next <= nanotime()) {
      // A timer is due: take a P and run it.
      p* pp;
      {
        std::lock_guard<std::mutex> lk(lock_);
        pp = pidle_get();
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
  void wake_for_timer(std::int64_t when) {
    GORO_CHAOS_POINT("wake_for_timer");
    std::int64_t until = timer_m_until_.load(std::memory_order_seq_cst);
    if (until == 0) {
      wakep(false);
      return;
    }
    if (when >= until) return;
    m* sleeper = nullptr;
    {
      std::lock_guard<std::mutex> lk(lock_);
      if (timer_m_ && when < timer_m_until_.load(std::memory_order_relaxed)) {
        sleeper = timer_m_;
        m_idle_remove(sleeper);  // also clears timer_m_: we own its wake-up now
      }
    }
    if (sleeper) {
      GORO_CHAOS_POINT("wake_for_timer.wake");
      sleeper->park_note.wake();
      poller_.brk();  // netpoll: the timer M sleeps in epoll_wait
    }
  }

  // stealWork: four passes over all Ps in a random coprime order; runnext
  // is only stolen on the last pass.
  g* steal_work(m* mm, p* pp) {
    constexpr int steal_tries = 4;
    // Over every P record (gomaxprocs: a retired P may still hold work;
    // idle ones are skipped).
    const coprime_order* order = steal_order_.load(std::memory_order_acquire);
    for (int i = 0; i < steal_tries; ++i) {
      bool last = i == steal_tries - 1;
      for (auto e = order->start(mm->rng.next()); !e.done(); e.next()) {
        p* victim = allp_[e.position()];
        GORO_CHAOS_POINT("stealwork.victim");
        if (victim == pp || victim->status.load(std::memory_order_relaxed) == p_status::idle) continue;
        g* gp = pp->runq.steal_from(victim->runq, last, [victim] {
          if (victim->status.load(std::memory_order_relaxed) == p_status::running) {
            timespec ts{0, runnext_steal_grace_us * 1000};
            nanosleep(&ts, nullptr);
          }
        });
        if (gp) {
          pp->steals.inc();
          if (GORO_UNLIKELY(tracing::enabled()))
            tracing::record({tracing::now(), 0, gp->id, trace_rt_, static_cast<std::int32_t>(pp->id), mm->id,
                             tracing::kind::steal, victim->id},
                            true);
          return gp;
        }
      }
    }
    return nullptr;
  }

  // A spinning M found work: stop spinning, and if it was the last spinner
  // wake another M, so the next burst of work finds a spinner (spinners
  // chain one at a time instead of stampeding).
  void reset_spinning(m* mm) {
    mm->spinning = false;
    nmspinning_.fetch_sub(1, std::memory_order_seq_cst);
    GORO_CHAOS_POINT("reset_spinning.wakep");
    wakep(false);
  }

  // wakep: if a P is idle and nobody spins, start an M spinning on it.
  //
  // The submit-side barrier. Every path that makes a G runnable publishes
  // it first — runq.put's release store of runnext or tail (spawn, ready,
  // netpoll inject), a global-queue push (plain threads, overflow, netpoll,
  // yield) — and then calls wakep, which reads npidle_ and nmspinning_.
  // Its pair is every M that gives up a P (find_runnable, handoffp): it
  // publishes the P idle (npidle_) and drops its spinning role
  // (nmspinning_), then work_after_going_idle fences and reads every run
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
  // Returns 0, or startm's errno when no M could be started (start_g
  // decides whether that fails the spawn). The bool is unused (callers
  // still pass the old may_throw flag).
  int wakep(bool = false) {
    GORO_CHAOS_POINT("wakep");
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (GORO_CHAOS_FAULT("drop_wakep")) return 0;  // the chaos self-test's lost wake-up
    if (npidle_.load(std::memory_order_seq_cst) == 0) return 0;
    std::uint32_t zero = 0;
    if (nmspinning_.load(std::memory_order_relaxed) != 0 ||
        !nmspinning_.compare_exchange_strong(zero, 1, std::memory_order_seq_cst))
      return 0;
    GORO_CHAOS_POINT("wakep.claimed");
    p* pp;
    {
      std::lock_guard<std::mutex> lk(lock_);
      pp = pidle_get();
    }
    if (!pp) {
      nmspinning_.fetch_sub(1, std::memory_order_seq_cst);
      return 0;
    }
    m_spins_.fetch_add(1, std::memory_order_relaxed);
    GORO_CHAOS_POINT("wakep.startm");
    return startm(pp, true);
  }

  // sysmon: some startm found no idle M and could not create one (a
  // transient EAGAIN: RLIMIT_NPROC, a pids cgroup). Work may be queued
  // with no M to run it: look again, as wakep (Go's newm throws instead).
  void retry_start_m() noexcept {
    if (m_start_failed_.exchange(false, std::memory_order_seq_cst)) (void)wakep();  // fails: sets it again
  }

  // startm: runs pp on an idle M (or a new one). Returns 0 or an errno,
  // in which case pp is back on the idle list.
  int startm(p* pp, bool spinning) {
    m* mm;
    m* timer_m;  // netpoll
    {
      std::lock_guard<std::mutex> lk(lock_);
      timer_m = timer_m_;  // netpoll
      mm = m_idle_get();
    }
    if (mm) {
      GORO_CHAOS_POINT("startm.wake");
      mm->spinning = spinning;
      mm->nextp = pp;
      mm->park_note.wake();
      if (mm == timer_m) poller_.brk();  // netpoll: the timer M sleeps in epoll_wait
      return 0;
    }
    // Thread creation is deep (pthread_create): run it on g0, not on a
    // possibly tiny goroutine stack.
    struct newm_call {
      scheduler* self;
      p* pp;
      bool spinning;
      int err;
    } call{this, pp, spinning, 0};
    on_g0([](void* a) {
      auto* c = static_cast<newm_call*>(a);
      c->err = c->self->newm(c->pp, c->spinning);
    }, &call);
    int err = call.err;
    if (err != 0) {
      {
        std::lock_guard<std::mutex> lk(lock_);
        pidle_put(pp);
      }
      if (spinning) nmspinning_.fetch_sub(1, std::memory_order_seq_cst);
      // Retried by sysmon, which does not sleep deeply while this is set.
      // Dekker with sysmon's deep_sleep: it publishes sleeping_, then reads
      // m_start_failed_; we publish m_start_failed_, then read sleeping_.
      m_start_failed_.store(true, std::memory_order_seq_cst);
      sysmon_.on_p_busy();
    }
    return err;
  }

  int newm(p* pp, bool spinning) {
    m* mm = new (std::nothrow) m();
    if (!mm) return ENOMEM;
    mm->sched = this;
    mm->spinning = spinning;
    mm->nextp = pp;
    mm->rng = fast_rand(reinterpret_cast<std::uintptr_t>(mm) * 0x9e3779b97f4a7c15ull + 1);
    {
      std::lock_guard<std::mutex> lk(lock_);
      allm_.push_back(mm);  // checkdead: counted before it can go idle
      mm->id = static_cast<std::int32_t>(allm_.size());
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    threads_alive_.fetch_add(1);
    int err = create_os_thread(
        &mm->thread, &attr,
        [](void* arg) -> void* {
          auto* self = static_cast<m*>(arg);
          static_cast<scheduler*>(self->sched)->m_thread_main(self);
          return nullptr;
        },
        mm);
    pthread_attr_destroy(&attr);
    if (err != 0) {
      threads_alive_.fetch_sub(1);
      {
        std::lock_guard<std::mutex> lk(lock_);
        allm_.erase(std::find(allm_.begin(), allm_.end(), mm));  // checkdead
      }
      delete mm;
      return err;
    }
    threads_created_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lk(lock_);
    mm->has_thread = true;
    return 0;
  }

  void m_thread_main(m* mm) {
    thread_altstack altstack;
    set_current_m(mm);
    mm->os_thread = pthread_self();  // async preemption
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

  enum class wake_reason { got_p, again, leave };

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
  wake_reason stopm(m* mm, std::int64_t until = 0) {
    // netpoll: goroutines wait on I/O: become the M blocked in epoll_wait
    // (no timeout unless a timer is pending).
    if (until == 0 && poller_.waiters() > 0) until = INT64_MAX;
    bool timed = false;
    GORO_CHAOS_POINT("stopm.publish");
    {
      std::lock_guard<std::mutex> lk(lock_);
      if (should_leave(mm)) return wake_reason::leave;
      mm->park_note.clear();
      m_idle_put(mm);
      if (until != 0 && (timer_m_ == nullptr || until < timer_m_until_.load(std::memory_order_relaxed))) {
        timer_m_ = mm;
        timer_m_until_.store(until, std::memory_order_seq_cst);
        timed = true;
      }
      checkdead(mm);
    }
    m_parks_.fetch_add(1, std::memory_order_relaxed);
    GORO_CHAOS_POINT("stopm.published");
    if (shutdown_waiting_.load(std::memory_order_seq_cst)) shutdown_note_.wake();
    bool woken = true;
    if (timed) {
      // The second half of the handshake with wake_for_timer: a timer
      // published before our deadline was would not wake us.
      std::int64_t next = earliest_timer();
      std::int64_t now = nanotime();
      if (next != 0 && next < until)
        woken = false;  // look again at once
      else
        woken = netpoll_ops::sleep(*this, mm, until, now);  // netpoll: epoll_wait, or the note
      if (!woken) {
        std::lock_guard<std::mutex> lk(lock_);
        if (mm->in_idle_list) {
          m_idle_remove(mm);
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

  bool should_leave(m* mm) const noexcept {
    return exiting_.load(std::memory_order_acquire) ||
           (mm->run_caller && (main_done_.load(std::memory_order_acquire) ||
                               deadlock_.load(std::memory_order_acquire)));  // checkdead
  }

  // mm leaves the scheduler: hand its P (and its spinning role) on.
  void leave(m* mm) {
    p* pp = mm->pp;
    if (!pp) pp = std::exchange(mm->nextp, nullptr);
    else releasep(mm);
    bool spinning = std::exchange(mm->spinning, false);
    if (pp) {
      handoffp(pp, spinning);
    } else if (spinning) {
      nmspinning_.fetch_sub(1, std::memory_order_seq_cst);
    }
  }

  // handoffp (Go's handoffp): a P whose M leaves — for a locked thread, at
  // exit, or stuck in a blocking call (sysmon's retake) — goes to another
  // M if there is work for it; else, if no M spins and no P idles, to a
  // spinning M (the busy Ps may have work to steal, and nobody else would
  // look for it until the next wakep); else to the idle list.
  void handoffp(p* pp, bool spinning) {
    GORO_CHAOS_POINT("handoffp");
    if (exiting_.load(std::memory_order_acquire)) {
      if (spinning) nmspinning_.fetch_sub(1, std::memory_order_seq_cst);
      std::lock_guard<std::mutex> lk(lock_);
      pidle_put(pp);
      return;
    }
    if (spinning || !pp->runq.empty() || !globq_.empty()) {
      (void)startm(pp, spinning);  // on failure pp is back on the idle list
      return;
    }
    std::uint32_t zero = 0;
    if (nmspinning_.load(std::memory_order_seq_cst) + npidle_.load(std::memory_order_seq_cst) == 0 &&
        nmspinning_.compare_exchange_strong(zero, 1, std::memory_order_seq_cst)) {
      m_spins_.fetch_add(1, std::memory_order_relaxed);
      (void)startm(pp, true);
      return;
    }
    {
      std::lock_guard<std::mutex> lk(lock_);
      pidle_put(pp);
    }
    // The checks above can miss work published by a submitter that then
    // saw this P busy in its wakep: look again now that it is idle.
    GORO_CHAOS_POINT("handoffp.recheck");
    if (work_after_going_idle()) wakep(false);
  }

  // The idle side of wakep's Dekker pair (the pair is written down at
  // wakep). Called after a P was published idle (pidle_put's npidle_
  // increment) and, for a spinning M, after nmspinning_ was decremented:
  // fences, then reads every run queue and the global queue. Either this
  // sees the submitter's G, or the submitter's wakep (publish, fence, read
  // npidle_ and nmspinning_) sees the idle P and no spinner. The global
  // queue is read under its lock as well, which also orders this against
  // a pusher that holds the lock without relying on its fence.
  bool work_after_going_idle() noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    GORO_CHAOS_POINT("findrunnable.recheck");
    for (unsigned i = 0, n = created_ps(); i < n; ++i)  // gomaxprocs: a retired P may still hold work
      if (!allp_[i]->runq.empty()) return true;
    return !globq_.empty_synced();
  }

  void acquirep(m* mm, p* pp) noexcept {
    mm->pp = pp;
    pp->owner = mm;
    pp->status.store(p_status::running, std::memory_order_relaxed);
  }
  void releasep(m* mm) noexcept {
    mm->pp->owner = nullptr;
    mm->pp = nullptr;
  }

  // ---- gomaxprocs: P records ----

  unsigned active_ps() const noexcept { return nprocs_.load(std::memory_order_acquire); }
  unsigned created_ps() const noexcept { return nallp_.load(std::memory_order_acquire); }
  // Active Ps not on the idle list (0 while a shrink is half seen).
  unsigned busy_ps() const noexcept {
    unsigned a = active_ps(), idle = npidle_.load(std::memory_order_relaxed);
    return a > idle ? a - idle : 0;
  }
  // Every P record, active or retired.
  template <class F>
  void for_each_p(F&& f) const {
    for (unsigned i = 0, n = created_ps(); i < n; ++i) f(allp_[i]);
  }

  // New P records with ids [from, to) (none if to <= from).
  static std::vector<std::unique_ptr<p>> make_ps(unsigned from, unsigned to) {
    std::vector<std::unique_ptr<p>> ps;
    for (unsigned i = from; i < to; ++i) {
      ps.push_back(std::make_unique<p>());
      ps.back()->id = i;
    }
    return ps;
  }

  // Publishes new P records (lock_ held): their slots, then nallp_, then a
  // steal order covering them.
  void create_ps_locked(std::vector<std::unique_ptr<p>> ps) {
    if (ps.empty()) return;
    unsigned to = ps.back()->id + 1;
    auto order = std::make_unique<coprime_order>(to);
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
  void activate_locked(unsigned from, unsigned to) noexcept {
    for (unsigned i = to; i-- > from;) {  // P `from` on top of the idle list
      p* pp = allp_[i];
      if (!pp->retired) continue;
      pp->retired = false;
      pidle_put(pp);
    }
  }

  // A retired P (id >= nprocs_) loses its owner (lock_ held): its queued
  // goroutines go to the global queue (the caller wakes an M for them) and
  // its free G records to the global list; it then sits on no list until a
  // growth reactivates it (Go's p.destroy, minus freeing the record).
  void retire_locked(p* pp) noexcept {
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
  void drop_retired_p(m* mm) {
    p* pp = mm->pp;
    const bool had_work = !pp->runq.empty();
    const bool spinning = std::exchange(mm->spinning, false);
    {
      std::lock_guard<std::mutex> lk(lock_);
      releasep(mm);
      pidle_put(pp);  // retires it (or lists it: gomaxprocs grew meanwhile)
    }
    if (spinning) nmspinning_.fetch_sub(1, std::memory_order_seq_cst);
    GORO_CHAOS_POINT("drop_retired_p.wakep");
    if (had_work || spinning) wakep(false);
  }

  // resize's wait: true once no P of [n, nallp_) is held any more. Asks the
  // goroutine running on each held one to yield, and takes one in a
  // blocking call from it (retake), so it is retired now.
  bool retired_ps_released(unsigned n) {
    bool released = true;
    for (unsigned i = n, c = created_ps(); i < c; ++i) {
      p* pp = allp_[i];
      {
        std::lock_guard<std::mutex> lk(lock_);
        if (pp->retired || pp->id < nprocs_.load(std::memory_order_relaxed)) continue;  // done, or active again
      }
      released = false;
      auto st = pp->status.load(std::memory_order_acquire);
      if (st == p_status::syscall &&
          pp->status.compare_exchange_strong(st, p_status::running, std::memory_order_acq_rel)) {
        handoffp(pp, false);
      } else if (st != p_status::idle) {
        sysmon_.preemptone(pp);  // also a G back from its call on the fast path
      }
    }
    return released;
  }

  // ---- idle lists (scheduler lock held) ----

  void pidle_put(p* pp) noexcept {
    if (GORO_UNLIKELY(pp->id >= nprocs_.load(std::memory_order_relaxed))) {  // gomaxprocs: retired
      retire_locked(pp);
      return;
    }
    pp->status.store(p_status::idle, std::memory_order_relaxed);
    pp->link = pidle_;
    pidle_ = pp;
    npidle_.fetch_add(1, std::memory_order_seq_cst);
    if (shutdown_waiting_.load(std::memory_order_relaxed)) shutdown_note_.wake();
  }
  p* pidle_get() noexcept {
    p* pp = pidle_;
    if (!pp) return nullptr;
    pidle_ = pp->link;
    pp->link = nullptr;
    pp->status.store(p_status::running, std::memory_order_relaxed);
    npidle_.fetch_sub(1, std::memory_order_seq_cst);
    sysmon_.on_p_busy();  // sysmon: leave its deep sleep
    return pp;
  }
  void m_idle_put(m* mm) noexcept {
    mm->link = midle_;
    midle_ = mm;
    mm->in_idle_list = true;
    ++nmidle_;  // checkdead
  }
  // Prefers an M other than the timer M: the timer M keeps watching the
  // timers (Go's startm never takes the M blocked in netpoll). Taken when
  // it is the only idle M, its role ends; it comes back through park_idle
  // when it runs out of work, and so does every other M (none is parked).
  m* m_idle_get() noexcept {
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
    if (mm == timer_m_) clear_timer_m();
    return mm;
  }
  // The timer M is always on the idle list: whoever takes it off ends its
  // role (the M will come back through park_idle and look at the timers).
  void clear_timer_m() noexcept {
    timer_m_ = nullptr;
    timer_m_until_.store(0, std::memory_order_seq_cst);
  }
  void m_idle_remove(m* target) noexcept {
    for (m** pm = &midle_; *pm; pm = &(*pm)->link) {
      if (*pm == target) {
        *pm = target->link;
        target->link = nullptr;
        target->in_idle_list = false;
        --nmidle_;  // checkdead
        if (target == timer_m_) clear_timer_m();
        return;
      }
    }
  }

  // ---- global run queue (its own lock: global_queue.hpp) ----

  void glob_put_batch(g** batch, std::uint32_t n) { globq_.push_back_batch(batch, n); }

  // globrunqget: takes a fair share — size/nprocs + 1, at most `max` (when
  // > 0) and at most half a local queue — returns one and queues the rest
  // on pp. Runs on g0 (the batch is on its stack).
  g* glob_get(p* pp, std::uint32_t max) {
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

  // ---- G records, stacks, ids ----

  // gfget / gfput (Go's gfget / gfput): a P keeps up to p_gfree_max free
  // G records; it refills gfree_batch at a time from the global list and
  // gives half back when full.
  g* gfget(p* pp) {
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

  void gfput(p* pp, g* gp) noexcept {
    gp->status.store(g_status::idle, std::memory_order_relaxed);
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

  g* gfget_global_or_new() {
    std::lock_guard<std::mutex> lk(gfree_lock_);
    if (gfree_.empty()) new_g_block_locked();
    g* gp = gfree_.back();
    gfree_.pop_back();
    return gp;
  }

  void gfput_global(g* gp) noexcept {
    gp->status.store(g_status::idle, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lk(gfree_lock_);
    gfree_.push_back(gp);  // capacity reserved: no allocation
  }

  // Allocates gfree_batch G records in one block onto the global free list
  // (gfree_lock_ held). The list and the global run queue get room for
  // every record first, so their pushes never allocate. May raise
  // bad_alloc; nothing changes then.
  void new_g_block_locked() {
    const std::size_t total = (g_blocks_.size() + 1) * gfree_batch;
    globq_.reserve(total);
    gfree_.reserve(total);
    g_blocks_.reserve(g_blocks_.size() + 1);
    auto block = std::unique_ptr<g[]>(new (std::nothrow) g[gfree_batch]);
    if (!block) raise_bad_alloc();
    debug_add_block(block.get(), gfree_batch, this);  // debugger: tools/goro-gdb.py (may throw: nothing added)
    for (std::uint32_t i = gfree_batch; i-- > 0;) {
      block[i].sched = this;
      gfree_.push_back(&block[i]);
    }
    g_blocks_.push_back(std::move(block));
  }

  // Gives gp a stack from pp's cache (refilled from the allocator in a
  // batch: the most recently freed stacks are cache-hot).
  void attach_stack(p* pp, g* gp) {
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
  void attach_stack_global(g* gp) { init_stack(gp, allocate_stack(stack_bytes)); }

  void init_stack(g* gp, cached_stack c) noexcept {
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
  static std::size_t stack_color(const stack_memory& s) noexcept {
    const std::size_t lines = std::min<std::size_t>(s.size / 16, 2048) / 64;
    if (lines <= 1) return 0;
    const std::uint64_t k = reinterpret_cast<std::uintptr_t>(s.lo) >> 12;
    return static_cast<std::size_t>((k * 0x9e3779b97f4a7c15ull) >> 58) % lines * 64;
  }

  void release_stack(p* pp, g* gp) noexcept {
    stack_memory s = gp->stack;
    gp->stack = {};
    gp->sp = nullptr;
    if (s.size != stack_bytes) {  // the main goroutine's larger stack
      asan_unpoison(s.lo, s.size);
      alloc_.deallocate(s);
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
  void goexit0(p* pp, g* gp) noexcept {
    bool was_main = gp->is_main;
    gp->status.store(g_status::dead, std::memory_order_relaxed);
    gp->is_main = false;
    clear_preempt(gp);
    release_stack(pp, gp);
    gp->eh_caught = nullptr;  // the record's next goroutine starts with no exception state
    gp->eh_uncaught = 0;
    gp->exiting.store(exit_state::none, std::memory_order_relaxed);  // main_return
    gp->no_kill = false;
    pp->exits.inc();  // before main_finished: live_goroutines() is exact when run() returns
    gfput(pp, gp);
    if (was_main) main_finished();
  }

  // The main goroutine finished: the run() caller's M must leave at its
  // next scheduling point; wake it if it is parked.
  //
  // The run() caller may see main_done_ and return (destroying its M) at any
  // moment after the store, so run_m_ is read under lock_, which run_main
  // holds to clear it before the M is destroyed; an M found in the idle list
  // is parked and cannot go away until the wake-up below.
  void main_finished() noexcept {
    // main_return: the other goroutines start ending now (the ender thread
    // is published to run_main by the store below).
    if (unwind_on_main_return_) main_return_ops::main_finished(*this);
    main_done_.store(true, std::memory_order_seq_cst);
    m* rm = nullptr;
    bool was_timer_m = false;
    {
      std::lock_guard<std::mutex> lk(lock_);
      m* r = run_m_.load(std::memory_order_relaxed);
      if (r && r != this_m() && r->in_idle_list) {
        was_timer_m = r == timer_m_;
        m_idle_remove(r);
        rm = r;
      } else if (r && r != this_m() && take_run_m_locked(r)) {  // lockosthread: in stoplockedm
        rm = r;
      }
    }
    if (rm) {
      rm->park_note.wake();
      if (was_timer_m) poller_.brk();  // netpoll: the timer M sleeps in epoll_wait
    }
    // It was watching the timers: have an M on an idle P take over (it
    // finds nothing to run and becomes the timer M).
    if (was_timer_m) wakep(false);
  }

  // Entry of every goroutine (first frame on its stack).
  // `arg` is what the switch passed (see goroutine_resumed).
  static void goroutine_main(void* arg) {
    g* gp = (arg ? static_cast<m_base*>(arg) : current_m())->curg;
    goroutine_resumed(gp, arg);
    // main_return: a goroutine that starts once its runtime ends its
    // goroutines is discarded (its functor destroyed here, unrun).
    const bool discard = GORO_UNLIKELY(gp->sched->ending_goroutines.load(std::memory_order_relaxed)) && !gp->is_main;
    if (discard) gp->exiting.store(exit_state::unwinding, std::memory_order_relaxed);
    run_goroutine(gp, !discard);
    m_base* mm = current_m();
    mm->after = after_switch::exit;
    switch_to_g0(mm, gp);
    fatal("goro: internal error: a finished goroutine was resumed");
  }

  // Runs gp's closure. An exception escaping a goroutine other than main
  // (main's closure catches its own, for run() to rethrow) is fatal.
  static void run_goroutine(g* gp, bool run = true) noexcept {
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

  [[noreturn]] static void uncaught_exception(g* gp, const char* what) noexcept {
    std::fprintf(stderr, "goro: goroutine %llu: uncaught exception: %s\n", static_cast<unsigned long long>(gp->id),
                 what);
    std::fflush(stderr);
    std::abort();
  }

  // Goroutines blocked forever are released unrun, but the channels and
  // sync objects they wait on may outlive the runtime: take their waiter
  // records (on the goroutines' stacks) off those queues first, so that a
  // later operation finds no record of a freed goroutine. Every M has
  // stopped: nothing else touches these Gs.
  void unlink_blocked() noexcept {
    for (auto& block : g_blocks_) {
      for (std::uint32_t i = 0; i < gfree_batch; ++i) {
        g* gp = &block[i];
        if (gp->status.load(std::memory_order_relaxed) != g_status::waiting || !gp->unlink_wait) continue;
        (void)gp->unlink_wait(gp->unlink_arg);
        gp->unlink_wait = nullptr;
      }
    }
  }

  void release_memory() noexcept {
    for_each_p([this](p* pp) {
      while (pp->nstack) {
        stack_memory s = pp->stack_cache[--pp->nstack].mem;
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
      }
    }
    // Unregistered (shutdown): no dump walks the records any more; the
    // lock orders this with a for_each_g that started before.
    debug_remove_blocks(this);  // debugger: before the records go
    decltype(g_blocks_) blocks;
    {
      std::lock_guard<std::mutex> lk(gfree_lock_);
      blocks.swap(g_blocks_);
    }
  }

  // ---- state ----
  // gomaxprocs: Ps [0, nprocs_) are active. Records [nprocs_, nallp_) are
  // retired by a shrink (kept, for their counters, timers and a later
  // growth). allp_ has max_procs slots; a slot is written once, under
  // lock_, before nallp_ (release) covers it, so readers index it without
  // the lock. nprocs_ changes only under lock_ (with the idle list).
  std::atomic<unsigned> nprocs_;
  std::atomic<unsigned> nallp_{0};
  std::unique_ptr<p*[]> allp_;
  std::vector<std::unique_ptr<p>> p_records_;  // owns allp_'s records (lock_)
  // Steal order over [0, nallp_); replaced when nallp_ grows. Old orders are
  // kept (a stealer may still hold one) until the runtime ends.
  std::atomic<const coprime_order*> steal_order_{nullptr};
  std::vector<std::unique_ptr<coprime_order>> steal_orders_;  // lock_

  std::mutex resize_lock_;  // gomaxprocs: one resize at a time (taken before lock_)
  std::mutex lock_;  // sched.lock: idle P and M lists, allm (not the global queue: it has its own)
  global_run_queue globq_;
  p* pidle_ = nullptr;
  alignas(cache_line) std::atomic<std::uint32_t> npidle_{0};
  alignas(cache_line) std::atomic<std::uint32_t> nmspinning_{0};
  m* midle_ = nullptr;
  m* timer_m_ = nullptr;  // the idle M sleeping until the next timer (see park_idle)
  std::atomic<std::int64_t> timer_m_until_{0};  // its deadline; 0: no timer M. Written under lock_
  std::atomic<std::uint32_t> timer_rr_{0};      // P choice for timers added from outside
  std::vector<m*> allm_;
  const std::uint32_t trace_rt_ = tracing::next_runtime_number.fetch_add(1, std::memory_order_relaxed);  // tracer
  std::atomic<int> threads_alive_{0};
  std::atomic<bool> m_start_failed_{false};  // startm could not create a thread: sysmon retries (retry_start_m)

  std::mutex gfree_lock_;  // global free G list and G blocks
  std::vector<g*> gfree_;  // free G records, most recently freed last
  std::vector<std::unique_ptr<g[]>> g_blocks_;

  alignas(cache_line) std::atomic<std::uint64_t> goid_gen_{1};
  std::atomic<std::uint64_t> offp_spawns_{0};
  std::atomic<std::uint64_t> unparks_{0}, m_parks_{0}, m_spins_{0}, threads_created_{0};

  allocator alloc_;

  std::atomic<bool> run_active_{false};
  std::atomic<bool> main_done_{false};
  std::atomic<m*> run_m_{nullptr};
  std::atomic<bool> exiting_{false};
  bool shut_down_ = false;
  std::size_t blocked_at_shutdown_ = 0;
  note shutdown_note_;
  std::atomic<bool> shutdown_waiting_{false};

  // checkdead / lockosthread (counts under lock_)
  const bool detect_deadlock_;
  std::size_t nmidle_ = 0;         // Ms on the idle list
  std::size_t nmlocked_wait_ = 0;  // Ms asleep in stoplockedm (Go's nmidlelocked)
  std::size_t nmexited_ = 0;       // Ms whose thread exited with a locked G (still in allm_)
  std::atomic<bool> deadlock_{false};
  std::int64_t deadcheck_at_ = 0;      // armed: nanotime() at which to confirm (deadcheck.hpp)
  std::uint64_t deadcheck_epoch_ = 0;  // extm_epoch when the grace period began

  // sysmon (sysmon.hpp): its thread, preemption and blocking-call hand-offs.
  friend class sysmon<Policy, scheduler>;
  sysmon<Policy, scheduler> sysmon_{*this};

  netpoller poller_{&netpoll_sched<scheduler>::on_init, this};  // netpoll: destroyed after shutdown() joined every M
  using netpoll_ops = netpoll_sched<scheduler>;  // netpoll: the scheduler hooks (netpoll.hpp)
  friend netpoll_ops;
  using deadcheck_ops = deadcheck_sched<scheduler>;  // checkdead: the confirmation (deadcheck.hpp)
  friend deadcheck_ops;
  using main_return_ops = main_return_sched<scheduler>;  // main_return (main_return.hpp)
  friend main_return_ops;
  bool unwind_on_main_return_ = true;
  pthread_t ender_{};           // main_return: the thread ending the goroutines after main returned
  bool ender_started_ = false;  // written before main_done_, read by run_main after it
  // chaos builds (stall_monitor.hpp): reads the state above; declared last, so stopped first.
  friend class stall_monitor<scheduler>;
  [[no_unique_address]] stall_monitor<scheduler> stall_monitor_{*this};
};

}  // namespace detail
}  // namespace goro
