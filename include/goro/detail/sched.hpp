// The scheduler: Ps, Ms and the global state for one runtime, with Go's
// algorithms (src/runtime/proc.go): schedule / findRunnable / execute,
// runqput into runnext with time-slice inheritance, the fair global batch
// get, stealing over a random coprime order, spinning Ms bounded by
// nmspinning, wakep / startm / stopm / handoffp, and the "delicate dance"
// before an M parks. Everything policy-dependent is a template parameter.
#pragma once

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
#include <utility>
#include <vector>

#include "../runtime.hpp"  // options, basic_runtime (this header is its implementation)
#include "dump_impl.hpp"  // goroutine dump
#include "runtime_stats.hpp"
#include "../error.hpp"
#include "../policy.hpp"
#include "../stack.hpp"
#include "cet.hpp"
#include "config.hpp"
#include "context.hpp"
#include "deadcheck.hpp"  // checkdead: the confirmation, external Ms
#include "extm.hpp"       // checkdead: external Ms
#include "note.hpp"
#include "g.hpp"
#include "main_return.hpp"  // main_return::unwind: ending the goroutines when main returns
#include "global_queue.hpp"
#include "m.hpp"
#include "memory.hpp"  // the policy's allocator_type
#include "netpoll.hpp"  // netpoll
#include "os_thread.hpp"
#include "random.hpp"
#include "run_queue.hpp"
#include "sanitizer.hpp"
#include "stall_monitor.hpp"  // chaos builds: the stall monitor
#include "signals.hpp"
#include "spinning.hpp"  // the spinning role
#include "chaos.hpp"  // chaos (test builds only)
#include "async_preempt.hpp"  // async preemption
#include "preempt.hpp"  // sysmon
#include "sysmon.hpp"   // sysmon
#include "timer_heap.hpp"
#include "timer_sleeper.hpp"  // the timer M's deadline
#include "debug_info.hpp"  // debugger anchor (tools/goro-gdb.py)
#include "trace.hpp"  // execution tracer

namespace goro::detail {

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
// Free Gs kept per P before half move to the global list, and how many a
// P takes from it at once (Go: 64 / 32), and stacks cached per P before
// half go back to the allocator. Sized for 16 Ps: goroutines that start
// on one P and exit on another (every stolen one) move records and stacks
// between Ps through the global list's and the allocator's mutexes, and
// with Go's sizes those became the bottleneck past 4 Ps (16-core machine,
// fib(27) at 16 Ps: 141 ns per task with 64 / 32 / 32, 55 ns with these;
// spawn at 16 Ps 263 -> 106 ns; 40k -> 14k voluntary context switches, the
// mutexes' futex sleeps; Go: 175 and 610 ns). Costs: a P record of ~10 KiB, and up to 256
// cached stacks per P (virtual; resident only where they were touched).
inline constexpr std::uint32_t p_gfree_max = 512;
inline constexpr std::uint32_t gfree_batch = 128;
inline constexpr std::uint32_t p_stack_cache_max = 256;
inline constexpr std::uint32_t stack_refill = 16;
// Stacks of other size classes (spawn_options::stack_size) a P keeps, of
// any mix of classes: a program that spawns many goroutines of one
// non-default class reuses them here instead of through the allocator's
// mutex at each spawn. Few, since each may be large (virtual memory only
// where untouched); a full cache sends its oldest back.
inline constexpr std::uint32_t p_class_stack_max = 16;
// The most Ps a runtime may have (options::maxprocs, GORO_MAXPROCS,
// gomaxprocs(n)); the table of P records has this many slots.
inline constexpr unsigned max_procs = 4096;
// Goroutine ids are handed to Ps in batches (Go: 16).
inline constexpr std::uint64_t goid_batch = 16;
// Go waits ~3 us before stealing a running P's runnext: its owner is
// probably about to run it (steal_work: a spin on the clock, or a sleep).
inline constexpr std::int64_t runnext_steal_grace_ns = 3'000;

template <class Policy>
class scheduler final : public sched_base {
  static_assert(check_policy<Policy>());
  using steal_ratio = typename Policy::steal_fraction;
  using run_queue = local_run_queue<g, static_cast<std::uint32_t>(Policy::local_queue_capacity),
                                    static_cast<std::uint32_t>(steal_ratio::num),
                                    static_cast<std::uint32_t>(steal_ratio::den)>;
  using allocator = typename Policy::stack_allocator;
  // The policy's allocator_type (goro::allocator<A>), rebound per record
  // type: everything the scheduler owns comes from it (memory.hpp).
  using rt_allocator = ::goro::policy_allocator_t<Policy>;
  template <class T>
  using alloc_of = rebind_t<rt_allocator, T>;
  template <class T>
  using vec = std::vector<T, alloc_of<T>>;
  template <class T>
  using owned = record_ptr<T, rt_allocator>;
  template <class T>
  using owned_array = record_array_ptr<T, rt_allocator>;
  // With the default allocator stacks are virtual memory that never runs out
  // in practice, so a goroutine gets its stack when it first runs. A custom
  // allocator may be a finite pool: then the stack is taken at spawn, so
  // exhaustion is reported by the go() call that needed it.
  static constexpr bool lazy_stacks = std::is_same_v<allocator, default_stack_allocator>;
  static constexpr std::size_t stack_bytes = (Policy::stack_size + 15) & ~std::size_t{15};
  // async preemption: Ms of this runtime take SIGURG (Windows: SuspendThread) preemption (not under TSan).
  static constexpr bool async_signal = Policy::preempt == preemption::signal && async_preempt_supported;
  static_assert(Policy::preempt != preemption::signal || os::async_preemption_ported,
                "goro: preemption::signal (asynchronous preemption) is not ported to this system; "
                "use preemption::cooperative");

