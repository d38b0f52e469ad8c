// goro::chan<T, Alloc>: Go's channels (mirror src/runtime/chan.go).
//
// A channel is an hchan: a ring buffer of `capacity` slots, a FIFO of
// blocked receivers (recvq) and one of blocked senders (sendq), all under
// one spinlock. A blocked party queues a chan_waiter (Go's sudog) and
// blocks through detail/park.hpp's protocol (which states why no wake-up
// is lost). The party that completes the communication does all the work
// under the lock -- it moves the value straight into the receiver's slot,
// or out of the sender's -- then unlocks and only then wakes the waiter.
//
// Invariants (DESIGN.md section 5), while the lock is not held:
//   - at most one of recvq / sendq is non-empty (a select that waits to
//     send and to receive on the same channel is the only exception);
//   - a buffered channel holding items has no receivers queued;
//   - a buffered channel with free slots has no senders queued;
//   - a closed channel has no waiters at all.
#pragma once

#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "detail/config.hpp"
#include "detail/g.hpp"
#include "detail/goexit.hpp"
#include "detail/inside_blocking.hpp"
#include "detail/m.hpp"
#include "os/os.hpp"
#include "detail/park.hpp"
#include "detail/preempt.hpp"
#include "detail/spinlock.hpp"
#include "error.hpp"

namespace goro {

template <class T, class Alloc = std::allocator<T>>
class chan;
template <class T>
class recv_chan;

namespace detail {

struct chan_waiter;

// Shared by every waiter of one blocked select (Go's g.selectDone and
// g.param): the first channel operation to claim `done` wins and records
// its waiter in `winner`; the others skip this select's waiters.
struct select_state {
  std::atomic<std::uint32_t> done{0};
  std::atomic<std::uint32_t> woken{0};  // futex word of a plain thread
  chan_waiter* winner = nullptr;        // written under the winning channel's lock, read after the wake-up
};

// Go's sudog: one blocked channel operation. On the blocked party's stack;
// linked into a channel's queue only under that channel's lock.
struct chan_waiter {
  g* gp = nullptr;  // nullptr: a plain thread
  chan_waiter* next = nullptr;
  chan_waiter* prev = nullptr;
  void* elem = nullptr;                 // send: T* (moved from); receive: std::optional<T>* (emplaced into)
  select_state* sel = nullptr;          // non-null when part of a select
  bool success = false;                 // true: a value was passed; false: woken by close
  std::atomic<std::uint32_t> woken{0};  // futex word of a plain thread (not in a select)
  // A select's other channels are out of reach once this one is destroyed
  // under it (see ~waitq): no orphaned_wait for it.
  bool orphanable() const noexcept { return sel == nullptr; }
  // The futex word a plain thread sleeps on.
  std::atomic<std::uint32_t>& word() noexcept { return sel ? sel->woken : woken; }
};

// Go's waitq: park.hpp's queue, plus the select-aware dequeue.
class chan_waitq : public waitq<chan_waiter> {
 public:
  // Go's dequeue: pops the first waiter that can still be taken. A waiter
  // of a select that another case already won is dropped (its select will
  // find it gone when it dequeues the rest). The winner is recorded.
  chan_waiter* dequeue() noexcept {
    for (;;) {
      chan_waiter* w = pop_front();
      if (!w) return nullptr;
      if (select_state* s = w->sel) {
        // acq_rel: orders this claim against the other channels' claims;
        // the winner's data reaches the selecting party through the wake.
        std::uint32_t expected = 0;
        if (!s->done.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) continue;
        s->winner = w;
      }
      return w;
    }
  }
};

// Result of one channel operation attempted under the lock.
enum class chan_op : std::uint8_t {
  blocked,  // would block
  done,     // the value was passed (a receive from a closed, drained channel counts: nullopt)
  closed,   // send on a closed channel
};

// The part of a channel that does not depend on T (what select locks and
// queues on). Everything an operation touches fits one cache line: a
// channel shared by two cores moves one line per operation.
struct alignas(cache_line) chan_core {
  spinlock lock;
  std::atomic<bool> closed{false};
  std::uint32_t cap = 0;
  std::atomic<std::size_t> count{0};   // items in the buffer; written under the lock
  std::uint32_t sendx = 0, recvx = 0;  // ring indices
  void* storage = nullptr;             // the ring: hchan<T>'s cap slots of T
  chan_waitq recvq, sendq;

