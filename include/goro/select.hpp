// goro::select: Go's select statement (mirror src/runtime/select.go,
// selectgo).
//
//   goro::select(goro::on_recv(a, [](std::optional<int> v) {...}),
//                goro::on_send(b, 42, [] {...}),
//                goro::on_default([] {...}));   // returns the index that ran
//
// selectgo in four steps:
//   1. a random poll order (uniform permutation) and a lock order (the
//      channels by address, each channel once however many cases name it);
//   2. lock every channel; the first case in poll order that can proceed
//      runs -- so the choice is uniform among the ready cases; else the
//      default case if there is one;
//   3. else queue a waiter on every case, all sharing one select_state:
//      the first channel operation to claim it wins, later ones skip this
//      select's waiters; park (or sleep) while g0 releases the locks;
//   4. woken: lock every channel again, take the losing waiters off their
//      queues (their memory is on our stack: no waker may still look at
//      them once we hold all the locks), unlock.
// The winning case's callable runs last, outside every lock.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>

#include "chan.hpp"
#include "detail/config.hpp"
#include "detail/random.hpp"

namespace goro {

namespace detail {

// A uniform random number in [0, n) from a per-thread generator. Read
// through a non-inlined function (DESIGN.md 7: no thread_local address may
// be cached across a switch); the whole update happens inside it.
GORO_NOINLINE inline std::uint32_t select_rand(std::uint32_t n) noexcept {
  asm volatile("" ::: "memory");
  static thread_local std::uint64_t seed = 0;  // constant-initialized: no TLS guard
  static thread_local fast_rand rng(0);
  if (GORO_UNLIKELY(seed == 0)) {
    seed = reinterpret_cast<std::uintptr_t>(&seed) * 0x9e3779b97f4a7c15ull | 1;
    rng = fast_rand(seed);
  }
  return rng.below(n);
}

using poll_fn = chan_op (*)(chan_core*, void* elem, chan_waiter*& partner) noexcept;

// One channel case, type-erased.
struct select_case {
  chan_core* c;
  void* elem;  // send: T*; receive: std::optional<T>*
  poll_fn poll;
  bool is_send;
};

// The channels of a select, locked in address order, each once: `order`
// holds case indices sorted by channel address (cases on the same channel
// adjacent), so a channel is skipped when it equals its predecessor.
struct select_locks {
  const select_case* sc;
  const std::uint16_t* order;
  std::size_t n;
  void lock_all() const noexcept {
    for (std::size_t i = 0; i < n; ++i)
      if (i == 0 || sc[order[i]].c != sc[order[i - 1]].c) sc[order[i]].c->lock.lock();
  }
  bool unlock_all() const noexcept {
    for (std::size_t i = n; i-- > 0;)
      if (i == 0 || sc[order[i]].c != sc[order[i - 1]].c) sc[order[i]].c->lock.unlock();
    return true;
  }
};

// selectgo. pollorder, lockorder and waiters have room for n entries
// each. Returns the chosen case (n: the default case) and sets send_closed
// when that case is a send on a closed channel (the caller raises, outside
// every lock).
//
// Lifetimes: the waiters and `locks` live in this frame. While parked, g0
// releases the locks in reverse address order and reads nothing of ours
// after the last release; the woken goroutine's lock_all() starts at the
// lowest address, so it cannot proceed (and return) before that release.
// A waker that finds a waiter of ours holds that waiter's channel lock, and
// pass 3 takes every lock before it returns: no waiter is used after it.
GORO_DECL std::size_t select_go(select_case* sc, std::size_t n, bool has_default, std::uint16_t* pollorder,
                             std::uint16_t* lockorder, chan_waiter* waiters, bool& send_closed);

}  // namespace detail

namespace detail {
// The cases of the variadic select, built by on_recv / on_send / on_default.
// A T whose move may throw travels boxed (detail::chan_elem, chan.hpp).
// `keep`: the handle an arm was made from when that was a temporary (see
// on_recv), else nil: an arm made from a handle does not copy it (no
// reference count touched per select).
template <class T, class F>
struct recv_arm {
  hchan<chan_elem<T>>* c;  // nullptr: a nil channel (never chosen)
  F f;
  std::optional<detail::chan_elem<T>> slot{};
  recv_chan<T> keep{};
};
template <class T, class F>
struct send_arm {
  hchan<chan_elem<T>>* c;
  chan_elem<T> value;
  F f;
  recv_chan<T> keep{};
  // An arm kept in a variable (select sees an lvalue) may be selected
  // again, and then sends its value again, as Go evaluates a case anew each
  // time: each select offers a copy staged here, and `value` stays. A
  // move-only value is staged itself, once (spent: then the arm is off, as
  // on a nil channel; select_case does the same).
  std::optional<chan_elem<T>> staged{};
  bool spent = false;
};
template <class F>
struct default_arm {
  F f;
};
}  // namespace detail

// Receives from ch; f(std::optional<T>) gets nullopt when ch is closed and drained.
template <class T, class A, class F>
detail::recv_arm<T, std::decay_t<F>> on_recv(const chan<T, A>& ch, F&& f) {
  static_assert(std::is_invocable_v<std::decay_t<F>&, std::optional<T>>,
                "goro::on_recv: the callable must accept std::optional<T>");
  return {ch.impl(), std::forward<F>(f)};
}
template <class T, class F>
detail::recv_arm<T, std::decay_t<F>> on_recv(const recv_chan<T>& ch, F&& f) {
  static_assert(std::is_invocable_v<std::decay_t<F>&, std::optional<T>>,
                "goro::on_recv: the callable must accept std::optional<T>");
  return {ch.impl(), std::forward<F>(f)};
}
// From a temporary handle (on_recv(goro::after(d), f)) the arm holds the
// handle: an arm kept in a variable must not outlive its channel (after()'s
// is freed once its timer fired and the last handle went).
template <class T, class A, class F>
detail::recv_arm<T, std::decay_t<F>> on_recv(chan<T, A>&& ch, F&& f) {
  auto arm = on_recv(std::as_const(ch), std::forward<F>(f));
  arm.keep = std::move(ch);
  return arm;
}
template <class T, class F>
detail::recv_arm<T, std::decay_t<F>> on_recv(recv_chan<T>&& ch, F&& f) {
  auto arm = on_recv(std::as_const(ch), std::forward<F>(f));
  arm.keep = std::move(ch);
  return arm;
}
// Sends value on ch, then runs f(). On a closed channel: goro::channel_closed.
template <class T, class A, class V, class F>
detail::send_arm<T, std::decay_t<F>> on_send(const chan<T, A>& ch, V&& value, F&& f) {
  static_assert(std::is_invocable_v<std::decay_t<F>&>, "goro::on_send: the callable must take no arguments");
  if constexpr (detail::chan_boxed<T>)
    return {ch.impl(), std::make_unique<T>(std::forward<V>(value)), std::forward<F>(f)};
  else
    return {ch.impl(), T(std::forward<V>(value)), std::forward<F>(f)};
}
template <class T, class A, class V, class F>
detail::send_arm<T, std::decay_t<F>> on_send(chan<T, A>&& ch, V&& value, F&& f) {
  auto arm = on_send(std::as_const(ch), std::forward<V>(value), std::forward<F>(f));
  arm.keep = std::move(ch);
  return arm;
}
// Runs when no other case is ready: the select does not block.
template <class F>
detail::default_arm<std::decay_t<F>> on_default(F&& f) {
  static_assert(std::is_invocable_v<std::decay_t<F>&>, "goro::on_default: the callable must take no arguments");
  return {std::forward<F>(f)};
}

namespace detail {

template <class C>
struct case_traits {
  static constexpr bool is_case = false;
};
template <class T, class F>
struct case_traits<recv_arm<T, F>> {
  static constexpr bool is_case = true, is_default = false;
  template <bool Reused>
  static select_case erase(recv_arm<T, F>& rc) noexcept {
    rc.slot.reset();  // an arm selected before: a close must leave it empty (nullopt), not with the last value
    return {rc.c, &rc.slot, &hchan<chan_elem<T>>::poll_recv, false};
  }
  static void run(recv_arm<T, F>& rc) {
    if constexpr (chan_boxed<T>)
      rc.f(chan_unbox<T>(std::move(rc.slot)));
    else
      rc.f(std::move(rc.slot));
  }
};
template <class T, class F>
struct case_traits<send_arm<T, F>> {
  static constexpr bool is_case = true, is_default = false;
  // Reused: the arm is an lvalue, which may be selected again (send_arm).
  template <bool Reused>
  static select_case erase(send_arm<T, F>& s) {
    if constexpr (!Reused) {
      return {s.c, &s.value, &hchan<chan_elem<T>>::poll_send, true};
    } else {
      if (!s.staged) {
        if constexpr (!std::is_copy_constructible_v<T>) {
          if (s.spent) return {nullptr, nullptr, &hchan<chan_elem<T>>::poll_send, true};  // off
          s.staged.emplace(std::move(s.value));
          s.spent = true;
        } else if constexpr (chan_boxed<T>) {
          s.staged.emplace(std::make_unique<T>(*s.value));
        } else {
          s.staged.emplace(s.value);
        }
      }
      return {s.c, &*s.staged, &hchan<chan_elem<T>>::poll_send, true};
    }
  }
  static void run(send_arm<T, F>& s) {
    s.staged.reset();  // sent (moved from); a staged value not sent stays for the next select
    s.f();
  }
};
template <class F>
struct case_traits<default_arm<F>> {
  static constexpr bool is_case = true, is_default = true;
  static void run(default_arm<F>& d) { d.f(); }
};

}  // namespace detail

// Go's select: runs exactly one case and returns its index among the
// arguments. Blocks (parks, or sleeps on a plain thread) until a case is
// ready unless there is an on_default case. Uniform among ready cases.
class select_case;

template <class... Cases>
  requires(!(sizeof...(Cases) == 1 && (std::is_convertible_v<Cases, std::span<select_case>> && ...)))
std::size_t select(Cases&&... cases) {
  static_assert(sizeof...(Cases) > 0, "goro::select: give at least one case");
  static_assert((true && ... && detail::case_traits<std::remove_cvref_t<Cases>>::is_case),
                "goro::select: arguments must be goro::on_recv / on_send / on_default cases");
  // Folds with an initial value: an empty select reports only the assertion above.
  constexpr std::size_t ndefault =
      (std::size_t{0} + ... + std::size_t{detail::case_traits<std::remove_cvref_t<Cases>>::is_default});
  static_assert(ndefault <= 1, "goro::select: at most one on_default case");
  constexpr std::size_t n = sizeof...(Cases) - ndefault;
  static_assert(n < 65536, "goro::select: too many cases");

  // Channel cases in argument order (default skipped); arg_index maps back.
  std::array<detail::select_case, n == 0 ? 1 : n> sc;
  std::array<std::size_t, n == 0 ? 1 : n> arg_index;
  std::size_t default_index = sizeof...(Cases);
  {
    std::size_t ai = 0, ci = 0;
    auto add = [&]<class C>(C&& c) {
      using traits = detail::case_traits<std::remove_cvref_t<C>>;
      if constexpr (traits::is_default) {
        default_index = ai;
      } else {
        sc[ci] = traits::template erase<std::is_lvalue_reference_v<C>>(c);
        arg_index[ci++] = ai;
      }
      ++ai;
    };
    (add(std::forward<Cases>(cases)), ...);
  }

  std::size_t chosen;  // argument index
  if constexpr (n == 0) {
    chosen = default_index;
  } else {
    std::array<std::uint16_t, n> pollorder{};  // select_go reads pollorder[live] before writing it when j == live
    std::array<std::uint16_t, n> lockorder{};  // {}: GCC -O2 for AArch64 warns maybe-uninitialized (falsely: the sort reads only slots it wrote)
    std::array<detail::chan_waiter, n> waiters;
    bool send_closed = false;
    std::size_t k =
        detail::select_go(sc.data(), n, ndefault != 0, pollorder.data(), lockorder.data(), waiters.data(), send_closed);
    if (send_closed) detail::raise_send_closed();
    chosen = k == n ? default_index : arg_index[k];
  }

  // Run the chosen case's callable, outside every lock.
  std::size_t ai = 0;
  auto run = [&](auto& c) {
    if (ai++ == chosen) detail::case_traits<std::remove_cvref_t<decltype(c)>>::run(c);
  };
  (run(cases), ...);
  return chosen;
}

// A select case made at run time (Go's reflect.SelectCase): recv_case,
// send_case or default_case, run by select(std::span<select_case>) --
// fan-in over a vector of channels. A case may be selected over again and
// again: a receive case hands f each value it receives; a send case sends
// a copy of its value each time it is chosen (a move-only value is sent
// once, after which the case is off, like a case on a nil channel).
class select_case {
 public:
  select_case(select_case&&) noexcept = default;
  select_case& operator=(select_case&&) noexcept = default;

