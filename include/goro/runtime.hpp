// The runtime (basic_runtime, run) and the calls a goroutine makes on its
// own runtime (go, yield, exit, ...).
#pragma once

#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "detail/config.hpp"
#include "detail/g.hpp"
#include "detail/goexit.hpp"
#include "detail/inside_blocking.hpp"
#include "detail/m.hpp"
#include "detail/preempt.hpp"
#include "detail/runtime_stats.hpp"
#include "dump.hpp"  // current_pc: the goroutine dump's "created by"
#include "error.hpp"
#include "policy.hpp"

namespace goro {

// What happens to the goroutines still alive when the main goroutine
// (run()'s f) returns (docs/api.md, "When main returns").
enum class main_return {
  // Go's "main returns, the program's goroutines end": each one unwinds at
  // its current or next goro call as if it had called goro::exit()
  // (destructors run); one not started yet is discarded; run() returns
  // once they have ended. One that reaches no goro call for 1 s is
  // reported on stderr with the goroutine dump, and waited for.
  unwind,
  // The runtime serves until every goroutine has finished (its destructor
  // waits for them; run() returns when main does).
  wait,
};

struct options {
  unsigned maxprocs = 0;  // 0: env GORO_MAXPROCS, else the CPUs this process may use
  // While run() is active, throw deadlock_error from run() once every
  // goroutine is blocked with nothing inside the runtime able to wake one
  // (no timer, no I/O, no blocking() call) and nothing outside either: no
  // plain thread that used a goro object is alive (a live external M), and
  // nothing came from outside for a grace period of 250 ms (docs/api.md,
  // "Deadlock detection"). Off: run() waits as long as it takes.
  bool detect_deadlock = true;
  // When main returns: end the other goroutines (unwind) or wait for them.
  // Also what the destructor does with goroutines started by go() while no
  // run() was active.
  main_return on_main_return = main_return::unwind;
  // The most Ms (threads running goroutines) this runtime may have at
  // once, the run() caller included while it runs the scheduler (from
  // run()'s start until main finishes; with no run() active only the
  // runtime's own Ms count): past it the program ends with "goro: program
  // exceeds N-thread limit" (Go's SetMaxThreads; a runaway of goroutines
  // stuck in goro::blocking is the usual cause). At least 1.
  unsigned max_threads = 10000;
  // Makes every thread the runtime starts (its Ms, sysmon, the thread that
  // ends goroutines after main returned): it must return a joinable
  // std::thread running the function it is given, and may throw
  // std::system_error when it cannot. Empty: the runtime creates them.
  std::function<std::thread(std::function<void()>)> thread_factory{};
  // Those threads are named "<thread_name>-m<N>", "<thread_name>-sysmon",
  // "<thread_name>-ender" (cut to Linux's 15 bytes; gdb, top, /proc). An
  // empty name means "goro".
  std::string thread_name = "goro";
  // The main goroutine's stack (run()'s f) with the default stack
  // allocator: reserved, committed as touched, with a guard region below,
  // like a thread's. At least 64 KiB. (A custom stack_allocator gives main
  // the policy's stack_size, as any goroutine.)
  std::size_t main_stack_size = 8 << 20;
};

// Options of one goroutine: goro::go(goro::spawn_options{...}, f, args...).
struct spawn_options {
  // Its stack, in bytes: rounded up to a power of two, between 2 KiB and
  // 1 GiB. 0: the policy's stack_size.
  std::size_t stack_size = 0;
};

namespace detail {

// The scheduler of a basic_runtime<Policy> (detail/sched.hpp). Under
// GORO_SEPARATE_COMPILATION it is compiled once: the implementation file
// instantiates it for default_policy, and GORO_INSTANTIATE_RUNTIME(P) there
// for any other policy P a program uses.
template <class Policy>
sched_base* new_scheduler(const options& o, const ::goro::policy_allocator_t<Policy>& a);

// A usage_error: `call` was made outside a goroutine.
#if !GORO_COMPILE_RUNTIME
[[noreturn]] void raise_outside_goroutine(const char* call);
#else
[[noreturn]] GORO_NOINLINE GORO_DECL void raise_outside_goroutine(const char* call) {
  raise_usage((std::string(call) + " called outside a goroutine").c_str());
}
#endif

// The calling goroutine's M, or a usage_error naming `call`.
inline m_base* require_goroutine(const char* call) {
  m_base* m = current_m();
  if (GORO_UNLIKELY(!m || !m->curg)) raise_outside_goroutine(call);
  return m;
}

// lockosthread: run_main wires main to the caller's thread until main's
// closure starts (Go's runtime.main does the same during init); unwire it
// here unless main locked itself meanwhile (it cannot have: nothing ran).
inline void release_main_lock() noexcept {
  m_base* m = current_m();
  g* gp = m->curg;
  if (m->keeps_main) return;  // async preemption: main stays wired (see m_base::keeps_main)
  if (gp->lock_count.load(std::memory_order_relaxed) == 0 && gp->lockedm.load(std::memory_order_relaxed) == m) {
    gp->lockedm.store(nullptr, std::memory_order_relaxed);
    m->lockedg = nullptr;
  }
}

// spawn_options::stack_size as the size class the stack comes from: the
// next power of two (so a program asking for many sizes makes few free
// lists and slabs), 0 for 0. Outside [min_stack_size, 1 GiB]: a usage_error.
inline std::uint32_t stack_class(std::size_t bytes) {
  if (bytes == 0) return 0;
  constexpr std::size_t max_bytes = std::size_t{1} << 30;  // Go's maxstacksize on 64-bit
  if (bytes < min_stack_size || bytes > max_bytes)
    raise_usage(("spawn_options::stack_size must be between " + std::to_string(min_stack_size) +
                 " bytes and 1 GiB, got " + std::to_string(bytes))
                    .c_str());
  return static_cast<std::uint32_t>(std::bit_ceil(bytes));
}

// newproc on `s`: a G record, the closure, then queue it. created_pc:
// where go() was called (the goroutine dump's "created by"); stack_request:
// stack_class(spawn_options::stack_size).
template <class F, class... A>
void spawn(sched_base* s, const void* created_pc, std::uint32_t stack_request, F&& f, A&&... args) {
  g* gp = s->alloc_g();
  set_dump_field(gp->created_pc, created_pc);
  gp->stack_request = stack_request;
  GORO_TRY { set_closure(gp, std::forward<F>(f), std::forward<A>(args)...); }
  GORO_CATCH_ALL {
    s->free_g(gp);
    GORO_RETHROW;
  }
  GORO_TRY { s->start_g(gp); }
  GORO_CATCH_ALL {
    gp->closure_op(gp, false);
    s->free_g(gp);
    GORO_RETHROW;
  }
}

}  // namespace detail

class thread_lane;  // lane.hpp

template <class Policy = default_policy>
class basic_runtime {
  friend class thread_lane;  // its goroutines are this runtime's