  explicit chan_core(std::size_t capacity) {
    if (capacity > UINT32_MAX) raise_usage("chan: capacity out of range");
    cap = static_cast<std::uint32_t>(capacity);
  }

  // Go's full(): a send would block (ignoring closed).
  bool full() const noexcept { return cap == 0 ? recvq.empty() : count.load(std::memory_order_relaxed) == cap; }
  // Go's empty(): a receive would block (ignoring closed).
  bool empty() const noexcept { return cap == 0 ? sendq.empty() : count.load(std::memory_order_relaxed) == 0; }
};

static_assert(sizeof(chan_core) == cache_line, "chan_core: one cache line");

// Wakes a waiter popped from a channel queue, after every lock is released.
// After this call w may be gone (its owner returned).
inline void wake_chan_waiter(chan_waiter* w) noexcept {
  GORO_CHAOS_POINT("chan.wake");
  wake(w->gp, w->word());
}

// The calling goroutine, with its M, or gp == nullptr on a plain thread.
struct caller {
  m_base* m;
  g* gp;
};
inline caller current_caller() noexcept {
  m_base* m = current_m();
  return {m, m ? m->curg : nullptr};
}

// One channel operation's waiter, for block's unlink.
struct queued_waiter {
  chan_core* c;
  chan_waitq* q;
  chan_waiter* w;
  static bool unlink(void* a) noexcept {
    auto* x = static_cast<queued_waiter*>(a);
    x->c->lock.lock();
    // Searched for, not remove(x->w): close() links the waiters it popped
    // through `next` until it has woken them, and remove() would take such
    // a record for a queued one (relinking the queue to another popped
    // record and reporting it taken: the runtime ending the goroutine and
    // close() both readied it).
    chan_waiter* w = x->w;
    const bool removed = x->q->remove_first_if([w](const chan_waiter* y) { return y == w; }) != nullptr;
    x->c->lock.unlock();
    return removed;
  }
};

// Send or receive on a nil channel (Go's chansend/chanrecv with c == nil):
// blocks forever. A goroutine parks with nobody to ready it, so the
// deadlock detector counts it as blocked; a plain thread sleeps for good
// (not counted as a live external M: nothing can wake it). Inside
// goro::blocking it is a usage_error, as any wait there.
[[noreturn]] GORO_NOINLINE inline void block_forever_nil(const char* call, wait_reason why) {
  caller self = current_caller();
  if (GORO_UNLIKELY(inside_blocking(self.m))) raise_inside_blocking(call);
  std::atomic<std::uint32_t> never{0};
  for (;;) {
    if (self.gp) {
      call_point();  // main_return: ends here once its runtime ends its goroutines
      self.m = current_m();  // call_point may have switched (TLS rule)
      self.gp->unlink_wait = &orphaned_wait;  // nobody else can wake it (main_return.hpp)
      park(self.m, [](void*) { return true; }, nullptr, why);
      self.gp->unlink_wait = nullptr;
      exit_if_killed(self.gp);
    } else {
      os::futex_wait(&never, 0);
    }
  }
}

[[noreturn]] GORO_NOINLINE inline void raise_send_closed() { raise<channel_closed>("goro: send on closed channel"); }
[[noreturn]] GORO_NOINLINE inline void raise_close_closed() { raise<channel_closed>("goro: close of closed channel"); }

// The typed channel: chan_core plus the ring buffer of T (raw storage:
// T need not be default-constructible; slots [recvx, recvx+count) hold live
// objects). T's move constructor runs under the lock, so it must not
// throw: chan<T> of a T whose move may throw uses hchan<chan_elem<T>>.
template <class T>
struct hchan : chan_core {
  static_assert(std::is_nothrow_move_constructible_v<T>, "hchan<T>: T's moves run under the lock");
  explicit hchan(std::size_t capacity) : chan_core(capacity) {
    if (cap) storage = std::allocator<T>().allocate(ring_size());
  }
  // For hchan_alloc: the ring comes from its allocator.
  struct foreign_storage {};
  hchan(std::size_t capacity, foreign_storage) : chan_core(capacity) {}
  ~hchan() {
    if (!storage) return;
    destroy_items();
    std::allocator<T>().deallocate(slots(), ring_size());
  }
  // An empty T (std::monostate, a tag; Go's struct{}) carries nothing: all
  // its slots are one, as Go gives zero-size elements no buffer. A
  // chan<std::monostate>(INT_MAX) (group::set_limit's semaphore) took 2 GiB.
  static constexpr bool one_slot = std::is_empty_v<T> && std::is_trivially_destructible_v<T>;
  std::size_t ring_size() const noexcept { return one_slot ? 1 : cap; }
  T* slots() const noexcept { return static_cast<T*>(storage); }
  T* slot(std::size_t i) const noexcept { return slots() + (one_slot ? 0 : i); }
  // The values still buffered (a channel dropped with items in it).
  void destroy_items() noexcept {
    if constexpr (one_slot) return;  // trivially destructible
    T* buf = slots();
    std::size_t n = count.load(std::memory_order_relaxed);
    for (std::size_t i = 0, x = recvx; i < n; ++i, x = (x + 1 == cap ? 0 : x + 1)) buf[x].~T();
  }
  hchan(const hchan&) = delete;
  hchan& operator=(const hchan&) = delete;