 private:
  struct impl {
    virtual ~impl() = default;
    // Readies the case for one select: the operation it offers (c nullptr:
    // never chosen).
    virtual detail::select_case prepare() = 0;
    virtual void run() = 0;  // it was chosen
  };
  // A case holds its channel, as Go's SelectCase holds its Chan: it may
  // outlive the handle it was made from (recv_case(goro::after(d), f) kept
  // in a vector: that channel's other owner, after()'s timer, lets go once
  // it fired). A recv_chan<T> is a handle to any chan<T, Alloc>.
  template <class T, class F>
  struct recv_impl final : impl {
    using elem = detail::chan_elem<T>;  // boxed when T's move may throw (chan.hpp)
    recv_impl(recv_chan<T> ch, F fn) : h(std::move(ch)), c(h.impl()), f(std::move(fn)) {}
    recv_chan<T> h;  // keeps *c alive
    detail::hchan<elem>* c;
    F f;
    std::optional<elem> slot;
    detail::select_case prepare() override {
      slot.reset();
      return {c, &slot, &detail::hchan<elem>::poll_recv, false};
    }
    void run() override {
      std::optional<elem> v = std::move(slot);
      slot.reset();
      if constexpr (detail::chan_boxed<T>)
        f(detail::chan_unbox<T>(std::move(v)));
      else
        f(std::move(v));
    }
  };
  template <class T, class F>
  struct send_impl final : impl {
    using elem = detail::chan_elem<T>;  // boxed when T's move may throw (chan.hpp)
    send_impl(recv_chan<T> ch, T v, F fn) : h(std::move(ch)), c(h.impl()), value(std::move(v)), f(std::move(fn)) {}
    recv_chan<T> h;  // keeps *c alive (see recv_impl)
    detail::hchan<elem>* c;
    T value;                     // what each send sends a copy of (moved into staged when T is move-only)
    std::optional<elem> staged;  // the value offered to this select
    bool spent = false;          // a move-only value was sent
    F f;
    template <class V>
    void stage(V&& v) {
      if constexpr (detail::chan_boxed<T>)
        staged.emplace(std::make_unique<T>(std::forward<V>(v)));
      else
        staged.emplace(std::forward<V>(v));
    }
    detail::select_case prepare() override {
      if (!staged) {
        if constexpr (std::is_copy_constructible_v<T>) {
          stage(value);
        } else if (!spent) {
          stage(std::move(value));
          spent = true;
        } else {
          return {nullptr, nullptr, &detail::hchan<elem>::poll_send, true};
        }
      }
      return {c, &*staged, &detail::hchan<elem>::poll_send, true};
    }
    void run() override {
      staged.reset();  // sent: moved from
      f();
    }
  };
  template <class F>
  struct default_impl final : impl {
    explicit default_impl(F fn) : f(std::move(fn)) {}
    F f;
    detail::select_case prepare() override { return {}; }
    void run() override { f(); }
  };