  static_assert(detail::check_policy<Policy>());

 public:
  using policy_type = Policy;
  using allocator_type = ::goro::policy_allocator_t<Policy>;

  explicit basic_runtime(options o = {}) : basic_runtime(std::move(o), default_allocator()) {}
  // With the runtime's one copy of the policy's allocator (goro::allocator<A>):
  // every allocation the runtime makes comes from copies of it (docs/policies.md).
  basic_runtime(options o, const allocator_type& a) : sched_(detail::new_scheduler<Policy>(o, a)) {}

  // With main_return::unwind, ends the goroutines still alive as run()
  // does when main returns (goroutines started by go() with no run()
  // active); with main_return::wait, waits for every goroutine to finish.
  // Then goroutines that can never run again are reported ("goro: N
  // goroutines blocked forever at shutdown") and released without running.
  ~basic_runtime() = default;

  basic_runtime(const basic_runtime&) = delete;
  basic_runtime& operator=(const basic_runtime&) = delete;

  // Runs f as the main goroutine, the calling thread serving as an M, and
  // returns its result; an exception escaping f propagates out of run().
  // Main starts on the calling thread (lock_os_thread() keeps it there).
  // Throws deadlock_error when every goroutine is blocked for good (see
  // options::detect_deadlock); main is then left blocked and released by
  // the destructor. When main returns (or throws), the other goroutines
  // end before run() returns, or are left running (options::on_main_return).
  template <class F>
  std::invoke_result_t<F> run(F&& f) {
    using R = std::invoke_result_t<F>;
    using stored = std::conditional_t<std::is_reference_v<R>, std::reference_wrapper<std::remove_reference_t<R>>, R>;
    [[maybe_unused]] std::optional<std::conditional_t<std::is_void_v<R>, char, stored>> result;
    std::exception_ptr error;
    bool exited = true;
    auto set_main = [&](detail::g* gp) {
      detail::set_closure(gp, [&] {
        detail::release_main_lock();  // lockosthread: see run_main
#if GORO_EXCEPTIONS
        try {
#endif
          if constexpr (std::is_void_v<R>)
            std::invoke(std::forward<F>(f));
          else
            result.emplace(std::invoke(std::forward<F>(f)));
          exited = false;
#if GORO_EXCEPTIONS
        } catch (const detail::goexit_unwind&) {
        } catch (...) {
          error = std::current_exception();
          exited = false;
        }
#endif
      });
    };
    sched_->run_main([](detail::g* gp, void* set) { (*static_cast<decltype(set_main)*>(set))(gp); }, &set_main);
#if GORO_EXCEPTIONS
    if (error) std::rethrow_exception(error);
#endif
    if constexpr (!std::is_void_v<R>) {
      if (exited) detail::raise_usage("the main goroutine called exit() before returning a value from run()");
      if constexpr (std::is_reference_v<R>)
        return static_cast<R>(result->get());
      else
        return std::move(*result);
    }
  }