  // chansend's body, lock held. On done, `partner` (if set) must be woken
  // after unlocking. On blocked or closed, v is untouched.
  chan_op send_locked(T& v, chan_waiter*& partner) noexcept {
    if (closed.load(std::memory_order_relaxed)) return chan_op::closed;
    if (chan_waiter* r = recvq.dequeue()) {
      // Direct hand-off: a receiver is waiting, so the buffer is empty.
      static_cast<std::optional<T>*>(r->elem)->emplace(std::move(v));
      r->success = true;
      partner = r;
      return chan_op::done;
    }
    std::size_t n = count.load(std::memory_order_relaxed);
    if (n < cap) {
      ::new (static_cast<void*>(slot(sendx))) T(std::move(v));
      if (++sendx == cap) sendx = 0;
      count.store(n + 1, std::memory_order_relaxed);
      return chan_op::done;
    }
    return chan_op::blocked;
  }

  // chanrecv's body, lock held: fills `out` (left empty when the channel
  // is closed and drained, which is also done).
  chan_op recv_locked(std::optional<T>& out, chan_waiter*& partner) noexcept {
    if (chan_waiter* s = sendq.dequeue()) {
      T& sv = *static_cast<T*>(s->elem);
      if (cap == 0) {
        out.emplace(std::move(sv));  // straight from the sender
      } else {
        // The buffer is full: take its head, and put the sender's value in
        // the freed slot, which becomes the tail (Go's recv()).
        T* head = slot(recvx);
        out.emplace(std::move(*head));
        head->~T();
        ::new (static_cast<void*>(head)) T(std::move(sv));
        if (++recvx == cap) recvx = 0;
        sendx = recvx;
      }
      s->success = true;
      partner = s;
      return chan_op::done;
    }
    std::size_t n = count.load(std::memory_order_relaxed);
    if (n > 0) {
      T* head = slot(recvx);
      out.emplace(std::move(*head));
      head->~T();
      if (++recvx == cap) recvx = 0;
      count.store(n - 1, std::memory_order_relaxed);
      return chan_op::done;
    }
    if (closed.load(std::memory_order_relaxed)) return chan_op::done;  // out stays empty
    return chan_op::blocked;
  }