  select_case(std::unique_ptr<impl> p, bool is_default) noexcept : p_(std::move(p)), default_(is_default) {}

  std::unique_ptr<impl> p_;
  bool default_ = false;

  template <class T, class A, class F>
  friend select_case recv_case(const chan<T, A>& ch, F&& f);
  template <class T, class F>
  friend select_case recv_case(const recv_chan<T>& ch, F&& f);
  template <class T, class A, class V, class F>
  friend select_case send_case(const chan<T, A>& ch, V&& value, F&& f);
  template <class F>
  friend select_case default_case(F&& f);
  friend GORO_DECL std::size_t select(std::span<select_case> cases);
};

// A run-time case receiving from ch (nil: never chosen); f(std::optional<T>)
// gets nullopt when ch is closed and drained.
template <class T, class A, class F>
select_case recv_case(const chan<T, A>& ch, F&& f) {
  static_assert(std::is_invocable_v<std::decay_t<F>&, std::optional<T>>,
                "goro::recv_case: the callable must accept std::optional<T>");
  return {std::make_unique<select_case::recv_impl<T, std::decay_t<F>>>(recv_chan<T>(ch), std::forward<F>(f)), false};
}
template <class T, class F>
select_case recv_case(const recv_chan<T>& ch, F&& f) {
  static_assert(std::is_invocable_v<std::decay_t<F>&, std::optional<T>>,
                "goro::recv_case: the callable must accept std::optional<T>");
  return {std::make_unique<select_case::recv_impl<T, std::decay_t<F>>>(ch, std::forward<F>(f)), false};
}
// A run-time case sending value on ch, then running f(). On a closed
// channel, choosing it raises goro::channel_closed.
template <class T, class A, class V, class F>
select_case send_case(const chan<T, A>& ch, V&& value, F&& f) {
  static_assert(std::is_invocable_v<std::decay_t<F>&>, "goro::send_case: the callable must take no arguments");
  return {std::make_unique<select_case::send_impl<T, std::decay_t<F>>>(recv_chan<T>(ch), T(std::forward<V>(value)),
                                                                       std::forward<F>(f)),
          false};
}
// A run-time default case: chosen when no other case is ready.
template <class F>
select_case default_case(F&& f) {
  static_assert(std::is_invocable_v<std::decay_t<F>&>, "goro::default_case: the callable must take no arguments");
  return {std::make_unique<select_case::default_impl<std::decay_t<F>>>(std::forward<F>(f)), true};
}

// Go's reflect.Select: the variadic select's semantics over a run-time
// list of cases; returns the index of the case that ran. At most one
// default case; no channel case (or only nil ones) and no default blocks
// forever, as Go's `select {}`.
GORO_DECL std::size_t select(std::span<select_case> cases);

}  // namespace goro

