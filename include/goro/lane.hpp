// goro::thread_lane (SPEC "Engine embedding"): goroutines of a runtime
// that only ever run on one thread the program owns -- an engine's main
// or render thread -- pumped by that thread from its frame loop.
//
// How: the owner thread, inside run_for / run_until_idle, is a small M
// of its own with no P (a lane_m: m_base only). Its scheduler context
// (g0) is the run_for frame, so a lane goroutine that parks, yields or
// exits switches back there, and the lane carries out the request as a
// runtime M's g0 would (sched_loop.hpp execute). The goroutine's g::sched
// and the lane M's m_base::sched point at a lane_sched, one per (lane,
// runtime): it forwards everything to the runtime except ready(), which
// puts the goroutine back on its lane's queue -- so every waker (a
// channel op on any thread, a timer, the network poller, the runtime
// ending its goroutines) brings it back to its lane, with no check on the
// runtime's hot paths. To the runtime the lane thread is a thread that is
// not one of its Ms: a goroutine a lane goroutine spawns goes to the
// runtime's Ps; its timers go on the runtime's heaps.
//
// What a lane goroutine does not get: preemption (no P, no time slice:
// it runs until it blocks, yields or ends; run_for's budget is checked
// between resumptions) and the execution tracer's events.
//
// Deadlock detection: a lane counts as a live external M (extm.hpp) for
// its whole life, since its owner may pump it -- and so wake goroutines
// of any runtime -- at any time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "detail/config.hpp"
#include "detail/extm.hpp"
#include "detail/g.hpp"
#include "detail/m.hpp"
#include "detail/sanitizer.hpp"
#include "detail/signals.hpp"  // check_stack_canary
#include "detail/spinlock.hpp"
#include "detail/timer_heap.hpp"  // nanotime
#include "error.hpp"
#include "os/os.hpp"
#include "runtime.hpp"

namespace goro {

class thread_lane;

namespace detail {

class lane_state;

// Separate compilation: lane_state and lane_sched are the runtime's (their
// bodies, the adapter's vtable and its vector are compiled once); a
// thread_lane reaches them through these.
GORO_DECL sched_base* lane_adapter(lane_state* st, sched_base* rt);  // adapter_for
GORO_DECL void lane_started(lane_state* st, g* gp) noexcept;         // counted live, queued


}  // namespace detail

class thread_lane {
 public:
  // Bound to the calling thread, which alone may pump it; it is not an M
  // of any runtime.
  GORO_DECL thread_lane();

  // A usage_error while lane goroutines are alive (they would never run
  // again): pump the lane until they have finished first.
  GORO_DECL ~thread_lane() noexcept(false);

  thread_lane(const thread_lane&) = delete;
  thread_lane& operator=(const thread_lane&) = delete;

  // Starts f(args...) as a goroutine of rt that only ever runs on this
  // lane's thread. From any thread. Goroutines it spawns with goro::go run
  // on rt's Ps.
  template <class Rt, class F, class... A>
    requires(!std::is_same_v<std::remove_cvref_t<F>, spawn_options>)
  GORO_ALWAYS_INLINE void go(Rt& rt, F&& f, A&&... args) {
    spawn(rt.sched_.get(), detail::current_pc(), 0, std::forward<F>(f), std::forward<A>(args)...);
  }
  // The same with per-goroutine options (its stack size).
  template <class Rt, class F, class... A>
  GORO_ALWAYS_INLINE void go(Rt& rt, const spawn_options& o, F&& f, A&&... args) {
    spawn(rt.sched_.get(), detail::current_pc(), detail::stack_class(o.stack_size), std::forward<F>(f),
          std::forward<A>(args)...);
  }

  // On the owner thread, outside any goroutine: runs the lane's ready
  // goroutines, in FIFO order, each until it blocks, yields or ends, until
  // none is ready or `budget` has passed (checked between resumptions;
  // one runs even with a zero budget). Returns the number of resumptions;
  // at once, 0, when none is ready.
  std::size_t run_for(std::chrono::nanoseconds budget) {
    const std::int64_t b = budget.count() < 0 ? 0 : budget.count();
    const std::int64_t now = detail::nanotime();
    return pump(b > INT64_MAX - now ? INT64_MAX : now + b, "run_for");
  }
  // run_for without a budget: until no lane goroutine is ready (one that
  // keeps yielding keeps it running).
  std::size_t run_until_idle() { return pump(INT64_MAX, "run_until_idle"); }