  // Type-erased forms for select (elem: T* / std::optional<T>*).
  static chan_op poll_send(chan_core* c, void* elem, chan_waiter*& partner) noexcept {
    return static_cast<hchan*>(c)->send_locked(*static_cast<T*>(elem), partner);
  }
  static chan_op poll_recv(chan_core* c, void* elem, chan_waiter*& partner) noexcept {
    return static_cast<hchan*>(c)->recv_locked(*static_cast<std::optional<T>*>(elem), partner);
  }

  // Each operation starts with a safe point (a runtime call honours a
  // pending preemption request: detail/preempt.hpp; and ends the goroutine
  // once its runtime ends its goroutines: detail/goexit.hpp).
  void send(T& v) {
    call_point();
    chan_waiter* partner = nullptr;
    lock.lock();
    chan_op r = send_locked(v, partner);
    if (GORO_LIKELY(r == chan_op::done)) {
      lock.unlock();
      if (partner) wake_chan_waiter(partner);
      return;
    }
    if (r == chan_op::closed) {
      lock.unlock();
      raise_send_closed();
    }
    // Block: a receiver (or close) takes it from here.
    chan_waiter w;
    caller self = current_caller();
    if (GORO_UNLIKELY(inside_blocking(self.m))) {
      lock.unlock();
      raise_inside_blocking("chan send");
    }
    w.gp = self.gp;
    w.elem = &v;
    sendq.push_back(&w);
    queued_waiter at{this, &sendq, &w};
    GORO_CHAOS_POINT("chan.block");
    block(self.m, self.gp, w.woken, unlock_spinlock, &lock, queued_waiter::unlink, &at, wait_reason::chan_send);
    exit_if_killed(self.gp);  // main_return: taken off the queue to end (goexit.hpp)
    if (!w.success) raise_send_closed();  // woken by close
  }

  // Receives into `out`, which must be empty (left empty after close).
  void recv_into(std::optional<T>& out) {
    call_point();
    chan_waiter* partner = nullptr;
    lock.lock();
    if (GORO_LIKELY(recv_locked(out, partner) == chan_op::done)) {
      lock.unlock();
      if (partner) wake_chan_waiter(partner);
      return;
    }
    chan_waiter w;
    caller self = current_caller();
    if (GORO_UNLIKELY(inside_blocking(self.m))) {
      lock.unlock();
      raise_inside_blocking("chan recv");
    }
    w.gp = self.gp;
    w.elem = &out;
    recvq.push_back(&w);
    queued_waiter at{this, &recvq, &w};
    GORO_CHAOS_POINT("chan.block");
    block(self.m, self.gp, w.woken, unlock_spinlock, &lock, queued_waiter::unlink, &at, wait_reason::chan_receive);
    exit_if_killed(self.gp);  // main_return: taken off the queue to end (goexit.hpp)
    // out was filled by the sender, or stays empty after close.
  }

  std::optional<T> recv() {
    std::optional<T> out;
    recv_into(out);
    return out;
  }

  // try_send without raising: closed is an answer (a timer's send, which
  // runs on g0 and must not throw, drops the value).
  chan_op offer(T& v) noexcept {
    // Go's fast path: not closed, then full, observed in that order, imply
    // an instant when the channel was open and a send would block (a closed
    // channel never becomes "not closed" again).
    if (!closed.load(std::memory_order_acquire) && full()) return chan_op::blocked;
    chan_waiter* partner = nullptr;
    lock.lock();
    chan_op r = send_locked(v, partner);
    lock.unlock();
    if (partner) wake_chan_waiter(partner);
    return r;
  }

  bool try_send(T& v) {
    call_point();
    chan_op r = offer(v);
    if (r == chan_op::closed) raise_send_closed();
    return r == chan_op::done;
  }

