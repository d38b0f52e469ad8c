// M: an OS thread running goroutines. This header holds what every
// runtime shares whatever its policy: the per-thread "current M" (read
// through a non-inlined accessor), the type-erased scheduler interface the
// free functions (goro::go, yield, ...) call, and the two halves of a
// goroutine switch with their sanitizer and exception-state bookkeeping.
//
// A goroutine usually switches to its M's scheduler context (g0, the
// thread's own stack) with a request in m_base::after, and g0 carries it
// out once the goroutine is off its stack (Go's mcall). So a goroutine is
// never made runnable while still running. The one exception is yield's
// direct switch (switch_g_to_g): the goroutine switches straight to the
// next one, and the next one, once running on its own stack, finishes the
// hand-off of the first (sched_base::direct_switch_done), as Go's g0 would.
#pragma once

#include <cerrno>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "../os/os.hpp"
#include "chaos.hpp"
#include "config.hpp"
#include "context.hpp"
#include "g.hpp"
#include "memory.hpp"
#include "runtime_stats.hpp"
#include "sanitizer.hpp"
#include "spinlock.hpp"

#if GORO_EXCEPTIONS  // after config.hpp, which defines it
#include <cxxabi.h>
#endif

namespace goro::detail {

// What g0 does with the goroutine that just switched out.
enum class after_switch : std::uint8_t {
  none,
  yield,  // Gosched: to the global run queue
  park,   // waiting; run park_unlock(park_arg) once off its stack
  exit,   // finished: recycle
  call,   // run g0_call(g0_arg) on g0, then resume the goroutine at once
  preempt,      // sysmon asked it to yield: to the global run queue (counted)
  exitsyscall,  // left blocking() and found no P: take one on g0, or queue it and stop the M
  async_preempt,  // async preemption: SIGURG trampoline; pinned to this M (m_base::async_pinned)
};

// The policy-independent interface of a runtime.
struct timer;
class netpoller;
class sched_base;

// after_func (time.hpp): the runtime an after_func timer starts f on, as
// its timer sees it. A timer may outlive its runtime: the runtime clears
// rt (under lock) before it drops its timers at shutdown, so a timer
// re-armed later finds nullptr there, never a freed runtime, and one
// re-armed before is dropped with the others.
struct after_func_home {
  spinlock lock;
  sched_base* rt = nullptr;  // guarded by lock; nullptr once the runtime ended
};

class sched_base {
 public:
  virtual ~sched_base() { close_after_func_home(); }
  // Destroys the scheduler and returns its storage to the allocator it
  // came from (the policy's allocator_type; see new_scheduler).
  virtual void destroy() noexcept { delete this; }
  // main_return (goexit.hpp, main_return.hpp): this runtime is ending its
  // goroutines; each one unwinds at its next goro call, and one not yet
  // started is discarded.
  std::atomic<bool> ending_goroutines{false};
  // The flag the goroutines of this sched_base read: its own, or (a
  // thread_lane's adapter, lane.hpp) its runtime's.
  const std::atomic<bool>* ending_flag = &ending_goroutines;
  bool ending() const noexcept { return ending_flag->load(std::memory_order_relaxed); }
  // after_func: this runtime's home (made by its first after_func, an
  // allocation of that call's like its timer; time.hpp), and its lock.
  spinlock af_home_lock;
  std::shared_ptr<after_func_home> af_home;
  // At shutdown, before the timers are dropped: an after_func timer
  // re-armed from now on finds no runtime. Idempotent.
  void close_after_func_home() noexcept {
    std::shared_ptr<after_func_home> h;
    {
      std::lock_guard<spinlock> lk(af_home_lock);
      h = std::move(af_home);
    }
    if (!h) return;
    std::lock_guard<spinlock> lk(h->lock);
    h->rt = nullptr;
  }
  // The runtime's allocator for its non-template parts (memory.hpp);
  // nullptr: std::allocator. Set by the scheduler's constructor (a
  // thread_lane's adapter: its runtime's).
  runtime_memory* memory = nullptr;
  // The policy's fp_control is shared: its Ms switch without the FP
  // control words (m_base::fp_shared). Set by the scheduler's
  // constructor (a thread_lane's adapter: its runtime's).
  bool fp_shared = false;
  // A fresh G record for a spawn from the calling thread.
  virtual g* alloc_g() = 0;
  // Returns an unused G from alloc_g() (after a failed spawn).
  virtual void free_g(g* gp) noexcept = 0;
  // Queues a new G and wakes an M if one is idle. May raise bad_alloc
  // (stack allocation with a custom allocator) or system_error (no thread).
  virtual void start_g(g* gp) = 0;
  // Makes a waiting G runnable (from any thread). Go's ready().
  virtual void ready(g* gp) noexcept = 0;
  // addtimer: queues t (on no heap) on the calling M's P, or on some P when
  // called from elsewhere, and makes sure an M will be awake to run it in
  // time (Go's addtimer + wakeNetPoller). t->f runs on a scheduler context.
  virtual void add_timer(timer* t) = 0;
  // The runtime's network poller (netpoll.hpp); its epoll fd is created on
  // first use.
  virtual netpoller* poller() noexcept { return nullptr; }
  virtual std::size_t live_goroutines() const noexcept = 0;
  virtual runtime_stats stats() const noexcept = 0;
  // run(): runs the main goroutine, whose closure set_main_closure(g, arg)
  // sets up, with the calling thread as an M; returns when it has finished.
  virtual void run_main(void (*set_main_closure)(g* gp, void* arg), void* arg) = 0;
  virtual unsigned procs() const noexcept = 0;
  // gomaxprocs(n): n Ps from now on (n > 0); returns the previous count.
  virtual unsigned resize_procs(unsigned n) = 0;
  // goro::blocking (blocking.hpp): entersyscall / entersyscallblock before
  // the call (long_call: hand the P off at once), exitsyscall after it.
  virtual void enter_syscall(bool long_call) noexcept = 0;
  virtual void exit_syscall() noexcept = 0;
  // goro::yield (Go's Gosched) of m's current goroutine: it goes to the
  // global run queue and m runs another; returns when the goroutine runs
  // again (on any M).
  virtual void gosched(m_base* m) noexcept = 0;
  // Called by the goroutine that m switched to directly (switch_g_to_g),
  // first thing once it runs on its own stack: queues the goroutine that
  // switched out (it is off its stack now) and clears m->after.
  virtual void direct_switch_done(m_base* m) noexcept = 0;
  // goroutine dump (dump.hpp): calls fn(gp, ctx) for every G record this
  // runtime ever allocated (free and dead ones included: the dump skips
  // them); the records stay valid while the runtime is registered.
  virtual void for_each_g(void (*fn)(g* gp, void* ctx), void* ctx) { (void)fn, (void)ctx; }
  // The id of the M running gp as last published to sysmon (-1: none).
  virtual int running_m(const g* gp) const noexcept {
    (void)gp;
    return -1;
  }
  // The runtime goroutines of this sched_base belong to: itself, or a
  // thread_lane adapter's runtime (after_func starts its goroutine there).
  virtual sched_base* runtime() noexcept { return this; }
  // thread_lane (lane.hpp), called by the lane on any thread: gp (from
  // alloc_g, closure set) becomes a goroutine of this runtime that `lane`
  // runs: an id, its stack now, counted as live; gp->sched = lane. May
  // raise bad_alloc (its stack); then nothing changed. lane_g_exit: gp
  // finished on its lane; its stack and record go back, uncounted.
  virtual void start_lane_g(g* gp, sched_base* lane) {
    (void)gp, (void)lane;
  }
  virtual void lane_g_exit(g* gp) noexcept { (void)gp; }
  // thread_lane: its owner thread's lane count (extm.hpp lanes_owned_here),
  // which names the owner; nullptr for a runtime.
  virtual const void* lane_owner() const noexcept { return nullptr; }
};

inline runtime_memory* sched_memory(const sched_base* s) noexcept { return s->memory; }
// basic_runtime's owner of its scheduler.
struct sched_delete {
  void operator()(sched_base* s) const noexcept { s->destroy(); }
};

struct m_base {
  void* g0_sp = nullptr;  // the scheduler context while a goroutine runs
  g* curg = nullptr;
  sched_base* sched = nullptr;
  // sched->fp_shared, kept here for the switches below (switch_to_g0,
  // switch_g_to_g, switch_to_g): every switch of this M, both ways, is of
  // one kind while a goroutine runs.
  bool fp_shared = false;