  enum class p_status : std::uint32_t { idle, running, syscall /* in goro::blocking, no owner: see sysmon.hpp */ };

  struct cached_stack {
    stack_memory mem;
    bool guarded;
  };

  cached_stack allocate_stack(std::size_t size);  // sched_galloc.hpp

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
    cached_stack class_stacks[p_class_stack_max];  // other classes, oldest first
    std::uint32_t nclass_stack = 0;
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
    spin_token spinning;  // holds the spinning role (spin_gate)
    bool run_caller = false;                 // the thread inside run(): leaves when main finishes
    const lane_count* extm_lanes = nullptr;  // checkdead: run()'s thread's lanes (extm.hpp), which it cannot pump
    bool in_idle_list = false;
    note park_note;
    m* link = nullptr;  // idle list
    fast_rand rng;
    // steal_work: spins on the clock for a victim's runnext that led to
    // nothing since the last one that led to a steal from a ring; at
    // steal_wait_miss_limit the first wait sleeps instead (see there).
    std::uint8_t steal_wait_misses = 0;
    runtime_thread thread;  // named "<thread_name>-m<id>" (os_thread.hpp)
    p* oldp = nullptr;  // sysmon: the P left in `syscall` status by goro::blocking
    // lockosthread: sleeping in stoplockedm (outside the idle list; counted
    // in nmlocked_wait_), under lock_. Whoever clears it owns the wake-up.
    bool locked_wait = false;
    bool exit_thread = false;  // lockosthread: a G exited while locked to this M
    bool thread_published = false;  // newm stored `thread` (lock_): join_exited_ms may join it
    // gosched (yield): the G that switched straight to curg, queued by curg
    // once running (direct_switch_done); or a G gosched took from the run
    // queues but could not switch to directly: g0 runs it next (m_loop).
    g* direct_prev = nullptr;
    g* yield_next = nullptr;
    bool yield_next_inherit = false;
    g* async_token = nullptr;  // async preemption: the pinned G queued while this M waits for a P (park_pinned)
    g* locked_handed = nullptr;           // startlockedm: the wired G nextp was handed for (lock_)
    std::int32_t id = 0;                  // 0: the run() caller's M (Go's m0); others from 1 (traces)
    std::int64_t trace_blocking_since = 0;  // tracer: when curg entered goro::blocking (0: not traced)
    // tracer: the slice's P track stops at its first goro::blocking call and resumes after the last (trace_run)
    std::int64_t trace_p_cut = 0, trace_p_resume = 0;  // 0: none
    std::int32_t trace_p_resume_id = -1;
  };