namespace goro::detail {
// select(span)'s working arrays, one entry per channel case. Up to
// inline_cases on the stack (no allocation: a run-time select of a few
// cases, the usual one, costs what the variadic select does); beyond, one
// block from the calling goroutine's runtime allocator (memory.hpp;
// operator new on a plain thread).
struct select_scratch {
  static constexpr std::size_t inline_cases = 8;
  select_case* sc;
  std::size_t* arg_index;
  std::uint16_t* pollorder;
  std::uint16_t* lockorder;
  chan_waiter* waiters;
};

struct select_scratch_stack {
  select_case sc[select_scratch::inline_cases];
  std::size_t arg_index[select_scratch::inline_cases];
  std::uint16_t pollorder[select_scratch::inline_cases], lockorder[select_scratch::inline_cases];
  chan_waiter waiters[select_scratch::inline_cases];
  select_scratch s{sc, arg_index, pollorder, lockorder, waiters};
};

class select_scratch_heap {
 public:
  explicit select_scratch_heap(std::size_t n) : n_(n) {
    m_base* m = current_m();
    mem_ = m && m->sched ? m->sched->memory : nullptr;
    // waiters first (the strictest alignment), then the others by size.
    static_assert(alignof(chan_waiter) >= alignof(select_case) && alignof(select_case) >= alignof(std::size_t));
    block_ = static_cast<unsigned char*>(memory_allocate(mem_, bytes(), alignof(chan_waiter)));
    unsigned char* at = block_;
    s.waiters = reinterpret_cast<chan_waiter*>(at);
    std::uninitialized_value_construct_n(s.waiters, n);  // noexcept constructors
    at += n * sizeof(chan_waiter);
    s.sc = reinterpret_cast<select_case*>(at);
    at += n * sizeof(select_case);
    s.arg_index = reinterpret_cast<std::size_t*>(at);
    at += n * sizeof(std::size_t);
    s.pollorder = reinterpret_cast<std::uint16_t*>(at);
    s.lockorder = s.pollorder + n;
  }
  ~select_scratch_heap() {
    std::destroy_n(s.waiters, n_);
    memory_deallocate(mem_, block_, bytes(), alignof(chan_waiter));
  }
  select_scratch_heap(const select_scratch_heap&) = delete;
  select_scratch_heap& operator=(const select_scratch_heap&) = delete;
  select_scratch s{};