  // Lane goroutines not finished yet.
  GORO_DECL std::size_t goroutines() const noexcept;

 private:
  template <class F, class... A>
  void spawn(detail::sched_base* rt, const void* created_pc, std::uint32_t stack_request, F&& f, A&&... args) {
    detail::sched_base* ls = detail::lane_adapter(st_.get(), rt);
    detail::g* gp = rt->alloc_g();
    detail::set_dump_field(gp->created_pc, created_pc);
    gp->stack_request = stack_request;
    GORO_TRY { detail::set_closure(gp, std::forward<F>(f), std::forward<A>(args)...); }
    GORO_CATCH_ALL {
      rt->free_g(gp);
      GORO_RETHROW;
    }
    GORO_TRY { rt->start_lane_g(gp, ls); }
    GORO_CATCH_ALL {
      gp->closure_op(gp, false);
      rt->free_g(gp);
      GORO_RETHROW;
    }
    detail::lane_started(st_.get(), gp);
  }

  GORO_DECL std::size_t pump(std::int64_t deadline, const char* call);  // call: named in misuse errors
  GORO_DECL detail::g* resume(detail::g* gp) noexcept;

  std::unique_ptr<detail::lane_state> st_;
};

}  // namespace goro

#if GORO_COMPILE_RUNTIME
namespace goro {
namespace detail {

// What a lane goroutine's g::sched, and the lane M's m_base::sched while
// it runs one, point at: one per (lane, runtime).
class lane_sched final : public sched_base {
 public:
  lane_sched(lane_state* lane, sched_base* rt) noexcept : lane_(lane), rt_(rt) { bind(); }
  sched_base* rt() const noexcept { return rt_; }
  // What it copies from the runtime at rt_ now. A runtime destroyed (with
  // no lane goroutine left) and another made at its address, perhaps of
  // another policy, finds this adapter: it took the dead one's switches
  // and allocator. Written only when they differ (no goroutine of this
  // adapter runs then), so that a live runtime's lane.go races no reader.
  void bind() noexcept {
    if (ending_flag != &rt_->ending_goroutines) ending_flag = &rt_->ending_goroutines;  // main_return
    if (memory != rt_->memory) memory = rt_->memory;              // a closure stored out of line is freed there
    if (fp_shared != rt_->fp_shared) fp_shared = rt_->fp_shared;  // its goroutines switch as the runtime's do
  }

  void ready(g* gp) noexcept override;  // back onto the lane's queue (below)

  // A lane goroutine's goro::go, timers, sockets, ...: the runtime's.
  g* alloc_g() override { return rt_->alloc_g(); }
  void free_g(g* gp) noexcept override { rt_->free_g(gp); }
  void start_g(g* gp) override { rt_->start_g(gp); }
  void add_timer(timer* t) override { rt_->add_timer(t); }
  netpoller* poller() noexcept override { return rt_->poller(); }
  std::size_t live_goroutines() const noexcept override { return rt_->live_goroutines(); }
  runtime_stats stats() const noexcept override { return rt_->stats(); }
  unsigned procs() const noexcept override { return rt_->procs(); }
  unsigned resize_procs(unsigned n) override { return rt_->resize_procs(n); }
  sched_base* runtime() noexcept override { return rt_; }
  const void* lane_owner() const noexcept override;
  void run_main(void (*)(g*, void*), void*) override { raise_usage("run() on a thread_lane"); }

  // goro::blocking: no P to hand off; the lane's thread makes the call
  // (a goro wait inside it is a usage_error, as on any M: docs/blocking.md).
  void enter_syscall(bool) noexcept override { current_m()->in_blocking = true; }
  void exit_syscall() noexcept override { current_m()->in_blocking = false; }
  // goro::yield: to the back of the lane's queue (run_for).
  void gosched(m_base* m) noexcept override {
    m->after = after_switch::yield;
    switch_to_g0(m, m->curg);
  }
  void direct_switch_done(m_base*) noexcept override {
    fatal("goro: internal error: a direct switch on a thread_lane");
  }