  // Proof that the scheduler lock (lock_, Go's sched.lock) is held, for as
  // long as it lives: made only by taking the lock. The idle P and M lists
  // and the other `_locked` steps take one, so none can be called without
  // the lock (Go states this in comments; here the compiler checks it).
  class sched_lock {
   public:
    explicit sched_lock(scheduler& s) : lk_(s.lock_) {}
    sched_lock(const sched_lock&) = delete;
    sched_lock& operator=(const sched_lock&) = delete;

   private:
    std::lock_guard<std::mutex> lk_;
  };

 public:
  explicit scheduler(unsigned nprocs, bool detect_deadlock = true,  // checkdead: detect_deadlock
                     const rt_allocator& a = rt_allocator())
      : ra_(a),
        nprocs_(nprocs == 0 ? 1 : nprocs),
        allp_(allocate_records<p*, rt_allocator, true>(ra_.get(), max_procs)),  // zeroed
        detect_deadlock_(detect_deadlock) {
    memory = ra_.memory();  // before anything allocates through it
    fp_shared = policy_fp_control_v<Policy> == fp_control::shared;
    threads_.memory = memory;
    globq_.set_memory(memory);
    if (nprocs > max_procs) raise_usage("maxprocs must be at most 4096");
    if (shadow_stack_active())  // see cet.hpp
      raise_usage(
          "runtime: CET shadow stacks are enabled in this process and goro's context switch does not "
          "keep them; compile the files that include goro with -fcf-protection=branch (goro's CMake "
          "target does) or run with GLIBC_TUNABLES=glibc.cpu.x86_shstk=off");
    install_fault_handler();
    if constexpr (async_signal) install_async_preempt_handler();  // async preemption
    sched_lock lk(*this);
    create_ps_locked(lk, make_ps(0, nprocs_.load(std::memory_order_relaxed)));
    activate_locked(lk, 0, nprocs_.load(std::memory_order_relaxed));
    install_dump_handlers();  // goroutine dump: SIGQUIT, GORO_DEBUG check
    register_runtime(this);
  }

  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;

  // options::thread_factory, thread_name, max_threads: before the first
  // spawn (no thread of this runtime exists yet).
  void set_threads(thread_config c) {
    if (c.max_threads == 0) raise_usage("options::max_threads must be at least 1");
    if (c.name.empty()) c.name = "goro";
    c.memory = memory;  // the threads' trace buffers
    threads_ = std::move(c);
  }

  ~scheduler() override {
    shutdown();  // unregisters this runtime from the goroutine dump before freeing G records
  }