  after_switch after = after_switch::none;
  bool (*park_unlock)(void*) = nullptr;  // returns false to cancel the park
  void* park_arg = nullptr;
  void (*g0_call)(void*) = nullptr;
  void* g0_arg = nullptr;

  void* g0_tsan_fiber = nullptr;
  void* g0_asan_fake_stack = nullptr;
  const void* g0_stack_bottom = nullptr;
  std::size_t g0_stack_size = 0;

  bool in_blocking = false;  // curg is inside goro::blocking: this M has no P of its own
  void* eh = nullptr;        // this thread's __cxa_eh_globals (an M is one thread), looked up at its first switch
  g* lockedg = nullptr;      // lockosthread: the G wired to this M (Go's m.lockedg)

  // async preemption (async_preempt.hpp). A goroutine preempted by SIGURG
  // waits here, FIFO through g::link, in no run queue: only this M
  // resumes it, and it keeps its P meanwhile (see sched.hpp m_loop).
  bool async_signal = false;       // an M of a preemption::signal runtime
  os::thread_handle os_thread{};  // the thread sysmon signals
  g* async_pinned = nullptr;
  g* async_pinned_tail = nullptr;
  bool async_queued_turn = false;  // the last G run here came from a run queue: a pinned one goes next
  // The run() caller's M of a signal-mode runtime: main stays wired to it
  // for its whole life and it runs no other goroutine, so that no goroutine
  // is ever pinned to the thread that must return from run()
  // (docs/preemption.md, "The run() caller's thread").
  bool keeps_main = false;
};

inline thread_local m_base* tls_current_m = nullptr;

// The current thread's M. Compilers keep &thread_local in a register across
// calls, and a goroutine may resume on another thread after any switch, so
// the runtime reads its TLS only through this non-inlined function; the
// asm barrier also keeps the compiler from treating it as pure.
GORO_NOINLINE inline m_base* current_m() noexcept {
  asm volatile("" ::: "memory");
  return tls_current_m;
}
// The calling thread's errno, read the same way: compilers keep &errno in
// a register too (glibc's __errno_location is `const`), so a goroutine that
// parked between a system call and its errno check, and resumed on another
// thread, would read the old thread's errno (DESIGN §7). Use it wherever a
// goroutine may have switched since the function began.
GORO_NOINLINE inline int thread_errno() noexcept {
  asm volatile("" ::: "memory");
  return errno;
}
GORO_NOINLINE inline void set_current_m(m_base* m) noexcept {
  asm volatile("" ::: "memory");
  tls_current_m = m;
}

// The goroutine running on this thread, or nullptr.
inline g* current_g() noexcept {
  m_base* m = current_m();
  return m ? m->curg : nullptr;
}

// The end of the exception in flight (not of a copy): a handler swallowed
// the unwinding of a goroutine its runtime is ending; it ends at its next
// goro call. A goro::exit() swallowed outside that changes nothing.
inline goexit_unwind::~goexit_unwind() {  // main_return: see goexit.hpp
  if (!original) return;
  g* gp = current_g();
  if (!gp || gp->exiting.load(std::memory_order_relaxed) != exit_state::unwinding) return;
  gp->exiting.store(gp->sched->ending() ? exit_state::killed : exit_state::none, std::memory_order_relaxed);
}


#if GORO_EXCEPTIONS
// libstdc++ and libc++abi both start __cxa_eh_globals with these two fields.
struct cxa_eh_globals {
  void* caught_exceptions;
  unsigned int uncaught_exceptions;
};
// Non-inlined for the same reason as current_m(): __cxa_get_globals is
// declared const, so the compiler would reuse one thread's result after
// a switch that migrated the goroutine.
#if !GORO_COMPILE_RUNTIME
cxa_eh_globals* eh_globals() noexcept;
#else
GORO_NOINLINE GORO_DECL cxa_eh_globals* eh_globals() noexcept {
  asm volatile("" ::: "memory");
  return reinterpret_cast<cxa_eh_globals*>(abi::__cxa_get_globals());
}
#endif
#endif

// Goroutine side, just before switching out: stash the goroutine's
// exception state so the next goroutine on this thread starts clean.
GORO_ALWAYS_INLINE void save_goroutine_state(m_base* m, g* gp) noexcept {
#if GORO_EXCEPTIONS
  auto* e = static_cast<cxa_eh_globals*>(m->eh);
  if (GORO_UNLIKELY(e == nullptr)) m->eh = e = eh_globals();
  gp->eh_caught = e->caught_exceptions;
  gp->eh_uncaught = e->uncaught_exceptions;
  e->caught_exceptions = nullptr;
  e->uncaught_exceptions = 0;
#else
  (void)m;
  (void)gp;
#endif
}

// The run() caller's own exception state while its thread serves as an M
// (run() may be called inside a catch block or by a destructor during
// unwinding). Set aside on entry, so the invariant holds that a thread's
// state is empty whenever g0 runs (every goroutine empties it as it
// switches out, save_goroutine_state): goroutine_resumed then restores a
// goroutine's state only when it has one, and g0 <-> goroutine switches
// stay free of extra work. Put back on the way out; on the exceptional way
// out the exception in flight is counted on top.
struct thread_eh_scope {
#if GORO_EXCEPTIONS
  void* caught;
  unsigned uncaught;
  thread_eh_scope() noexcept {
    cxa_eh_globals* e = eh_globals();
    caught = e->caught_exceptions;
    uncaught = e->uncaught_exceptions;
    e->caught_exceptions = nullptr;
    e->uncaught_exceptions = 0;
  }
  ~thread_eh_scope() {
    cxa_eh_globals* e = eh_globals();
    if (e->caught_exceptions == nullptr) e->caught_exceptions = caught;
    e->uncaught_exceptions += uncaught;
  }
#else
  thread_eh_scope() noexcept {}
#endif
  thread_eh_scope(const thread_eh_scope&) = delete;
  thread_eh_scope& operator=(const thread_eh_scope&) = delete;
};

// Goroutine side, first thing after (re)entry, possibly on another thread.
// `from` is what the switch returned: nullptr when g0 resumed gp, the M
// when another goroutine switched to gp directly (switch_g_to_g); then gp
// finishes that goroutine's hand-off.
GORO_ALWAYS_INLINE void goroutine_resumed(g* gp, void* from) noexcept {
#if GORO_ASAN
  if (from) {
    __sanitizer_finish_switch_fiber(gp->asan_fake_stack, nullptr, nullptr);  // came from a goroutine, not g0
  } else {
    m_base* m = current_m();
    __sanitizer_finish_switch_fiber(gp->asan_fake_stack, &m->g0_stack_bottom, &m->g0_stack_size);
  }
#endif
#if GORO_EXCEPTIONS
  if (gp->eh_caught || gp->eh_uncaught) {
    cxa_eh_globals* e = eh_globals();
    e->caught_exceptions = gp->eh_caught;
    e->uncaught_exceptions = gp->eh_uncaught;
  }
#else
  (void)gp;
#endif
  if (GORO_UNLIKELY(from != nullptr)) {
    auto* m = static_cast<m_base*>(from);
    m->sched->direct_switch_done(m);
  }
}

// Goroutine side: switch to this M's g0, which will act on m->after. Returns
// when some M runs the goroutine again. The sanitizer calls and the switch
// stay in one frame (TSan requires it).
GORO_ALWAYS_INLINE void switch_to_g0(m_base* m, g* gp) noexcept {
  save_goroutine_state(m, gp);
#if GORO_ASAN
  __sanitizer_start_switch_fiber(m->after == after_switch::exit ? nullptr : &gp->asan_fake_stack, m->g0_stack_bottom,
                                 m->g0_stack_size);
#endif
#if GORO_TSAN
  __tsan_switch_to_fiber(m->g0_tsan_fiber, 0);
#endif
  // The switch's kind (m->fp_shared, context.hpp raw_switch) is picked
  // here rather than through raw_switch, in all three switches below: at
  // -O0 an inlined wrapper's parameters take stack, and the yield path
  // then outgrew a 2 KiB goroutine stack (stack_test, meson-clang step).
  void* from = m->fp_shared ? goro_v0_1_switch_nofp(&gp->sp, m->g0_sp, nullptr)
                            : goro_v0_1_switch(&gp->sp, m->g0_sp, nullptr);
  goroutine_resumed(gp, from);
}

// Goroutine side: switch from gp straight to next (yield's fast path, see
// scheduler::gosched), without going through g0. The caller has done
// execute()'s bookkeeping for next (m->curg is next already) and set
// m->after, so that nothing treats the M as idle or gp as switchable
// meanwhile; gp is queued only by next, once gp is off its stack
// (direct_switch_done, from goroutine_resumed). Returns when some M runs
// gp again. The sanitizer calls and the switch stay in one frame.
GORO_ALWAYS_INLINE void switch_g_to_g(m_base* m, g* gp, g* next) noexcept {
  save_goroutine_state(m, gp);
#if GORO_ASAN
  __sanitizer_start_switch_fiber(&gp->asan_fake_stack, next->stack.lo, next->stack.size);
#endif
#if GORO_TSAN
  __tsan_switch_to_fiber(next->tsan_fiber, 0);
#endif
  void* from = m->fp_shared ? goro_v0_1_switch_ret_nofp(&gp->sp, next->sp, m)
                            : goro_v0_1_switch_ret(&gp->sp, next->sp, m);
  goroutine_resumed(gp, from);
}

// g0 side: run gp until it switches back.
GORO_ALWAYS_INLINE void switch_to_g(m_base* m, g* gp) noexcept {
#if GORO_ASAN
  __sanitizer_start_switch_fiber(&m->g0_asan_fake_stack, gp->stack.lo, gp->stack.size);
#endif
#if GORO_TSAN
  __tsan_switch_to_fiber(gp->tsan_fiber, 0);
#endif
  if (m->fp_shared)  // nullptr: resumed by g0 (goroutine_resumed)
    goro_v0_1_switch_nofp(&m->g0_sp, gp->sp, nullptr);
  else
    goro_v0_1_switch(&m->g0_sp, gp->sp, nullptr);
#if GORO_ASAN
  __sanitizer_finish_switch_fiber(m->g0_asan_fake_stack, nullptr, nullptr);
#endif
}

// Parks the calling goroutine (Go's gopark). Once it is off its stack, g0
// calls unlock(arg): typically releasing the lock of the wait queue the
// goroutine just joined, so a waker can only ready it after it stopped
// running. If unlock returns false the goroutine is resumed at once.
// `why` is what the goroutine dump shows (Go's waitReason). Always
// inlined: it is a handful of stores before the switch, and out of line
// (GCC's choice once `why` was added) it cost a channel round trip ~5%
// of its instructions (benchmark pingpong, callgrind).
GORO_ALWAYS_INLINE void park(m_base* m, bool (*unlock)(void*), void* arg, wait_reason why = wait_reason::other) noexcept {
  GORO_CHAOS_POINT("gopark");
  g* gp = m->curg;
  gp->waiting_on.store(why, std::memory_order_relaxed);
  gp->wait_since.store(0, std::memory_order_relaxed);  // stamped later (dump.hpp)
  m->after = after_switch::park;
  m->park_unlock = unlock;
  m->park_arg = arg;
  switch_to_g0(m, gp);
}

// Runs fn(arg) on the M's own stack (Go's systemstack) when called from a
// goroutine, whose stack may be tiny; directly otherwise. For deep,
// rare work such as creating a thread.
inline void on_g0(void (*fn)(void*), void* arg) {
  m_base* m = current_m();
  if (!m || !m->curg) {
    fn(arg);
    return;
  }
  m->after = after_switch::call;
  m->g0_call = fn;
  m->g0_arg = arg;
  switch_to_g0(m, m->curg);
}

}  // namespace goro::detail
