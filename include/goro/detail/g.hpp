// G: a goroutine. Its closure lives inline in the G record when it fits,
// and its stack is attached only when it first runs, so a million spawned
// but not yet started goroutines cost a million small records, not stacks.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../stack.hpp"
#include "../os/os.hpp"
#include "config.hpp"
#include "memory.hpp"
#include "wait_reason.hpp"

namespace goro::detail {

class sched_base;
struct m_base;
class runtime_memory;
// The runtime's allocator (m.hpp): a closure too big for the G record is
// stored out of line there.
runtime_memory* sched_memory(const sched_base* s) noexcept;

enum class g_status : std::uint32_t {
  idle,      // in a free list
  runnable,  // in a run queue
  running,   // on an M
  waiting,   // parked (channel, wait_group, ...)
  dead,      // finished, about to be recycled
};

inline constexpr std::size_t closure_inline_size = 64;

// Thrown by goro::exit() to unwind the calling goroutine (destructors run);
// caught at the goroutine's entry. Not a std::exception: code that catches
// (...) must rethrow it. Also what ends the goroutines still alive when the
// main goroutine returns (main_return.hpp): a handler that swallows it
// (catch (...) without rethrow) only delays that goroutine's end to its
// next goro call, where it is thrown again (see ~goexit_unwind there).
struct goexit_unwind {
  goexit_unwind() noexcept = default;
  // A copy (a catch by value) is not the exception in flight: only the
  // original's end means the unwinding was swallowed.
  goexit_unwind(const goexit_unwind&) noexcept : original(false) {}
  goexit_unwind& operator=(const goexit_unwind&) noexcept { return *this; }
  ~goexit_unwind();  // main_return.hpp
  bool original = true;
};

// main_return.hpp: how far a goroutine is in being ended after main returned.
enum class exit_state : std::uint8_t {
  none,       // not asked to end
  killed,     // woken from its wait to end (or its unwinding was swallowed): unwinds at its next goro call
  unwinding,  // goexit_unwind thrown (or ended without it): its goro calls behave normally
};

struct alignas(64) g {
  // The first cache line holds what a switch touches (a yield through a
  // run queue of a thousand goroutines misses the cache on every other
  // line it reads).
  void* sp = nullptr;    // saved context while not running
  stack_memory stack{};  // lo == nullptr: no stack yet
  bool stack_canary = false;  // no guard region: a canary at stack.lo is checked at each switch
  std::atomic<g_status> status{g_status::idle};
  // C++ exception-handling globals of this goroutine while it is switched
  // out (an exception being handled across a switch, uncaught_exceptions()).
  void* eh_caught = nullptr;
  unsigned eh_uncaught = 0;
  bool is_main = false;
  // sysmon's request to yield at the next safe point. Written by sysmon
  // (another thread), so atomic; see preempt.hpp for who sets and clears it.
  std::atomic<bool> preempt{false};
  // goroutine dump (dump.hpp): set while a dump reads this G's stack; an M
  // about to resume the G waits for it to clear (see dump_resume_check).
  std::atomic<bool> dump_pin{false};
  // goroutine dump: why the G waits (written by the G itself as it parks,
  // read by a dump from another thread); the time is in wait_since.
  std::atomic<wait_reason> waiting_on{wait_reason::none};
  // lockosthread: the M this G is wired to (Go's lockedm) and the nesting
  // count of lock_os_thread calls (Go's lockedExt). Both are written only
  // by the G itself while it runs on that M, except that an M which must
  // leave (the run() caller, see scheduler::leave) clears lockedm under the
  // scheduler lock; lockedm is read by whichever M dequeues the G, hence
  // atomic (relaxed: the queue hand-off orders it). lock_count is read by
  // the goroutine dump (", locked to thread"), hence atomic too (relaxed).
  std::atomic<m_base*> lockedm{nullptr};
  std::uint64_t id = 0;
  sched_base* sched = nullptr;
  g* link = nullptr;  // intrusive link: run queues, free lists
  std::atomic<std::uint32_t> lock_count{0};
  // async preemption: depth of goro::async_preemptible scopes. Written by
  // the goroutine only; read by sysmon and by the SIGURG handler.
  std::atomic<std::uint32_t> async_scope{0};

  // The closure: closure_op(self, true) runs it then destroys it (also when
  // unwinding); closure_op(self, false) only destroys it.
  void (*closure_op)(g*, bool run) = nullptr;
  void* heap_closure = nullptr;
  // goroutine dump: when the current wait began, 0 until stamped. Parking
  // reads no clock: it stores 0, and the dump thread stamps waiting Gs
  // about once a second (dump.hpp), as Go's GC sets waitsince. Next to
  // `sched`, which the waker reads anyway.
  std::atomic<std::int64_t> wait_since{0};
  alignas(std::max_align_t) unsigned char inline_closure[closure_inline_size];

  // While parked on a channel or sync object's queue: takes this G's
  // waiter record(s) off it, for a runtime destroyed with the G blocked
  // forever (the objects may outlive the runtime; the records are on the
  // G's stack). Set by the park site (park.hpp block) before parking,
  // cleared once it resumes. Also how the runtime wakes a parked goroutine
  // to end it after main returned (main_return.hpp, with the G pinned):
  // true if it took the G off its
  // wait (nobody else will ready it: the caller owns the wake-up), false
  // if a waker got there first. Sleep and I/O waits set one too (their
  // timer or poll descriptor); a wait on an object destroyed meanwhile
  // gets orphaned_wait (nothing left to unlink) or nullptr (a select: its
  // other channels' queues are unreachable safely).
  bool (*unlink_wait)(void*) noexcept = nullptr;
  void* unlink_arg = nullptr;