  std::optional<T> try_recv() {
    call_point();
    std::optional<T> out;
    // Empty observed at one instant: nothing to take then, whether closed
    // or not, and try_recv answers nullopt in both cases.
    if (empty()) return out;
    chan_waiter* partner = nullptr;
    lock.lock();
    recv_locked(out, partner);
    lock.unlock();
    if (partner) wake_chan_waiter(partner);
    return out;
  }

  // Go's closechan: every waiter is released; receivers get nothing,
  // senders wake with success == false and raise.
  void close() {
    call_point();
    lock.lock();
    if (closed.load(std::memory_order_relaxed)) {
      lock.unlock();
      raise_close_closed();
    }
    closed.store(true, std::memory_order_release);
    chan_waiter* list = nullptr;
    while (chan_waiter* w = recvq.dequeue()) {
      w->success = false;
      w->next = list;
      list = w;
    }
    while (chan_waiter* w = sendq.dequeue()) {
      w->success = false;
      w->next = list;
      list = w;
    }
    lock.unlock();
    while (list) {
      chan_waiter* next = list->next;  // read before the wake: list may vanish
      wake_chan_waiter(list);
      list = next;
    }
  }
};

// The channel of a chan<T, Alloc> with an allocator other than
// std::allocator<T>: its ring from Alloc (rebound to the element type), and
// the record itself, with its shared_ptr control block, made by
// std::allocate_shared with Alloc (chan's constructor). A handle still
// holds an hchan<E>* (what select and recv_chan<T> use): the allocator
// changes only who provides the memory. The control block destroys the
// record as this type, so ~hchan_alloc runs first and leaves ~hchan nothing.
template <class E, class Alloc>
struct hchan_alloc final : hchan<E> {
  using elem_alloc = typename std::allocator_traits<Alloc>::template rebind_alloc<E>;
  using traits = std::allocator_traits<elem_alloc>;
  hchan_alloc(std::size_t capacity, const Alloc& a)
      : hchan<E>(capacity, typename hchan<E>::foreign_storage{}), alloc(a) {
    if (this->cap) this->storage = std::to_address(traits::allocate(alloc, this->ring_size()));
  }
  ~hchan_alloc() {
    if (!this->storage) return;
    this->destroy_items();
    traits::deallocate(alloc, std::pointer_traits<typename traits::pointer>::pointer_to(*this->slots()),
                       this->ring_size());
    this->storage = nullptr;
  }
  [[no_unique_address]] elem_alloc alloc;
};

// What a chan<T> holds. A T whose move may throw (or allocate: a
// std::deque) travels boxed: the sender moves it into a heap node before
// taking the lock and the receiver moves it out after releasing it, so only
// pointers move under the lock; a throwing move then fails the operation of
// the party that made it (a sender keeps nothing sent, a receiver loses the
// value it took) and leaves the channel intact.
template <class T>
inline constexpr bool chan_boxed = !std::is_nothrow_move_constructible_v<T>;
template <class T>
using chan_elem = std::conditional_t<chan_boxed<T>, std::unique_ptr<T>, T>;

// The received value out of what the channel held (the receiver's side of
// a boxed value: T's move runs here, with no lock held).
template <class T>
std::optional<T> chan_unbox(std::optional<chan_elem<T>>&& o) {
  if constexpr (chan_boxed<T>) {
    if (!o) return std::nullopt;
    std::unique_ptr<T> b = std::move(*o);
    return std::optional<T>(std::move(*b));
  } else {
    return std::move(o);
  }
}

// Receives from c into `out` (empty); c == nullptr is a nil channel.
template <class T>
void chan_recv_into(hchan<chan_elem<T>>* c, std::optional<T>& out) {
  if (GORO_UNLIKELY(!c)) block_forever_nil("chan recv", wait_reason::chan_receive_nil);
  if constexpr (chan_boxed<T>) {
    std::optional<std::unique_ptr<T>> b;
    c->recv_into(b);
    if (b) out.emplace(std::move(**b));
  } else {
    c->recv_into(out);
  }
}

template <class T>
std::optional<T> chan_recv(hchan<chan_elem<T>>* c) {
  std::optional<T> out;
  chan_recv_into(c, out);
  return out;
}

template <class T>
std::optional<T> chan_try_recv(hchan<chan_elem<T>>* c) {
  if (!c) return std::nullopt;
  return chan_unbox<T>(c->try_recv());
}

}  // namespace detail

// A channel handle: copies refer to the same channel (Go's chan T). A
// moved-from handle is a nil channel, as Go's zero chan: send and receive
// block forever, try_send / try_recv find nothing ready, close is a
// usage_error.
//
// Alloc, as for the standard containers, provides the channel's memory:
// its buffer and its shared state (the channel record with the handles'
// reference count) come from Alloc, rebound. A channel belongs to no
// runtime, so it does not use a runtime's allocator_type. Values of a T
// whose move may throw travel boxed (chan_elem), each box from operator new.
template <class T, class Alloc>
class chan {
  static_assert(std::is_move_constructible_v<T>, "goro::chan<T>: T must be move-constructible");
  static_assert(!std::is_reference_v<T> && std::is_same_v<T, std::remove_cv_t<T>>,
                "goro::chan<T>: T must be a non-const object type");
  static_assert(requires { typename Alloc::value_type; },
                "goro::chan<T, Alloc>: Alloc must meet the standard Allocator requirements (no value_type)");
  static_assert(std::is_same_v<typename std::allocator_traits<Alloc>::value_type, T>,
                "goro::chan<T, Alloc>: Alloc::value_type must be T (as for the standard containers)");