  // basic_runtime's deleter: the scheduler's own storage came from the
  // runtime's allocator (new_scheduler), so it goes back there.
  void destroy() noexcept override {
    using traits = std::allocator_traits<alloc_of<scheduler>>;
    alloc_of<scheduler> a(ra_.get());  // a copy: ra_ goes with the scheduler
    auto self = std::pointer_traits<typename traits::pointer>::pointer_to(*this);
    this->~scheduler();
    traits::deallocate(a, self, 1);
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
    set_dump_field(gp->sched, this);
    gp->status.store(g_status::runnable, std::memory_order_relaxed);
    sysmon_.ensure_started();  // sysmon: the first spawn comes from outside any goroutine
    if (pp) {
      new_g_on_p(pp, gp);  // may throw: nothing queued yet
      if (GORO_UNLIKELY(tracing::enabled())) trace_create(mm, gp);
      pp->runq.put(gp, true, [this](g** batch, std::uint32_t n) { glob_put_batch(batch, n); });
    } else {
      if (!mm) extm_outside_op();  // checkdead: a spawn from outside is external activity
      if constexpr (!lazy_stacks)
        if (!gp->stack.lo) attach_stack_global(gp);  // run()'s main has its stack already (run_main)
      set_dump_field(gp->id, goid_gen_.fetch_add(1, std::memory_order_relaxed));
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
      // From outside (a plain thread, another runtime's M): once queued, gp
      // may run, main return and this runtime be destroyed while we are
      // still in wakep. Counted in flight as wake_idle_m is: the increment
      // comes before the push, so before gp runs and shutdown starts;
      // shutdown frees nothing until it reads 0 (acquire), after our
      // release decrement, our last touch.
      if (!mm) {
        wakes_in_flight_.fetch_add(1, std::memory_order_seq_cst);
        extm_outside_op();  // checkdead: a wake from outside is external activity
      }
      unparks_.fetch_add(1, std::memory_order_relaxed);
      globq_.push_back(gp);
      if (!mm) testing::outside_ready_seam();
    }
    GORO_CHAOS_POINT("ready.wakep");
    wakep();
    if (!mm) wakes_in_flight_.fetch_sub(1, std::memory_order_release);
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

  // thread_lane (lane.hpp; sched_galloc.hpp)
  void start_lane_g(g* gp, sched_base* lane) override;
  void lane_g_exit(g* gp) noexcept override;

  std::size_t live_goroutines() const noexcept override {
    std::uint64_t created = offp_spawns_.load(std::memory_order_relaxed);
    std::uint64_t done = offp_exits_.load(std::memory_order_acquire);  // lane_g_exit's last touch (release)
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
    std::lock_guard<spinlock> lk(m_record_lock_);  // sysmon_m may name the run() caller's M: see m_record_lock_
    for_each_p([&](const p* pp) {
      if (pp->sysmon_curg.load(std::memory_order_acquire) == gp)
        if (m_base* mb = pp->sysmon_m.load(std::memory_order_relaxed)) id = static_cast<m*>(mb)->id;
    });
    return id;
  }

  runtime_stats stats() const noexcept override {
    runtime_stats s;
    s.spawns = offp_spawns_.load(std::memory_order_relaxed);
    s.exits = offp_exits_.load(std::memory_order_relaxed);
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
    s.m_spins = spinning_.starts();
    s.threads = threads_created_.load(std::memory_order_relaxed);
    sysmon_.fill_stats(s);  // sysmon: preemptions, syscall_handoffs
    return s;
  }

  unsigned resize(unsigned n);  // gomaxprocs(n) (sched_resize.hpp)

  // main_return (main_return.hpp): end the goroutines still alive when
  // main returns, and at shutdown (options::on_main_return == unwind).
  void set_unwind_on_main_return(bool on) noexcept { unwind_on_main_return_ = on; }
  // options::main_stack_size (the default allocator's main goroutine).
  void set_main_stack_size(std::size_t bytes) {
    if (bytes < 64 * 1024 || bytes > (std::size_t{1} << 30))
      raise_usage(("options::main_stack_size must be between 64 KiB and 1 GiB, got " + std::to_string(bytes)).c_str());
    main_stack_size_ = (bytes + 15) & ~std::size_t{15};
  }

  // run(): the calling thread serves as an M while `main` runs; then
  // shutdown (sched_lifecycle.hpp).
  void run_main(void (*set_main_closure)(g*, void*), void* arg) override;
  void shutdown() noexcept;
  void remember_deadlock_shown();                 // run(): what the deadlock dump showed
  void report_blocked_forever(std::size_t live);  // shutdown: those not shown yet

  std::size_t blocked_at_shutdown() const noexcept { return blocked_at_shutdown_; }

  // ---- sysmon: goro::blocking (sysmon.hpp) ----
  void enter_syscall(bool long_call) noexcept override {
    m* mm = this_m();
    if (GORO_UNLIKELY(tracing::enabled())) {
      mm->trace_blocking_since = tracing::now();
      if (mm->trace_p_cut == 0) mm->trace_p_cut = mm->trace_blocking_since;
      mm->trace_p_resume = 0;
    }
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
    // Read on our own M, before we may move: an untraced call skips the
    // thread-local read below.
    const bool cut = mm->trace_p_cut != 0;
    sysmon_.exit_syscall(mm);
    // Back with a P, in the same slice (trace_run cleared the cut of one that switched out for want of a P).
    if (GORO_UNLIKELY(cut) && this_m() == mm && mm->trace_p_cut != 0 && mm->pp) {
      mm->trace_p_resume = tracing::now();
      mm->trace_p_resume_id = static_cast<std::int32_t>(mm->pp->id);
    }
  }

  // goro::yield (Go's Gosched, sched_loop.hpp)
  void gosched(m_base* mb) noexcept override;
  void direct_switch_done(m_base* mb) noexcept override;
  g* yield_fast_next(m* mm, bool& inherit) noexcept;

 private:
  m* this_m() const noexcept {
    m_base* b = current_m();
    return (b && b->sched == this) ? static_cast<m*>(b) : nullptr;
  }
  bool should_leave(m* mm) const noexcept {
    return exiting_.load(std::memory_order_acquire) ||
           (mm->run_caller && (main_done_.load(std::memory_order_acquire) ||
                               deadlock_.load(std::memory_order_acquire)));  // checkdead
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
  // A G goes on running (execute with inherit_time) with its pending
  // request, if any: execute must not clear it.
  static void keep_request(p* pp, g* gp) noexcept {
    if (pp && gp->preempt.load(std::memory_order_relaxed)) pp->slice_over = true;
  }

  // ---- the schedule loop, on g0 (sched_loop.hpp) ----
  void m_loop(m* mm, g* first = nullptr);
  g* find_runnable(m* mm, bool& inherit);
  template <class TakeGlobal>
  g* next_local(p* pp, bool& inherit, TakeGlobal&& take_global);
  g* steal_work(m* mm, p* pp);
  g* execute(m* mm, g* gp, bool inherit_time);
  void begin_slice(m* mm, p* pp, g* gp, bool inherit_time) noexcept;
  void requeue_global(g* gp);
  void glob_put_batch(g** batch, std::uint32_t n) { globq_.push_back_batch(batch, n); }
  g* glob_get(p* pp, std::uint32_t max);

  // ---- idle Ps and Ms, wakep, the timer M (sched_idle.hpp) ----
  int wakep();
  bool work_after_going_idle() noexcept;
  void reset_spinning(m* mm);
  void wake_idle_m(m* mm) noexcept;
  bool park_idle(m* mm);
  void wake_for_timer(std::int64_t when);
  std::int64_t earliest_timer() const noexcept;
  bool run_other_timers(p* pp) noexcept;
  // gomaxprocs: the due timers of retired Ps (they are not moved: a timer
  // stays on the heap it was added to, see timer_heap.hpp).
  bool run_retired_timers() noexcept { return run_timers_of(active_ps(), created_ps(), nullptr); }
  bool run_timers_of(unsigned from, unsigned to, p* skip) noexcept;
  // The idle lists (the scheduler lock held: they take the proof).
  void pidle_put(const sched_lock&, p* pp) noexcept;
  p* pidle_get(const sched_lock&) noexcept;
  void m_idle_put(const sched_lock&, m* mm) noexcept;
  m* m_idle_get(const sched_lock&) noexcept;
  void clear_timer_m(const sched_lock&) noexcept;
  void m_idle_remove(const sched_lock&, m* target) noexcept;

  // ---- the M pool (sched_mpool.hpp) ----
  enum class wake_reason { got_p, again, leave };
  int startm(p* pp, spin_token spinning);
  void retry_start_m() noexcept;
  int newm(p* pp, spin_token& spinning);
  void checkmcount(const sched_lock&) noexcept;
  void join_exited_ms() noexcept;
  void m_thread_main(m* mm);
  wake_reason stopm(m* mm, std::int64_t until = 0);
  void leave(m* mm);
  void handoffp(p* pp, spin_token spinning = {});

  // ---- lock_os_thread, async-pinned goroutines (sched_locked.hpp) ----
  bool startlockedm(m* mm, g* gp);
  bool stoplockedm(m* mm);
  bool drop_locked_thread(m* mm);
  void handoffp_locked_m(m* mm);
  g* next_with_pinned(m* mm);
  void park_pinned(m* mm);
  void queue_token(m* mm);
  static void unwire_token(m* mm, g* gp) noexcept;

  // ---- G records, stacks, ids; goroutine entry and exit (sched_galloc.hpp) ----
  g* gfget(p* pp);
  void gfput(p* pp, g* gp) noexcept;
  g* gfget_global_or_new();
  void gfput_global(g* gp) noexcept;
  void new_g_block_locked();
  void new_g_on_p(p* pp, g* gp);
  void start_main_here(p* pp, g* gp);
  void attach_stack(p* pp, g* gp);
  void attach_stack_at_first_run(p* pp, g* gp) noexcept;
  void attach_stack_global(g* gp) { init_stack(gp, allocate_stack(gp->stack_request ? gp->stack_request : stack_bytes)); }
  void init_stack(g* gp, cached_stack c) noexcept;
  static std::size_t stack_color(const stack_memory& s) noexcept;
  void release_stack(p* pp, g* gp, bool was_main) noexcept;
  // sysmon: the default allocator's stacks waiting for lazy release.
  std::size_t stacks_waiting_release() const noexcept {
    if constexpr (lazy_stacks) return alloc_.pending();
    return 0;
  }
  void release_waiting_stacks() noexcept {
    if constexpr (lazy_stacks) alloc_.scavenge();
  }
  static void goroutine_main(void* arg);
  static void run_goroutine(g* gp, bool run = true) noexcept;
  [[noreturn]] static void uncaught_exception(g* gp, const char* what) noexcept;
  void goexit0(p* pp, g* gp) noexcept;

  // ---- gomaxprocs: P records (sched_resize.hpp) ----
  vec<owned<p>> make_ps(unsigned from, unsigned to);
  void create_ps_locked(const sched_lock&, vec<owned<p>> ps);
  void activate_locked(const sched_lock&, unsigned from, unsigned to) noexcept;
  void retire_locked(const sched_lock&, p* pp) noexcept;
  void drop_retired_p(m* mm);
  bool retired_ps_released(unsigned n);

  // ---- run, main finishing, checkdead, freeing (sched_lifecycle.hpp) ----
  void main_finished() noexcept;
  void checkdead(const sched_lock&, m* self) noexcept;
  bool dead_locked(const sched_lock&) noexcept;
  bool take_run_m_locked(const sched_lock&, m* rm) noexcept;
  void unlink_blocked() noexcept;
  void release_memory() noexcept;

  // ---- execution-tracer events (sched_trace.hpp) ----
  GORO_NOINLINE void trace_run(m* mm, g* gp, std::int32_t trace_p, std::int64_t t0, std::uint64_t flow) noexcept;
  GORO_NOINLINE void trace_wake(m* mm, g* gp) noexcept;
  GORO_NOINLINE void trace_create(m* mm, g* gp) noexcept;

  // ---- state ----
  // The runtime's one copy of the policy's allocator (declared first: it
  // outlives every member that allocated from it).
  runtime_allocator_holder<rt_allocator> ra_;
  // gomaxprocs: Ps [0, nprocs_) are active. Records [nprocs_, nallp_) are
  // retired by a shrink (kept, for their counters, timers and a later
  // growth). allp_ has max_procs slots; a slot is written once, under
  // lock_, before nallp_ (release) covers it, so readers index it without
  // the lock. nprocs_ changes only under lock_ (with the idle list).
  std::atomic<unsigned> nprocs_;
  std::atomic<unsigned> nallp_{0};
  owned_array<p*> allp_;
  vec<owned<p>> p_records_{alloc_of<owned<p>>(ra_.get())};  // owns allp_'s records (lock_)
  // Steal order over [0, nallp_); replaced when nallp_ grows. Old orders are
  // kept (a stealer may still hold one) until the runtime ends.
  std::atomic<const coprime_order*> steal_order_{nullptr};
  vec<owned<coprime_order>> steal_orders_{alloc_of<owned<coprime_order>>(ra_.get())};  // lock_

  std::mutex resize_lock_;  // gomaxprocs: one resize at a time (taken before lock_)
  std::mutex lock_;  // sched.lock: idle P and M lists, allm (not the global queue: it has its own)
  global_run_queue globq_;
  p* pidle_ = nullptr;
  alignas(cache_line) std::atomic<std::uint32_t> npidle_{0};
  spin_gate spinning_;  // Go's nmspinning (spinning.hpp)
  m* midle_ = nullptr;
  m* timer_m_ = nullptr;  // the idle M sleeping until the next timer (see park_idle)
  // netpoll: the idle M blocked in epoll_wait, if any (one at a time: the
  // poller's lock). Not always timer_m_: see wake_idle_m.
  std::atomic<m*> poll_sleeper_{nullptr};
  // wake_idle_m calls and ready() calls from outside under way: shutdown
  // waits for none before it frees the Ms (and then the scheduler) that
  // they may still touch.
  std::atomic<std::uint32_t> wakes_in_flight_{0};
  timer_sleeper timer_m_until_;  // its deadline (0: no timer M); published under lock_
  std::atomic<std::uint32_t> timer_rr_{0};      // P choice for timers added from outside
  vec<m*> allm_{alloc_of<m*>(ra_.get())};
  thread_config threads_;  // options: thread_factory, thread_name, max_threads (os_thread.hpp)
  // run()'s main goroutine's stack with the default allocator
  // (options::main_stack_size): a thread's 8 MiB by default, since main
  // usually does the program's heavier work (deep recursion, I/O, formatting).
  std::size_t main_stack_size_ = 8 << 20;
  const std::uint32_t trace_rt_ = tracing::next_runtime_number.fetch_add(1, std::memory_order_relaxed);  // tracer
  std::atomic<int> threads_alive_{0};
  std::atomic<bool> m_start_failed_{false};  // startm could not create a thread: sysmon retries (retry_start_m)

  std::mutex gfree_lock_;  // global free G list and G blocks
  vec<g*> gfree_{alloc_of<g*>(ra_.get())};  // free G records, most recently freed last
  vec<owned_array<g>> g_blocks_{alloc_of<owned_array<g>>(ra_.get())};  // gfree_batch records each

  alignas(cache_line) std::atomic<std::uint64_t> goid_gen_{1};
  std::atomic<std::uint64_t> offp_spawns_{0};
  // thread_lane: exits of goroutines run by a lane (no P to count them),
  // and how many of this runtime's goroutines live on lanes now.
  std::atomic<std::uint64_t> offp_exits_{0};
  std::atomic<std::size_t> lane_live_{0};
  std::atomic<std::uint64_t> unparks_{0}, m_parks_{0}, threads_created_{0};

  allocator alloc_;

  std::atomic<bool> run_active_{false};
  bool run_m_left_ = false;  // lock_: the run() caller left the scheduler (checkmcount)
  std::atomic<bool> main_done_{false};
  std::atomic<m*> run_m_{nullptr};
  // +1 per run() (lock_ held): the M that finished a run's main goroutine
  // wakes that run's caller, not the next run's (main_finished).
  std::uint64_t run_epoch_ = 0;
  const lane_count* run_lanes_ = nullptr;  // main_return: run()'s thread's lanes (extm.hpp), set by run_main
  g* run_main_g_ = nullptr;          // checkdead: this run's main goroutine (deadcheck.hpp)
  // Owner of the "a P's sysmon_m may name a freed M" rule. Every M but the
  // run() caller's lives until shutdown; that one is freed when run()
  // returns, while sysmon, gomaxprocs' shrink, the goroutine dump and the
  // stall monitor may still read it from a P's sysmon_m (execute leaves it
  // there). Readers that dereference sysmon_m hold this lock from the load
  // until they are done with the record (and, for SIGURG, its thread);
  // run_main, under it, clears every sysmon_m naming its M before that M
  // is freed and its thread may exit (forget_run_m). Never held across the
  // scheduler lock: the scheduler lock may be held when taking it.
  mutable spinlock m_record_lock_;
  std::atomic<bool> exiting_{false};
  bool shut_down_ = false;
  std::size_t blocked_at_shutdown_ = 0;
  // The goroutines the last deadlock_error's dump showed, as (id, start of
  // the wait it showed): shutdown names them instead of dumping them again,
  // unless they have waited anew since (sched_lifecycle.hpp). Written by
  // run() and read by shutdown, never at once.
  std::vector<std::pair<std::uint64_t, std::int64_t>> deadlock_shown_;
  note shutdown_note_;
  std::atomic<bool> shutdown_waiting_{false};

  // checkdead / lockosthread (counts under lock_)
  const bool detect_deadlock_;
  std::size_t nmidle_ = 0;         // Ms on the idle list
  std::size_t nmlocked_wait_ = 0;  // Ms asleep in stoplockedm (Go's nmidlelocked)
  std::size_t nmexited_ = 0;       // Ms whose thread exited with a locked G (still in allm_)
  m* mexited_ = nullptr;           // those not joined yet (link; lock_): join_exited_ms
  std::mutex reap_lock_;           // held while joining them (join_exited_ms, shutdown)
  std::atomic<bool> deadlock_{false};
  std::int64_t deadcheck_at_ = 0;      // armed: nanotime() at which to confirm (deadcheck.hpp)
  std::uint64_t deadcheck_epoch_ = 0;  // extm_epoch when the grace period began

  // sysmon (sysmon.hpp): its thread, preemption and blocking-call hand-offs.
  friend class sysmon<Policy, scheduler>;
  sysmon<Policy, scheduler> sysmon_{*this};

  // netpoll: destroyed after shutdown() joined every M (and sysmon).
  netpoller poller_{&netpoll_sched<scheduler>::on_init, this, &netpoll_sched<scheduler>::make_pool,
                    &netpoll_sched<scheduler>::watch};
  using netpoll_ops = netpoll_sched<scheduler>;  // netpoll: the scheduler hooks (netpoll.hpp)
  friend netpoll_ops;
  using deadcheck_ops = deadcheck_sched<scheduler>;  // checkdead: the confirmation (deadcheck.hpp)
  friend deadcheck_ops;
  using main_return_ops = main_return_sched<scheduler>;  // main_return (main_return.hpp)
  friend main_return_ops;
  bool unwind_on_main_return_ = true;
  runtime_thread ender_;  // main_return: the thread ending the goroutines after main returned
  bool ender_started_ = false;  // written before main_done_, read by run_main after it
  // chaos builds (stall_monitor.hpp): reads the state above; declared last, so stopped first.
  friend class stall_monitor<scheduler>;
  [[no_unique_address]] stall_monitor<scheduler> stall_monitor_{*this};
};

}  // namespace goro::detail

// The scheduler's member functions, by concern (see docs/design.md's map).
#include "sched_loop.hpp"       // schedule: find_runnable, execute, gosched
#include "sched_idle.hpp"       // idle lists, wakep and the spinning role, the timer M
#include "sched_mpool.hpp"      // the M pool: startm, newm, stopm, handoffp
#include "sched_locked.hpp"     // lock_os_thread hand-offs, async-pinned goroutines
#include "sched_galloc.hpp"     // G records, stacks, ids; goroutine entry and exit
#include "sched_resize.hpp"     // gomaxprocs(n)
#include "sched_lifecycle.hpp"  // run, shutdown, checkdead
#include "sched_trace.hpp"      // execution-tracer events

namespace goro {
namespace detail {

inline unsigned resolve_maxprocs(unsigned requested) {
  if (requested > 0) return requested;
  if (const char* env = std::getenv("GORO_MAXPROCS"); env && *env) {
    char* end = nullptr;
    errno = 0;
    unsigned long v = std::strtoul(env, &end, 10);
    if (errno != 0 || *end != '\0' || v == 0 || v > 4096 || env[0] == '-')
      raise_usage((std::string("GORO_MAXPROCS must be an integer between 1 and 4096, got \"") + env + "\"").c_str());
    return static_cast<unsigned>(v);
  }
  return os::usable_cpus();
}

template <class Policy>
sched_base* new_scheduler(const options& o, const ::goro::policy_allocator_t<Policy>& a) {
  // The scheduler record itself comes from the runtime's allocator too
  // (scheduler::destroy gives it back).
  using sched_alloc = rebind_t<::goro::policy_allocator_t<Policy>, scheduler<Policy>>;
  using traits = std::allocator_traits<sched_alloc>;
  sched_alloc sa(a);
  scheduler<Policy>* raw = std::to_address(traits::allocate(sa, 1));
  GORO_TRY { ::new (static_cast<void*>(raw)) scheduler<Policy>(resolve_maxprocs(o.maxprocs), o.detect_deadlock, a); }
  GORO_CATCH_ALL {
    traits::deallocate(sa, std::pointer_traits<typename traits::pointer>::pointer_to(*raw), 1);
    GORO_RETHROW;
  }
  std::unique_ptr<scheduler<Policy>, sched_delete> s(raw);
  s->set_unwind_on_main_return(o.on_main_return == main_return::unwind);
  s->set_threads(thread_config{o.thread_factory, o.thread_name, o.max_threads});
  s->set_main_stack_size(o.main_stack_size);
  return s.release();
}

}  // namespace detail

GORO_DECL unsigned num_cpu() noexcept { return detail::os::usable_cpus(); }

}  // namespace goro

// Separate compilation: default_policy's scheduler is compiled here (see
// GORO_INSTANTIATE_RUNTIME in runtime.hpp).
#if defined(GORO_SEPARATE_COMPILATION)
GORO_INSTANTIATE_RUNTIME(::goro::default_policy);
#endif