  void* tsan_fiber = nullptr;       // ThreadSanitizer fiber, kept across reuse
  void* asan_fake_stack = nullptr;  // AddressSanitizer fake-stack handle while switched out

  // goroutine dump: the pc in the function that called go() ("created by");
  // written at spawn, read only by a dump: a cold line. id, sched and this
  // are written with set_dump_field (below).
  const void* created_pc = nullptr;
  // spawn_options::stack_size as a size class (runtime.hpp stack_class);
  // 0: the policy's stack. Set by every spawn (and run() for main), read
  // when the stack is attached.
  std::uint32_t stack_request = 0;

  // main_return.hpp: ending this goroutine after main returned. exit_state
  // is written by the goroutine and by the runtime's killer (while the G is
  // pinned and parked); no_kill is set by the G around a wait the killer
  // must leave alone (rw_mutex: the wake-up hands over the lock), and
  // around goro calls that cannot unwind (goexit.hpp no_unwind_scope),
  // where its goro calls do not end it either.
  std::atomic<exit_state> exiting{exit_state::none};
  bool no_kill = false;
  // tracer: the flow (arrow) that ends at this G's next run slice, set by
  // the waker or creator while a trace runs (tracing.hpp); 0: none.
  std::uint64_t trace_flow = 0;
};
// g::unlink_wait of a waiter whose queue was destroyed while it waited.
inline bool orphaned_wait(void*) noexcept { return true; }

// Serializes the destruction of a wait queue that still holds goroutines
// (which rewrites their unlink_wait) with a killer calling unlink_wait
// (main_return.hpp). Taken only on those rare paths.
inline std::mutex& unlink_lock() noexcept {
  static std::mutex m;
  return m;
}

static_assert(offsetof(g, lockedm) + sizeof(g::lockedm) <= 64, "g: the fields a switch touches share one cache line");

// Fields of a G that a goroutine dump reads from another thread while the
// record may exit and be reused by a spawn meanwhile (id, sched,
// created_pc): their writes and the dump's reads are relaxed atomic
// accesses, so a dump sees the previous or the next incarnation's value (it
// names the goroutine it saw), never a torn one, and ThreadSanitizer sees
// no race. A relaxed store is a plain store on every target: spawn pays
// nothing. Reads by the G's owner need no atomic: the queue hand-off orders
// them after the write.
template <class T>
GORO_ALWAYS_INLINE void set_dump_field(T& field, std::type_identity_t<T> v) noexcept {
  std::atomic_ref<T>(field).store(v, std::memory_order_relaxed);
}
template <class T>
GORO_ALWAYS_INLINE T dump_field(T& field) noexcept {
  return std::atomic_ref<T>(field).load(std::memory_order_relaxed);
}

// goroutine dump: an M has just set gp's status to running and is about to
// resume it. A dump pins a G (dump_pin), then runs membarrier() (a fence on
// every thread of the process) and only then reads its status: so either
// the dump sees `running` and leaves the G alone, or this check sees the
// pin and waits until the dump has read the G's stack. The asymmetric
// fence keeps this side to a compiler barrier and one load of a line the
// switch touches anyway (dump.hpp owns the other half).
GORO_NOINLINE inline void dump_pin_wait(g* gp) noexcept {
  while (gp->dump_pin.load(std::memory_order_acquire)) os::yield_thread();
}
GORO_ALWAYS_INLINE void dump_resume_check(g* gp) noexcept {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (GORO_UNLIKELY(gp->dump_pin.load(std::memory_order_acquire))) dump_pin_wait(gp);
}

// Calls a closure's callable (element 0) with its arguments, moved. A
// named function, not a generic lambda under std::apply: the goroutine
// dump names inlined frames from their mangled names, and
// abi::__cxa_demangle (GCC 12) cannot read a generic lambda's.
template <class Bound, std::size_t... I>
void call_bound(Bound& b, std::index_sequence<I...>) {
  std::invoke(std::move(std::get<0>(b)), std::move(std::get<I + 1>(b))...);
}

// Stores the callable and its arguments in gp (decay-copied, as std::thread).
template <class F, class... A>
void set_closure(g* gp, F&& f, A&&... args) {
  using bound = std::tuple<std::decay_t<F>, std::decay_t<A>...>;
  static_assert(std::is_invocable_v<std::decay_t<F>, std::decay_t<A>...>,
                "goro::go: the function cannot be called with these arguments");
  constexpr bool fits = sizeof(bound) <= closure_inline_size && alignof(bound) <= alignof(std::max_align_t);
  if constexpr (fits) {
    ::new (static_cast<void*>(gp->inline_closure)) bound(std::forward<F>(f), std::forward<A>(args)...);
  } else {
    runtime_memory* mem = sched_memory(gp->sched);
    void* p = memory_allocate(mem, sizeof(bound), alignof(bound));
    GORO_TRY { ::new (p) bound(std::forward<F>(f), std::forward<A>(args)...); }
    GORO_CATCH_ALL {
      memory_deallocate(mem, p, sizeof(bound), alignof(bound));
      GORO_RETHROW;
    }
    gp->heap_closure = p;
  }
  gp->closure_op = [](g* self, bool run) {
    bound* b;
    if constexpr (fits)
      b = std::launder(reinterpret_cast<bound*>(self->inline_closure));
    else
      b = static_cast<bound*>(self->heap_closure);
    struct destroy {
      g* self;
      bound* b;
      ~destroy() {
        b->~bound();
        if constexpr (!fits) memory_deallocate(sched_memory(self->sched), b, sizeof(bound), alignof(bound));
        self->heap_closure = nullptr;
        self->closure_op = nullptr;
      }
    } guard{self, b};
    if (run) call_bound(*b, std::make_index_sequence<sizeof...(A)>{});
  };
}

}  // namespace goro::detail