 public:
  using impl_type = detail::hchan<detail::chan_elem<T>>;
  using allocator_type = Alloc;

  // capacity 0: unbuffered (every send meets a receiver).
  explicit chan(std::size_t capacity = 0) : chan(capacity, Alloc()) {}
  // The buffer and the shared state from a copy of a.
  chan(std::size_t capacity, const Alloc& a) {
    if constexpr (std::is_same_v<Alloc, std::allocator<T>>)
      c_ = std::make_shared<impl_type>(capacity);
    else
      c_ = std::allocate_shared<detail::hchan_alloc<detail::chan_elem<T>, Alloc>>(a, capacity, a);
  }
  // The nil channel (Go's `var c chan T`): `chan<T> c = nullptr;`, or
  // `c = nullptr` to switch a select case off. Send and receive block
  // forever, close is a usage_error, a select case on it is never chosen.
  // (A template so that `chan<int> c(0)` still means capacity 0.)
  template <class N, std::enable_if_t<std::is_null_pointer_v<N>, int> = 0>
  chan(N) noexcept {}

  // Blocks until a receiver takes v or there is room in the buffer.
  // On a closed channel (also one closed while blocked): goro::channel_closed.
  void send(T v) {
    if (GORO_UNLIKELY(!c_)) detail::block_forever_nil("chan send", detail::wait_reason::chan_send_nil);
    if constexpr (detail::chan_boxed<T>) {
      auto b = std::make_unique<T>(std::move(v));
      c_->send(b);
    } else {
      c_->send(v);
    }
  }
  // Blocks until a value arrives; nullopt once the channel is closed and drained.
  std::optional<T> recv() { return detail::chan_recv<T>(c_.get()); }
  // Never blocks: false (v intact) if a send would block. On a closed
  // channel: goro::channel_closed (as Go's select-with-default send).
  bool try_send(T& v) {
    if (!c_) return false;
    if constexpr (detail::chan_boxed<T>) {
      auto b = std::make_unique<T>(std::move(v));
      detail::chan_op r = c_->offer(b);
      if (r == detail::chan_op::done) return true;
      if constexpr (std::is_move_assignable_v<T>) {
        v = std::move(*b);
      } else {
        std::destroy_at(&v);
        std::construct_at(&v, std::move(*b));
      }
      if (r == detail::chan_op::closed) detail::raise_send_closed();
      return false;
    } else {
      return c_->try_send(v);
    }
  }
  bool try_send(T&& v) { return try_send(v); }
  // Never blocks: nullopt if nothing is ready (or closed and drained).
  std::optional<T> try_recv() { return detail::chan_try_recv<T>(c_.get()); }
  // Wakes every waiter. Twice: goro::channel_closed. Nil: goro::usage_error.
  void close() {
    if (GORO_UNLIKELY(!c_)) detail::raise_usage("close of nil channel (chan::close)");
    c_->close();
  }