  // Starts a goroutine from any thread (inside this runtime it runs next on
  // the caller's P; from elsewhere it goes to the global run queue).
  // Always inlined: the goroutine dump's "created by" is the caller.
  template <class F, class... A>
    requires(!std::is_same_v<std::remove_cvref_t<F>, spawn_options>)
  GORO_ALWAYS_INLINE void go(F&& f, A&&... args) {
    detail::spawn(sched_.get(), detail::current_pc(), 0, std::forward<F>(f), std::forward<A>(args)...);
  }
  // The same with per-goroutine options (its stack size).
  template <class F, class... A>
  GORO_ALWAYS_INLINE void go(const spawn_options& o, F&& f, A&&... args) {
    detail::spawn(sched_.get(), detail::current_pc(), detail::stack_class(o.stack_size), std::forward<F>(f),
                  std::forward<A>(args)...);
  }

  // Returns the number of Ps; with n > 0, sets it to n (at most 4096) and
  // returns the previous one. Works from any thread, at any time: when it
  // shrinks the runtime it returns once the removed Ps' goroutines have
  // moved to the remaining ones (see docs/api.md).
  unsigned gomaxprocs(unsigned n = 0) { return n == 0 ? sched_->procs() : sched_->resize_procs(n); }

  std::size_t num_goroutine() const noexcept { return sched_->live_goroutines(); }
  runtime_stats stats() const noexcept { return sched_->stats(); }

 private:
  static allocator_type default_allocator() {
    static_assert(std::is_default_constructible_v<allocator_type>,
                  "goro policy: allocator_type is not default-constructible: pass one to "
                  "basic_runtime(options, allocator)");
    return allocator_type();
  }