 private:
  lane_state* lane_;
  sched_base* rt_;
};

// The owner thread's alternate signal stack (a stack overflow's SIGSEGV
// needs one), shared by that thread's lanes: the first installs it, the
// last destroyed there removes it. One per lane took it from the thread's
// other lanes when the lane that had installed it went first (their
// overflows were a bare SIGSEGV). Trivially destructible: a lane may be
// destroyed after its thread's thread_local destructors ran.
struct lane_altstack {
  unsigned users = 0;
  os::thread_altstack* stack = nullptr;
};
inline lane_altstack& lane_altstack_here() noexcept {
  static thread_local lane_altstack a;
  return a;
}

// A lane's queue, adapters and M. Heap-allocated: a lane destroyed with
// goroutines alive (a usage_error) leaves it behind for their wakers.
class lane_state {
 public:
  lane_state() : owner(std::this_thread::get_id()), owner_lanes(lanes_owned_here()) {
    // The owner must be a thread that can pump: not one of a runtime's Ms
    // (a goroutine's thread, which it may leave; run_for inside a goroutine
    // is refused). Such a lane could never run its goroutines, and as a
    // live external M it kept checkdead from ever reporting a deadlock. A
    // lane goroutine's thread is its lane's owner: a plain thread, fine.
    if (m_base* m = current_m(); m && m->sched && m->sched->lane_owner() == nullptr)
      raise_usage(
          "thread_lane created inside a goroutine: its thread is a runtime's, which never pumps it (create the "
          "lane on the thread that will call run_for)");
    lane_altstack& a = lane_altstack_here();
    if (a.users == 0) a.stack = new os::thread_altstack();
    ++a.users;
    owner_lanes->fetch_add(1, std::memory_order_seq_cst);  // checkdead: not while the owner is in run()
    extm_hold(true);  // checkdead: the owner may pump (and wake) at any time
  }
  ~lane_state() {
    // Another thread cannot touch the owner's signal stack: it stays.
    if (lane_altstack& a = lane_altstack_here(); std::this_thread::get_id() == owner && --a.users == 0)
      delete std::exchange(a.stack, nullptr);
    uncount();
  }
  // checkdead: this lane can no longer be pumped (destroyed, or its
  // thread_lane destroyed with goroutines alive: this state is then left
  // for their wakers and never destroyed). Once only.
  void uncount() noexcept {
    if (std::exchange(uncounted_, true)) return;
    owner_lanes->fetch_sub(1, std::memory_order_seq_cst);
    extm_hold(false);
  }
  lane_state(const lane_state&) = delete;
  lane_state& operator=(const lane_state&) = delete;