 private:
  std::size_t bytes() const noexcept {
    return n_ * (sizeof(chan_waiter) + sizeof(select_case) + sizeof(std::size_t) + 2 * sizeof(std::uint16_t));
  }
  std::size_t n_;
  runtime_memory* mem_;
  unsigned char* block_;
};
}  // namespace goro::detail

#if GORO_COMPILE_RUNTIME
namespace goro {

GORO_DECL std::size_t detail::select_go(select_case* sc, std::size_t n, bool has_default, std::uint16_t* pollorder,
                             std::uint16_t* lockorder, chan_waiter* waiters, bool& send_closed) {
  call_point();  // a runtime call that can switch (detail/preempt.hpp, detail/goexit.hpp)
  send_closed = false;
  // Poll order: inside-out Fisher-Yates (Go's pollorder) over the cases
  // whose channel is not nil: a case on a nil channel is never chosen (Go
  // leaves it out of pollorder, so it is neither polled nor queued on).
  std::size_t live = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!sc[i].c) continue;
    std::size_t j = select_rand(static_cast<std::uint32_t>(live + 1));
    pollorder[live] = pollorder[j];
    pollorder[j] = static_cast<std::uint16_t>(i);
    ++live;
  }
  // Go's `select {}`: every case is on a nil channel.
  if (live == 0 && !has_default) block_forever_nil("select", wait_reason::select_no_cases);
  // Lock order: the cases sorted by channel address with a stable
  // insertion sort (n is small) started from the poll order, so cases on
  // one channel keep a random relative order -- pass 2 queues them in
  // this order (as Go's heap sort "starts with the pollorder").
  for (std::size_t i = 0; i < live; ++i) {
    std::uint16_t k = pollorder[i];
    std::size_t j = i;
    while (j > 0 &&
           reinterpret_cast<std::uintptr_t>(sc[lockorder[j - 1]].c) > reinterpret_cast<std::uintptr_t>(sc[k].c)) {
      lockorder[j] = lockorder[j - 1];
      --j;
    }
    lockorder[j] = k;
  }
  select_locks locks{sc, lockorder, live};
  locks.lock_all();

  // Pass 1: the first ready case in poll order.
  for (std::size_t i = 0; i < live; ++i) {
    std::size_t k = pollorder[i];
    chan_waiter* partner = nullptr;
    chan_op r = sc[k].poll(sc[k].c, sc[k].elem, partner);
    if (r == chan_op::blocked) continue;
    locks.unlock_all();
    if (partner) wake_chan_waiter(partner);
    send_closed = r == chan_op::closed;
    return k;
  }
  if (has_default) {
    locks.unlock_all();
    return n;
  }

  // Pass 2: wait on every case.
  select_state st;
  caller self = current_caller();
  if (GORO_UNLIKELY(inside_blocking(self.m))) {
    locks.unlock_all();
    raise_inside_blocking("select");
  }
  g* gp = self.gp;
  for (std::size_t i = 0; i < live; ++i) {
    std::size_t k = lockorder[i];
    chan_waiter& w = waiters[k];
    w.gp = gp;
    w.elem = sc[k].elem;
    w.sel = &st;
    w.success = false;
    (sc[k].is_send ? sc[k].c->sendq : sc[k].c->recvq).push_back(&w);
  }
  struct queued {  // block's unlink: every case's waiter off its queue
    select_case* sc;
    std::size_t n;
    chan_waiter* waiters;
    select_state* st;
  } at{sc, n, waiters, &st};
  GORO_CHAOS_POINT("chan.block");
  block(
      self.m, gp, st.woken, [](void* l) { return static_cast<select_locks*>(l)->unlock_all(); }, &locks,
      [](void* a) noexcept {
        auto* x = static_cast<queued*>(a);
        // Claimed as a case's waker would (dequeue): if one got there
        // first, it owns the wake-up. Otherwise no case can win any more.
        std::uint32_t expected = 0;
        if (!x->st->done.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return false;
        for (std::size_t k = 0; k < x->n; ++k) {
          chan_core* c = x->sc[k].c;
          if (!c) continue;  // a nil channel's case was never queued
          c->lock.lock();
          (x->sc[k].is_send ? c->sendq : c->recvq).remove(&x->waiters[k]);
          c->lock.unlock();
        }
        return true;
      },
      &at, wait_reason::select);
  // main_return: woken to end (the claim above took every waiter off; no
  // case won).
  exit_if_killed(gp);

  // Pass 3: the winner was popped by its waker; take the others back.
  locks.lock_all();
  chan_waiter* winner = st.winner;
  for (std::size_t k = 0; k < n; ++k) {
    if (&waiters[k] == winner || !sc[k].c) continue;
    (sc[k].is_send ? sc[k].c->sendq : sc[k].c->recvq).remove(&waiters[k]);
  }
  locks.unlock_all();
  std::size_t k = static_cast<std::size_t>(winner - waiters);
  send_closed = sc[k].is_send && !winner->success;
  return k;
}

