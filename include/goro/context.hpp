// goro::context: Go's context package (src/context/context.go) without
// values: cancellation and deadlines that flow from a context to all its
// descendants, never up.
//
//   auto [ctx, cancel] = goro::with_timeout(goro::background(), 100ms);
//   goro::select(goro::on_recv(ctx.done(), [](auto) { /* given up */ }),
//                goro::on_recv(results, [](auto v) { /* ... */ }));
//   cancel();   // always, as in Go: releases the timer and the registration
//
// A context is a shared handle to a context_state (Go's cancelCtx, and
// timerCtx when it has a deadline); background() is the empty handle, which
// is never cancelled and whose done() is the nil channel (never ready).
//
// Ownership (Go has a GC; here reference counts): a child holds its parent
// (a counted reference), a parent knows its children only weakly (an
// intrusive list of raw pointers, guarded by the parent's lock; a child is
// taken from it only if its count is not zero yet). So a tree that nobody
// references any more is freed even if cancel was never called, and there
// is no cycle. The count is intrusive, not a shared_ptr, so that a chain
// is freed in a loop (context_ref::release): a child's destructor that
// released its parent freed the parent inside it, one nested destructor
// per level, and dropping the leaf of a chain ~5,000 deep overflowed a
// goroutine's stack (Go's contexts are collected at any depth). Go's
// propagateCancel rules: a child is linked into its parent when made (or
// cancelled at once if the parent already is); cancelling a context unlinks
// it from its parent, stops its timer and cancels every child before
// cancel() returns, after which it holds nothing of them.
//
// Several cancels of one subtree at once (a cancel_func, the deadline, a
// parent's cancel): each context is cancelled by the first to lock it,
// which takes its children; the others skip it. Go's losers then wait for
// c.mu, held by the winner until its children are cancelled; here a
// context counts what it still waits for (pending_: its own step, and
// each child it took) and is *settled* by the last of these -- done()
// closes and it leaves its parent's list -- which then counts for its
// parent in turn. A cancel_func returns once its context is settled,
// winner or not. Nobody waits inside the tree (the timer's function never
// waits at all), so every settlement comes.
//
// Lifetimes around the deadline timer: it is a `sync` timer
// (detail/timer_heap.hpp) whose function gets the raw state pointer. The
// state's destructor starts with timer_heap::del, which waits for a
// running function; so the function may use every member of the state,
// and it never takes a strong reference to it (it could be the destructor
// that is waiting). The function may still end the state's life: the
// children it cancels are held strongly while it does, and a child whose
// last other holder let go meanwhile releases the parent's last reference
// when the function drops it. That destructor runs inside the function,
// and del() from inside a timer's own function does not wait for it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>
#include <variant>

#include "chan.hpp"
#include "detail/config.hpp"
#include "detail/goexit.hpp"
#include "detail/inside_blocking.hpp"
#include "detail/spinlock.hpp"
#include "detail/timer_heap.hpp"
#include "time.hpp"