  std::size_t size() const noexcept { return c_ ? c_->count.load(std::memory_order_relaxed) : 0; }
  std::size_t capacity() const noexcept { return c_ ? c_->cap : 0; }

  // Range-for receives until the channel is closed and drained:
  // `for (T v : ch)`. Each value is handed out once (as an rvalue).
  class iterator {
   public:
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    T&& operator*() noexcept { return std::move(*cur_); }
    iterator& operator++() {
      cur_.reset();
      next();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept { return !it.cur_; }

   private:
    friend class chan;
    friend class recv_chan<T>;
    explicit iterator(impl_type* c) : c_(c) { next(); }
    void next() { detail::chan_recv_into(c_, cur_); }
    impl_type* c_;
    std::optional<T> cur_;
  };
  iterator begin() { return iterator(c_.get()); }
  std::default_sentinel_t end() const noexcept { return {}; }

  friend bool operator==(const chan& a, const chan& b) noexcept { return a.c_ == b.c_; }
  friend bool operator==(const chan& a, std::nullptr_t) noexcept { return !a.c_; }
  explicit operator bool() const noexcept { return c_ != nullptr; }  // false: the nil channel

  // The channel (nullptr: nil), holding detail::chan_elem<T>.
  impl_type* impl() const noexcept { return c_.get(); }

 private:
  friend class recv_chan<T>;
  std::shared_ptr<impl_type> c_;
};

// A receive-only channel handle (Go's <-chan T): what after() and
// timer::c() return. Made from a chan<T> (implicitly), it refers to the same
// channel; it can receive, range, and be a select's on_recv case, but it
// cannot send or close (that does not compile). A moved-from one is nil.
template <class T>
class recv_chan {
 public:
  using iterator = typename chan<T>::iterator;
  using impl_type = typename chan<T>::impl_type;

  recv_chan() noexcept = default;  // the nil channel
  recv_chan(std::nullptr_t) noexcept {}
  template <class A>
  recv_chan(const chan<T, A>& c) noexcept : c_(c.c_) {}  // NOLINT(google-explicit-constructor): as Go's conversion
  template <class A>
  recv_chan(chan<T, A>&& c) noexcept : c_(std::move(c.c_)) {}

  std::optional<T> recv() { return detail::chan_recv<T>(c_.get()); }
  std::optional<T> try_recv() { return detail::chan_try_recv<T>(c_.get()); }
  std::size_t size() const noexcept { return c_ ? c_->count.load(std::memory_order_relaxed) : 0; }
  std::size_t capacity() const noexcept { return c_ ? c_->cap : 0; }

  iterator begin() { return iterator(c_.get()); }
  std::default_sentinel_t end() const noexcept { return {}; }

  friend bool operator==(const recv_chan& a, const recv_chan& b) noexcept { return a.c_ == b.c_; }
  friend bool operator==(const recv_chan& a, std::nullptr_t) noexcept { return !a.c_; }
  explicit operator bool() const noexcept { return c_ != nullptr; }  // false: the nil channel

  impl_type* impl() const noexcept { return c_.get(); }

 private:
  std::shared_ptr<impl_type> c_;
};

}  // namespace goro