GORO_DECL std::size_t select(std::span<select_case> cases) {
  std::size_t ndefault = 0, default_index = cases.size();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (!cases[i].p_) detail::raise_usage("select: a moved-from select_case");
    if (cases[i].default_) {
      ++ndefault;
      default_index = i;
    }
  }
  if (ndefault > 1) detail::raise_usage("select: more than one default_case");
  const std::size_t n = cases.size() - ndefault;
  if (n >= 65536) detail::raise_usage("select: too many cases");

  std::size_t chosen = default_index;
  if (n > 0) {
    auto go = [&](detail::select_scratch& w) {
      for (std::size_t i = 0, ci = 0; i < cases.size(); ++i) {
        if (cases[i].default_) continue;
        w.sc[ci] = cases[i].p_->prepare();
        w.arg_index[ci++] = i;
      }
      bool send_closed = false;
      std::size_t k =
          detail::select_go(w.sc, n, ndefault != 0, w.pollorder, w.lockorder, w.waiters, send_closed);
      if (send_closed) detail::raise_send_closed();
      if (k != n) chosen = w.arg_index[k];
    };
    if (n <= detail::select_scratch::inline_cases) {
      detail::select_scratch_stack w;
      go(w.s);
    } else {
      detail::select_scratch_heap w(n);
      go(w.s);
    }
  } else if (ndefault == 0) {
    detail::block_forever_nil("select", detail::wait_reason::select_no_cases);
  }
  cases[chosen].p_->run();
  return chosen;
}

}  // namespace goro
#endif  // GORO_COMPILE_RUNTIME