  std::unique_ptr<detail::sched_base, detail::sched_delete> sched_;
};

using runtime = basic_runtime<>;

// runtime{o}.run(f): with main_return::unwind (the default) the other
// goroutines end when f returns; with main_return::wait the runtime's
// destructor (and so this call) waits for every goroutine.
template <class F>
std::invoke_result_t<F> run(F&& f, options o = {}) {
  runtime rt{std::move(o)};
  return rt.run(std::forward<F>(f));
}

// ---- calls made from inside a goroutine, on its own runtime ----

// Wires the calling goroutine to its current OS thread (Go's
// LockOSThread): until as many unlock_os_thread() calls, it runs only on
// this thread and the thread runs no other goroutine; when it blocks, the
// thread sleeps. Calls nest. A goroutine that ends while locked takes its
// thread with it (the thread exits instead of running other goroutines;
// the run() caller's thread sits out until run() returns). In run()'s main
// goroutine it keeps main on the thread that called run(). See
// docs/lock_os_thread.md.
inline void lock_os_thread() {
  detail::m_base* m = detail::require_goroutine("lock_os_thread()");
  detail::g* gp = m->curg;
  const std::uint32_t n = gp->lock_count.load(std::memory_order_relaxed);
  if (GORO_UNLIKELY(n == UINT32_MAX)) detail::raise_usage("lock_os_thread(): nested too deeply");
  gp->lock_count.store(n + 1, std::memory_order_relaxed);  // only this goroutine writes it
  // Written by the goroutine on its own M; read by the M that dequeues it
  // later, after the queue hand-off (which orders these stores).
  gp->lockedm.store(m, std::memory_order_relaxed);
  m->lockedg = gp;
}

// Undoes one lock_os_thread(); at zero the goroutine may run anywhere
// again. A no-op if it is not locked (as in Go).
inline void unlock_os_thread() {
  detail::m_base* m = detail::require_goroutine("unlock_os_thread()");
  detail::g* gp = m->curg;
  const std::uint32_t n = gp->lock_count.load(std::memory_order_relaxed);
  if (n == 0) return;
  gp->lock_count.store(n - 1, std::memory_order_relaxed);
  if (n != 1) return;
  if (m->keeps_main && gp->is_main) return;  // async preemption: main stays wired (see m_base::keeps_main)
  gp->lockedm.store(nullptr, std::memory_order_relaxed);
  if (m->lockedg == gp) m->lockedg = nullptr;
}

// A cheap cooperative preemption check for long loops: if sysmon asked the
// calling goroutine to yield (it ran a whole time slice), it yields to the
// global run queue. The fast path is one relaxed load of a process-wide
// counter and a branch (no TLS access, see detail/preempt.hpp); a no-op
// outside goroutines and with preemption::none. A goro call: once main has
// returned (main_return::unwind) the goroutine ends here (goexit_unwind).
GORO_ALWAYS_INLINE void preempt_point() {
  detail::call_point();
}

// A scope in which the calling goroutine may be preempted asynchronously
// (policy preemption::signal): when its time slice runs out, sysmon sends
// SIGURG to its thread and the goroutine yields wherever it is, even in a
// loop without any runtime call (docs/preemption.md). Inside the scope the
// goroutine promises to hold no lock and to call nothing that takes one —
// no malloc/new, no std::mutex, no goro call other than preempt_point():
// preempted while holding a lock, it could block the goroutine that runs
// next on the same thread. Nestable. In the other modes, under TSan, and
// outside a goroutine it does nothing (no error: code may be shared with
// plain threads). The async-preempted goroutine resumes on the same thread.
class async_preemptible {
 public:
  async_preemptible() noexcept : g_(detail::current_g()) {
    if (g_) g_->async_scope.store(g_->async_scope.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    // The scope's edges are compiler barriers: no lock or call is moved into it.
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  ~async_preemptible() {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (g_) g_->async_scope.store(g_->async_scope.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  }
  async_preemptible(const async_preemptible&) = delete;
  async_preemptible& operator=(const async_preemptible&) = delete;

 private:
  detail::g* g_;
};

// Starts a goroutine on the calling goroutine's runtime; it runs next on
// this P (the caller keeps running).
// Always inlined: the goroutine dump's "created by" is the caller.
template <class F, class... A>
  requires(!std::is_same_v<std::remove_cvref_t<F>, spawn_options>)
GORO_ALWAYS_INLINE void go(F&& f, A&&... args) {
  detail::m_base* m = detail::require_goroutine("go()");
  detail::spawn(m->sched, detail::current_pc(), 0, std::forward<F>(f), std::forward<A>(args)...);
  preempt_point();  // a runtime call: honour a pending preemption request
}

// The same with per-goroutine options: goro::go(goro::spawn_options{.stack_size = 8 * 1024}, f, args...)
// gives this goroutine a stack of at least 8 KiB whatever the policy's.
template <class F, class... A>
GORO_ALWAYS_INLINE void go(const spawn_options& o, F&& f, A&&... args) {
  detail::m_base* m = detail::require_goroutine("go()");
  detail::spawn(m->sched, detail::current_pc(), detail::stack_class(o.stack_size), std::forward<F>(f),
                std::forward<A>(args)...);
  preempt_point();
}

// Gosched: puts the calling goroutine on the global run queue and runs
// another.
inline void yield() {
  detail::m_base* m = detail::require_goroutine("yield()");
  if (GORO_UNLIKELY(m->in_blocking)) detail::raise_inside_blocking("yield()");  // no P to give up
  detail::call_point();  // main_return (detail/goexit.hpp), before and after
  m = detail::current_m();  // call_point may have switched: TLS rule (DESIGN.md section 7)
  m->sched->gosched(m);
  detail::call_point();
}

// Goexit: unwinds the calling goroutine (destructors run) and ends it.
// Without exceptions the goroutine ends at once and destructors of its
// frames do not run.
[[noreturn]] inline void exit() {
  detail::m_base* m = detail::require_goroutine("exit()");
#if !GORO_EXCEPTIONS
  if (GORO_UNLIKELY(m->in_blocking)) detail::raise_inside_blocking("exit()");  // no P to switch on
#endif
  detail::end_goroutine(m->curg);  // unwinding: its destructors' goro calls behave normally
}

inline std::size_t num_goroutine() { return detail::require_goroutine("num_goroutine()")->sched->live_goroutines(); }

// GOMAXPROCS: the number of Ps of the caller's runtime; n > 0 sets it
// (returns the previous value), like basic_runtime::gomaxprocs.
inline unsigned gomaxprocs(unsigned n = 0) {
  detail::sched_base* s = detail::require_goroutine("gomaxprocs()")->sched;
  return n == 0 ? s->procs() : s->resize_procs(n);
}

// CPUs this process may run on (works anywhere).
GORO_DECL unsigned num_cpu() noexcept;

namespace this_goroutine {
// The calling goroutine's id (the main goroutine of the first run() is 1).
inline std::uint64_t id() { return detail::require_goroutine("this_goroutine::id()")->curg->id; }
// Whether the caller is a goroutine (works anywhere).
inline bool inside() noexcept { return detail::current_g() != nullptr; }
}  // namespace this_goroutine

}  // namespace goro

// Separate compilation: the implementation file compiles the scheduler of
// every policy the program's runtimes use; default_policy's here, others
// with GORO_INSTANTIATE_RUNTIME(Policy) after including goro.hpp.
#define GORO_INSTANTIATE_RUNTIME(...)                                               \
  template ::goro::detail::sched_base* ::goro::detail::new_scheduler<__VA_ARGS__>( \
      const ::goro::options&, const ::goro::policy_allocator_t<__VA_ARGS__>&)

#if GORO_COMPILE_RUNTIME
#include "detail/sched.hpp"
#endif