namespace goro {

// Why a context is done (Go's ctx.Err(): nil, Canceled, DeadlineExceeded).
enum class cancel_reason { none, canceled, deadline_exceeded };

namespace detail {

class context_state;

// A counted reference to a context_state (an intrusive shared_ptr); empty
// for background().
class context_ref {
 public:
  context_ref() noexcept = default;
  context_ref(const context_ref& o) noexcept;
  context_ref(context_ref&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  context_ref& operator=(context_ref o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  ~context_ref() { release(s_); }

  // Takes over one reference the caller holds on s.
  static context_ref adopt(context_state* s) noexcept {
    context_ref r;
    r.s_ = s;
    return r;
  }
  // Gives the reference up to the caller, leaving this empty.
  context_state* take() noexcept { return std::exchange(s_, nullptr); }
  context_state* get() const noexcept { return s_; }
  context_state* operator->() const noexcept { return s_; }
  explicit operator bool() const noexcept { return s_ != nullptr; }
  friend bool operator==(const context_ref& a, const context_ref& b) noexcept { return a.s_ == b.s_; }

 private:
  // Drops one reference on s; the last one frees s, then drops the
  // reference s held on its parent, and so on up: a loop, never a
  // destructor inside a destructor.
  GORO_DECL static void release(context_state* s) noexcept;

  context_state* s_ = nullptr;
};

class context_state {
 public:
  // Takes over the reference `parent` holds.
  GORO_DECL context_state(context_ref parent, std::int64_t deadline_ns);
  context_state(const context_state&) = delete;
  context_state& operator=(const context_state&) = delete;

  // Called by context_ref::release once the count is zero; does not
  // release the parent (release does, after it).
  GORO_DECL ~context_state();

  // Go's propagateCancel: links this (just made, counted) into its
  // parent, or cancels it at once if the parent is done.
  GORO_DECL void attach();

  // Arms the deadline timer (after attach(): the parent may have
  // cancelled us already, and then there is nothing to arm).
  GORO_DECL void arm();

  // Go's cancelCtx.cancel: the first call records the reason, cancels
  // every child (with the same reason) and forgets them, stops the timer,
  // and once every descendant is cancelled closes done and leaves the
  // parent's list (settle_one). wait: return only then, also when another
  // call won the race (Go's: the loser waits for c.mu, which the winner
  // holds until its children are cancelled); the timer's function passes
  // false (nobody waits for it, and it runs on a scheduler context).
  GORO_DECL void cancel(cancel_reason reason, bool wait);

  cancel_reason err() const noexcept { return err_.load(std::memory_order_acquire); }
  std::int64_t deadline_ns() const noexcept { return deadline_ns_; }
  const chan<std::monostate>& done() const noexcept { return done_; }

 private:
  friend class context_ref;

  // A new reference if the count is not zero yet (a weak_ptr's lock): a
  // child whose count reached zero is being destroyed.
  bool try_ref() noexcept {
    std::size_t n = refs_.load(std::memory_order_relaxed);
    while (n != 0)
      if (refs_.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel, std::memory_order_relaxed)) return true;
    return false;
  }

  // cancel's step for one context: false if it was done already (its
  // canceller settles it); else pushes the children it took on `kids`,
  // each with a reference (they are cancelled next, and counted in
  // pending_). An intrusive list (next_kid_), not a vector: taken under
  // our spinlock, where an allocation that threw left the lock held.
  GORO_DECL bool cancel_one(cancel_reason reason, context_state*& kids);
  // One of pending_ is over; the last one settles us (see cancel).
  GORO_DECL void settle_one();
  // Links c as a child; returns our reason instead if we are done.
  GORO_DECL cancel_reason link_child(context_state* c);
  // Go's removeChild.
  GORO_DECL void unlink_child(context_state* c) noexcept;
  GORO_DECL void unlink_locked(context_state* c) noexcept;  // lock_ held

  // What a cancel walks first (our lock, our count, our children), and
  // refs_ last, three cache lines away: a cancel of a parent with many
  // children runs on one thread while the children's goroutines, on every
  // other P, end and drop their references on the parent. Sharing a line,
  // each drop took the canceller's lock line away from it.
  spinlock lock_;  // guards our child list and our children's sibling links
  std::atomic<cancel_reason> err_{cancel_reason::none};
  // Once cancelled: our own cancel_one, plus each child it took (and
  // counted_) that is not settled yet. The last decrement settles us.
  std::atomic<std::size_t> pending_{0};
  context_state* first_child_ = nullptr;   // children, linked while not cancelled
  const std::int64_t deadline_ns_;         // 0: none
  chan<std::monostate> done_;              // closed once cancelled, with every descendant
  context_state* prev_sibling_ = nullptr;  // guarded by parent_->lock_
  context_state* next_sibling_ = nullptr;  // guarded by parent_->lock_
  // Written under parent_->lock_; read bare by our destructor, which skips
  // the parent's lock when it is false (see cancel_one).
  std::atomic<bool> linked_{false};
  bool counted_ = false;               // guarded by parent_->lock_: the parent's pending_ counts us
  context_state* next_kid_ = nullptr;  // on the one cancel worklist that took us (cancel_one)
  bool armed_ = false;                 // the timer was added; guarded by lock_ (read bare by ~context_state)
  timer timer_;
  // One reference, released by context_ref::release after our destructor.
  // After done_: taken from the constructor's argument only once done_
  // (which allocates, and may throw) is made, or the reference would leak.
  context_state* const parent_;
  std::atomic<std::size_t> refs_{1};  // context_ref's count; the creator holds the first
};

inline context_ref::context_ref(const context_ref& o) noexcept : s_(o.s_) {
  if (s_) s_->refs_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace detail

class context;
class cancel_func;
// A child cancelled (canceled) by the returned cancel_func, or when parent
// is (with the parent's reason).
GORO_DECL std::pair<context, cancel_func> with_cancel(context parent);
// A child also cancelled (deadline_exceeded) at tp. Its deadline is never
// later than its parent's: with an earlier parent deadline it is
// with_cancel(parent) (Go's WithDeadline).
GORO_DECL std::pair<context, cancel_func> with_deadline(context parent, std::chrono::steady_clock::time_point tp);

// A shared handle (cheap to copy) to a node of a context tree. A
// default-constructed context is background().
class context {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  context() noexcept = default;

  // A receive-only channel closed once this context is cancelled (use it in
  // select). background()'s is the nil channel: never ready. It does not
  // keep the context alive: with the last context and cancel_func gone, the
  // deadline timer is stopped and the channel is never closed.
  recv_chan<std::monostate> done() const noexcept {
    if (!s_) return {};
    return s_->done();
  }
  // none while not cancelled; afterwards why (a child cancelled through
  // its parent reports the parent's reason).
  cancel_reason err() const noexcept { return s_ ? s_->err() : cancel_reason::none; }
  // The instant this context is cancelled on its own, if it has one (the
  // earliest of its own and its ancestors' deadlines).
  std::optional<time_point> deadline() const noexcept {
    if (!s_ || s_->deadline_ns() == 0) return std::nullopt;
    return time_point(std::chrono::nanoseconds(s_->deadline_ns()));
  }

  friend bool operator==(const context& a, const context& b) noexcept { return a.s_ == b.s_; }

 private:
  explicit context(detail::context_ref s) noexcept : s_(std::move(s)) {}
  // A child of parent with the given deadline (0: none); arm_timer: the
  // deadline is its own (else inherited from the parent, whose timer acts).
  GORO_DECL static std::pair<context, cancel_func> make(const context& parent, std::int64_t deadline_ns, bool arm_timer);

  detail::context_ref s_;

  friend std::pair<context, cancel_func> with_cancel(context parent);
  friend std::pair<context, cancel_func> with_deadline(context parent, time_point tp);
};

// Cancels its context (Go's CancelFunc): idempotent, safe from any
// goroutine or thread. Call it once the work is done, even if it was not
// cancelled, so that the context's timer and its place in its parent are
// released at once. A default-constructed one does nothing.
class cancel_func {
 public:
  cancel_func() noexcept = default;
  GORO_DECL void operator()() const;

 private:
  explicit cancel_func(detail::context_ref s) noexcept : s_(std::move(s)) {}
  detail::context_ref s_;
  friend class context;
};

// The root: never cancelled, no deadline (Go's context.Background()).
inline context background() noexcept { return {}; }

// with_deadline(parent, now + d).
GORO_DECL std::pair<context, cancel_func> with_timeout(context parent, std::chrono::nanoseconds d);

// The same for any duration or steady_clock instant, saturated before it
// becomes nanoseconds (time.hpp's to_ns): converted implicitly, hours::max()
// ("no timeout") or time_point<steady_clock, seconds>::max() overflowed
// (UB) and read as past: the context was cancelled at once.
template <class Rep, class Period>
std::pair<context, cancel_func> with_timeout(context parent, const std::chrono::duration<Rep, Period>& d) {
  return with_timeout(std::move(parent), std::chrono::nanoseconds(detail::to_ns(d)));
}
template <class Duration>
std::pair<context, cancel_func> with_deadline(context parent,
                                              const std::chrono::time_point<std::chrono::steady_clock, Duration>& tp) {
  return with_deadline(std::move(parent), std::chrono::steady_clock::time_point(
                                              std::chrono::nanoseconds(detail::to_ns(tp.time_since_epoch()))));
}

}  // namespace goro

#if GORO_COMPILE_RUNTIME
namespace goro {
namespace detail {

GORO_DECL context_state::context_state(context_ref parent, std::int64_t deadline_ns)
    : deadline_ns_(deadline_ns), parent_(parent.take()) {}

GORO_DECL context_state::~context_state() {
  if (armed_) timer_heap::del(&timer_);  // first: waits for a firing timer (see the top of the file)
  // The parent is alive (our reference on it is released after us). Its
  // lock only while we are on its list: the children of a cancelled
  // parent were all taken off it, and their goroutines ending on every P
  // would otherwise queue on the lock of the parent's cancel (Go's
  // children never touch a cancelled parent). Acquire: pairs with
  // cancel_one's release, its last touch of us.
  if (parent_ && linked_.load(std::memory_order_acquire)) parent_->unlink_child(this);
}

GORO_DECL void context_ref::release(context_state* s) noexcept {
  // acq_rel: the last holder sees every other holder's use of s.
  while (s && s->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    context_state* parent = s->parent_;
    delete s;
    s = parent;  // drop the reference s held on it
  }
}

GORO_DECL void context_state::attach() {
  if (!parent_) return;
  cancel_reason r = parent_->link_child(this);
  if (r != cancel_reason::none) cancel(r, true);  // not linked: nobody else can cancel us yet
}

GORO_DECL void context_state::arm() {
  if (deadline_ns_ <= nanotime()) {
    cancel(cancel_reason::deadline_exceeded, true);
    return;
  }
  timer_.when = deadline_ns_;  // on no heap yet, and armed_ is false: ours alone
  timer_.sync = true;
  timer_.arg = this;
  timer_.f = [](void* arg, std::uintptr_t, std::int64_t) {
    static_cast<context_state*>(arg)->cancel(cancel_reason::deadline_exceeded, false);
  };
  // Queued under lock_, as Go's WithDeadline arms under c.mu: a cancel
  // that reaches us through the parent (any thread, since attach()) either
  // took lock_ first (err_ is set: nothing to arm) or takes it after and
  // reads armed_ there, then deletes the timer. Checked and set unlocked,
  // a cancel could slip in between and leave a cancelled context's timer
  // pending until its deadline (a data race on armed_ besides). Lock
  // order: lock_, then a heap's lock (timer functions run with none held).
  std::lock_guard<spinlock> lk(lock_);
  if (err_.load(std::memory_order_relaxed) != cancel_reason::none) return;
  add_timer_anywhere(&timer_);
  armed_ = true;
}

GORO_DECL void context_state::cancel(cancel_reason reason, bool wait) {
  // Not ended half-way by main returning: cancel_one's close of done_ is
  // a goro call, and ending the goroutine there (goexit_unwind) left err_
  // set with done_ open and the detached children never cancelled. The
  // goroutine ends at its next goro call instead.
  no_unwind_scope no_unwind;
  // A worklist, not recursion: a chain of N contexts cancelled from its
  // root took ~130 bytes of stack per level, and a goroutine's stack is
  // fixed (64 KiB overflowed at 600 levels; Go's stacks grow).
  context_state* kids = nullptr;  // each holds a reference, taken by cancel_one
  if (cancel_one(reason, kids)) {
    // Until `wait`, `this` is not touched: dropping a child may destroy it
    // and, from the timer's function, this state too (see the top of the
    // file). A child another call cancelled first is settled by that call,
    // and counts for its parent all the same.
    while (kids) {
      context_ref k = context_ref::adopt(kids);  // released (maybe destroying it) after its step
      kids = kids->next_kid_;
      k->cancel_one(reason, kids);
    }
  }
  if (!wait) return;  // the caller holds a reference: `this` lives
  // Every descendant cancelled: done_ is closed at our settlement, which
  // other calls that took part of our subtree may still owe (they never
  // wait, so it comes). Inside goro::blocking a park is refused; the P was
  // handed off, so a yield loop there does not hold anyone up.
  auto* d = done_.impl();
  if (d->closed.load(std::memory_order_acquire)) return;
  if (inside_blocking(current_m())) {
    while (!d->closed.load(std::memory_order_acquire)) os::yield_thread();
    return;
  }
  (void)done_.recv();  // no_unwind: not ended while it waits (the settlement comes)
}

GORO_DECL bool context_state::cancel_one(cancel_reason reason, context_state*& kids) {
  lock_.lock();
  if (err_.load(std::memory_order_relaxed) != cancel_reason::none) {
    lock_.unlock();
    return false;
  }
  // Release: a goroutine that sees err() != none sees what happened
  // before the cancel; one woken by done() synchronises through the
  // channel's lock, which close() takes after pending_ reached zero.
  err_.store(reason, std::memory_order_release);
  const bool armed = armed_;  // under lock_, as arm() sets it
  std::size_t n = 1;          // our own part, released below
  for (context_state* c = first_child_; c;) {
    context_state* next = c->next_sibling_;
    c->prev_sibling_ = c->next_sibling_ = nullptr;
    // A child whose count already reached zero is in its destructor: it
    // waits for our lock to unlink itself and then finds linked_ false, or
    // finds it false at once and frees itself without our lock. So the
    // release store of false is our last touch of a child we did not take.
    if (c->try_ref()) {
      c->next_kid_ = kids;  // only we take c: it leaves our list here, and it has one parent
      kids = c;
      c->counted_ = true;  // it reads this under our lock when it settles: after the store below
      ++n;
    }
    c->linked_.store(false, std::memory_order_release);
    c = next;
  }
  first_child_ = nullptr;
  pending_.store(n, std::memory_order_relaxed);
  lock_.unlock();
  // Before the timer's release: from the timer's own function, that is
  // the last touch of `this` (a counted child keeps us alive after it).
  settle_one();
  // Release the timer at once (Go's timerCtx.cancel stops it). From the
  // timer's own function (it has fired) del does not wait for that call.
  if (armed) timer_heap::del(&timer_);
  return true;
}

GORO_DECL void context_state::settle_one() {
  // acq_rel: the last decrement sees every settled child's done closed
  // (each closed its own before decrementing), so a goroutine woken by
  // our done sees the whole subtree cancelled. Up the tree in a loop, not
  // recursion (a chain of any depth); each s is alive: the one below it
  // holds a reference on it, and the first is held by our caller.
  for (context_state* s = this; s->pending_.fetch_sub(1, std::memory_order_acq_rel) == 1;) {
    s->done_.close();  // in cancel's no_unwind_scope; closed only here, once
    context_state* p = s->parent_;
    if (!p) return;
    // Go's removeChild, after the children: a parent cancelled meanwhile
    // either took us before (counted_: we owe it a settlement) or finds
    // us gone from its list.
    p->lock_.lock();
    const bool counted = s->counted_;
    p->unlink_locked(s);
    p->lock_.unlock();
    if (!counted) return;
    s = p;
  }
}

GORO_DECL cancel_reason context_state::link_child(context_state* c) {
  lock_.lock();
  cancel_reason r = err_.load(std::memory_order_relaxed);
  if (r == cancel_reason::none) {
    c->next_sibling_ = first_child_;
    c->prev_sibling_ = nullptr;
    if (first_child_) first_child_->prev_sibling_ = c;
    first_child_ = c;
    c->linked_.store(true, std::memory_order_relaxed);  // c is new: its destructor is not running
  }
  lock_.unlock();
  return r;
}

GORO_DECL void context_state::unlink_child(context_state* c) noexcept {
  lock_.lock();
  unlink_locked(c);
  lock_.unlock();
}

GORO_DECL void context_state::unlink_locked(context_state* c) noexcept {
  if (c->linked_.load(std::memory_order_relaxed)) {
    if (c->prev_sibling_)
      c->prev_sibling_->next_sibling_ = c->next_sibling_;
    else
      first_child_ = c->next_sibling_;
    if (c->next_sibling_) c->next_sibling_->prev_sibling_ = c->prev_sibling_;
    c->prev_sibling_ = c->next_sibling_ = nullptr;
    // Relaxed: c unlinks itself (its destructor) or is settled by a caller
    // that holds a reference on it, so no destructor of c runs meanwhile.
    c->linked_.store(false, std::memory_order_relaxed);
  }
}

}  // namespace detail

GORO_DECL std::pair<context, cancel_func> context::make(const context& parent, std::int64_t deadline_ns, bool arm_timer) {
  detail::context_ref s = detail::context_ref::adopt(new detail::context_state(parent.s_, deadline_ns));
  s->attach();
  if (arm_timer) s->arm();
  return {context(s), cancel_func(s)};
}

GORO_DECL std::pair<context, cancel_func> with_cancel(context parent) {
  return context::make(parent, parent.s_ ? parent.s_->deadline_ns() : 0, false);
}

GORO_DECL std::pair<context, cancel_func> with_deadline(context parent, std::chrono::steady_clock::time_point tp) {
  std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(tp.time_since_epoch()).count();
  if (ns < 1) ns = 1;
  if (parent.s_ && parent.s_->deadline_ns() != 0 && parent.s_->deadline_ns() <= ns) return with_cancel(parent);
  return context::make(parent, ns, true);
}

GORO_DECL std::pair<context, cancel_func> with_timeout(context parent, std::chrono::nanoseconds d) {
  // Saturating: a huge d is "never", not an overflow.
  std::int64_t ns = detail::when_after(detail::nanotime(), detail::to_ns(d));
  return with_deadline(std::move(parent), context::time_point(std::chrono::nanoseconds(ns)));
}

GORO_DECL void cancel_func::operator()() const {
  if (s_) s_->cancel(cancel_reason::canceled, true);  // s_ holds a reference: the state lives while it waits
}

}  // namespace goro
#endif  // GORO_COMPILE_RUNTIME