  // Runnable lane goroutines, FIFO through g::link (a lane goroutine is
  // on no other queue or free list).
  void push(g* gp) noexcept {
    gp->status.store(g_status::runnable, std::memory_order_relaxed);
    gp->link = nullptr;
    lock.lock();
    if (tail)
      tail->link = gp;
    else
      head = gp;
    tail = gp;
    queued.store(queued.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    lock.unlock();
  }
  g* pop() noexcept {
    if (queued.load(std::memory_order_relaxed) == 0) return nullptr;  // a hint: checked again under the lock
    lock.lock();
    g* gp = head;
    if (gp) {
      head = gp->link;
      if (!head) tail = nullptr;
      gp->link = nullptr;
      queued.store(queued.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    }
    lock.unlock();
    return gp;
  }

  lane_sched* adapter_for(sched_base* rt) {
    std::lock_guard<std::mutex> lk(adapters_lock);
    for (auto& a : adapters)
      if (a->rt() == rt) {
        a->bind();
        return a.get();
      }
    adapters.push_back(std::make_unique<lane_sched>(this, rt));
    return adapters.back().get();
  }

  const std::thread::id owner;
  const std::shared_ptr<lane_count> owner_lanes;  // the owner's count (extm.hpp)
  spinlock lock;  // head, tail
  g* head = nullptr;
  g* tail = nullptr;
  std::atomic<std::size_t> queued{0};  // written under lock; read without it as a hint
  std::atomic<std::size_t> live{0};    // lane goroutines not finished
  m_base m;                            // the owner's M while it pumps
  std::mutex adapters_lock;
  std::vector<std::unique_ptr<lane_sched>> adapters;

 private:
  bool uncounted_ = false;  // by the thread_lane's destructor (its owner's, or the one destroying it)
};

inline void lane_sched::ready(g* gp) noexcept { lane_->push(gp); }
inline const void* lane_sched::lane_owner() const noexcept { return lane_->owner_lanes.get(); }

}  // namespace detail

namespace detail {
GORO_DECL sched_base* lane_adapter(lane_state* st, sched_base* rt) { return st->adapter_for(rt); }
GORO_DECL void lane_started(lane_state* st, g* gp) noexcept {
  st->live.fetch_add(1, std::memory_order_relaxed);
  st->push(gp);
}
}  // namespace detail

GORO_DECL thread_lane::thread_lane() : st_(std::make_unique<detail::lane_state>()) {}

GORO_DECL thread_lane::~thread_lane() noexcept(false) {
  if (!st_) return;
  const std::size_t n = st_->live.load(std::memory_order_acquire);
  if (n == 0) return;
  // Left for their wakers (see lane_state). Nobody can pump it now: it is
  // no external M any more (it kept every run() from reporting a deadlock).
  st_->uncount();
  (void)st_.release();
  const std::string what = "thread_lane destroyed with " + std::to_string(n) +
                           " goroutine(s) alive (run it until they have finished)";
  if (std::uncaught_exceptions() != 0) detail::fatal(("goro: " + what).c_str());
  detail::raise_usage(what.c_str());
}

GORO_DECL std::size_t thread_lane::goroutines() const noexcept { return st_->live.load(std::memory_order_acquire); }

GORO_DECL std::size_t thread_lane::pump(std::int64_t deadline, const char* call) {
  detail::lane_state& st = *st_;
  if (std::this_thread::get_id() != st.owner)
    detail::raise_usage(
        (std::string("thread_lane::") + call + " called on a thread other than the one that created the lane").c_str());
  if (detail::current_m() != nullptr)
    detail::raise_usage((std::string("thread_lane::") + call + " called inside a goroutine").c_str());
  detail::g* gp = st.pop();
  if (!gp) return 0;
  detail::thread_eh_scope caller_eh;  // the caller's exception state is not the goroutines'
  st.m.g0_tsan_fiber = detail::tsan_current_fiber();
  detail::set_current_m(&st.m);
  std::size_t n = 0;
  for (;;) {
    ++n;
    gp = resume(gp);  // a G to resume at once, if any
    if (gp) continue;
    if (detail::nanotime() >= deadline) break;
    gp = st.pop();
    if (!gp) break;
  }
  detail::set_current_m(nullptr);
  return n;
}

// Runs gp until it switches out, then carries out its request (the lane's
// execute, see sched_loop.hpp).
GORO_DECL detail::g* thread_lane::resume(detail::g* gp) noexcept {
  using detail::after_switch;
  using detail::g_status;
  detail::m_base& m = st_->m;
  gp->status.store(g_status::running, std::memory_order_relaxed);
  detail::dump_resume_check(gp);  // goroutine dump
  m.curg = gp;
  m.sched = gp->sched;
  m.fp_shared = gp->sched->fp_shared;  // the kind of switch of gp's runtime, both ways
  detail::switch_to_g(&m, gp);
  m.curg = nullptr;
  detail::check_stack_canary(gp);
  const after_switch what = m.after;
  m.after = after_switch::none;
  switch (what) {
    case after_switch::yield:
    case after_switch::preempt:
      st_->push(gp);
      return nullptr;
    case after_switch::park: {
      gp->status.store(g_status::waiting, std::memory_order_release);
      auto unlock = std::exchange(m.park_unlock, nullptr);
      if (unlock && !unlock(m.park_arg)) {
        gp->status.store(g_status::running, std::memory_order_relaxed);
        return gp;  // the park was called off: resume it at once
      }
      return nullptr;  // gp may be readied, queued and even run by now
    }
    case after_switch::exit: {
      detail::sched_base* rt = static_cast<detail::lane_sched*>(gp->sched)->rt();
      rt->lane_g_exit(gp);
      // After: a thread that sees 0 may destroy rt.
      st_->live.fetch_sub(1, std::memory_order_release);
      return nullptr;
    }
    case after_switch::call:
      m.g0_call(m.g0_arg);
      return gp;
    default:
      detail::fatal("goro: internal error: a thread_lane goroutine switched out with an unexpected request");
  }
}

}  // namespace goro
#endif  // GORO_COMPILE_RUNTIME
