// goro::net's socket layer (internal): a socket's fd, its poll descriptor
// and per-direction locks (socket_state), waits on the poller or, from a
// plain thread, in poll(2), deadlines, and a context watcher. Every
// operation here reports failures as a std::error_code and never throws
// (the public std::error_code& overloads must work under -fno-exceptions);
// raise_net turns a code into the exception the throwing overloads raise.
// Used by net.hpp (TCP, Unix) and net_udp.hpp (UDP). The system calls
// are os/socket.hpp's (BSD sockets on Linux, Winsock on Windows).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>

#include "../chan.hpp"
#include "../context.hpp"
#include "../error.hpp"
#include "../net_address.hpp"
#include "../os/socket.hpp"
#include "../runtime.hpp"
#include "../select.hpp"
#include "../time.hpp"
#include "config.hpp"
#include "extm.hpp"
#include "goexit.hpp"
#include "inside_blocking.hpp"
#include "m.hpp"
#include "netpoll.hpp"
#include "park.hpp"
#include "preempt.hpp"
#include "sema.hpp"

namespace goro::net {

using time_point = std::chrono::steady_clock::time_point;

// A socket as the system names it (native_handle(), wait_readable): an
// int file descriptor on Linux, a SOCKET on Windows.
using native_socket = goro::detail::os::socket_t;

namespace detail {
using namespace goro::detail;

inline std::error_code closed_code() noexcept { return errc::closed; }
inline std::error_code deadline_error() noexcept { return {deadline_code, net_category()}; }
inline bool is_deadline(const std::error_code& ec) noexcept {
  return ec.category() == net_category() && ec.value() == deadline_code;
}
inline std::error_code empty_handle() noexcept { return std::make_error_code(std::errc::invalid_argument); }

[[noreturn]] inline void raise_closed() { raise<usage_error>("goro: use of closed network connection"); }
[[noreturn]] inline void raise_timeout() { raise<timeout_error>("goro: i/o timeout"); }

// The exception a throwing overload raises for ec (today's rules): closed
// -> usage_error, a passed deadline -> timeout_error, a malformed address
// -> system_error(EINVAL, "bad address \"<addr>\": <why>"), an errno ->
// system_error with it, anything else (name resolution) -> system_error
// with that code; an unknown service names itself as Go's message does
// ("goro: dial tcp h:nosuch: lookup tcp/nosuch: unknown port"). `what`
// names the call ("read", "dial tcp 1.2.3.4:5").
[[noreturn]] inline void raise_net(const std::error_code& ec, const std::string& what, std::string_view addr = {}) {
  if (ec == errc::closed) raise_closed();
  if (is_deadline(ec)) raise_timeout();
  if (ec.category() == net_category() && ec.value() >= bad_addr_first && ec.value() <= bad_addr_last)
    raise_system(EINVAL, ("bad address \"" + std::string(addr) + "\": " + ec.message()).c_str());
  if (ec.category() == std::generic_category()) raise_system(ec.value(), what.c_str());
  std::string msg = "goro: " + what;
  if (ec == errc::unknown_port) {  // Go's "lookup tcp/nosuch": the network from what, the service from addr
    const auto sp = what.find(' ');
    const auto colon = addr.rfind(':');
    msg += ": lookup " +
           (sp == std::string::npos ? std::string() : what.substr(sp + 1, what.find(' ', sp + 1) - sp - 1)) + "/" +
           std::string(colon == std::string_view::npos ? addr : addr.substr(colon + 1));
  }
#if GORO_EXCEPTIONS
  throw std::system_error(ec, msg);
#else
  fatal((msg + ": " + ec.message()).c_str());
#endif
}

// Why a context is done, as a code: its deadline passed (reported as a
// passed deadline: timed_out / timeout_error) or it was cancelled
// (ECANCELED, Go's "operation was canceled").
inline std::error_code context_code(const goro::context& ctx) noexcept {
  switch (ctx.err()) {
    case cancel_reason::none:
      return {};
    case cancel_reason::deadline_exceeded:
      return deadline_error();
    default:
      return errno_code(ECANCELED);
  }
}

// steady_clock time_point -> nanotime() (the same clock); the epoch clears.
inline std::int64_t deadline_ns(time_point t) noexcept {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  if (t == time_point{}) return 0;
  return ns < 1 ? 1 : ns;
}

// The calling goroutine's runtime poller, or nullptr on a plain thread (or
// inside goro::blocking, whose thread may block).
inline netpoller* goroutine_poller() noexcept {
  m_base* m = current_m();
  if (!m || !m->curg || m->in_blocking || !m->sched) return nullptr;
  return m->sched->poller();
}

// A descriptor for fd: from the calling goroutine's runtime's pool when
// that runtime was given an allocator (memory set), else from the
// process-wide cache, as before allocators existed (a plain thread, a
// runtime on std::allocator: no pool, one test more). May raise bad_alloc.
inline poll_desc* pd_alloc(native_socket fd) {
  m_base* m = current_m();
  if (m && m->sched && m->sched->memory)
    if (netpoller* np = m->sched->poller())
      if (pd_pool* pool = np->pool()) return pool->alloc(fd);
  return pd_cache::alloc(fd);
}
// Back where pd came from (see pd_cache::free).
inline void pd_free(poll_desc* pd) noexcept {
  if (pd->pool)
    pd->pool->free(pd);
  else
    pd_cache::free(pd);
}

// Deadline timers (Go's poll_runtime_pollSetDeadline): a sync timer per
// direction readies the waiter, which then sees the passed deadline.
// Setters are serialized by pd->lock (rearm_timer, time.hpp); the timers'
// function takes no lock, so del() (which waits for a running one) cannot
// deadlock with it.
GORO_DECL void set_deadline(poll_desc* pd, char mode, std::int64_t d);
// set_deadline's part under pd->lock, its timer off every heap: wakes the
// waiter if d has passed, else fills in the timer. True: queue it.
GORO_DECL bool arm_deadline_locked(poll_desc* pd, char mode, std::int64_t d);

// A goroutine about to park on pd in `mode`: a deadline that has not
// passed but whose timer is on no heap is re-armed on the caller's
// runtime. That happens when the runtime that armed it was destroyed (its
// heaps are cleared, the timer dropped) while the socket lives on: a
// goroutine of another runtime then parked past the deadline for good.
GORO_DECL void keep_deadline_armed(poll_desc* pd, char mode);

// Registers pd with the calling goroutine's poller if it is on none.
GORO_DECL std::error_code ensure_registered(poll_desc* pd, netpoller* np);

// A plain thread's wait: poll(2) (WSAPoll) in slices, so a close, a deadline change
// or a cancelled context (ctx, may be null) is noticed within a slice.
inline constexpr int thread_poll_slice_ms = 20;
GORO_DECL std::error_code thread_wait(native_socket fd, char mode, const std::atomic<bool>* closing,
                                      const std::atomic<std::int64_t>* dl, const goro::context* ctx = nullptr);

// Wakes a goroutine's wait on pd when a context is done (Go's
// ctx.Done() watcher in netFD.connect): a goroutine selects on
// ctx.done() and a stop channel; if the context wins, it sets pd's `mode`
// deadline to the past, which wakes the waiter as a passed deadline would.
// stop() (called while pd is still alive) ends the watcher and says
// whether it fired; the caller then restores the deadline it had. Only
// for goroutines: a plain thread's wait polls the context itself
// (thread_wait), and background() has nothing to watch.
class ctx_watch {
 public:
  GORO_DECL ctx_watch(const goro::context& ctx, poll_desc* pd, char mode);
  ctx_watch(const ctx_watch&) = delete;
  ctx_watch& operator=(const ctx_watch&) = delete;
  ~ctx_watch() { stop(); }

  GORO_DECL bool stop();

 private:
  chan<std::monostate> stop_ = nullptr;  // nil: no watcher
  chan<bool> fired_ = nullptr;
};

// One direction's lock of a socket (the read or the write half of Go's
// fdMutex, internal/poll/fd_mutex.go): held for a whole read / write /
// accept call, so concurrent readers (writers) take turns and one write()
// is never interleaved with another's bytes.
//
// Word: bit 0 held, bit 1 closed, and above them the waiters counted in
// (blocked or about to block on) sema_. Uncontended lock and unlock are one
// CAS each. Contended, waiters queue FIFO on sema_, and unlock() hands the
// lock to the oldest directly -- held stays set, one waiter is uncounted
// and one token released: goro::mutex's starvation-mode hand-off (sync.hpp,
// detail/sema.hpp), with no spinning and no barging, always. A token that
// arrives before its waiter has queued is kept by sema_ for it.
//
// close() sets closed, uncounts every waiter and releases a token for each:
// they wake, see closed and fail (Go's rwlock after increfAndClose); so does
// a waiter handed the lock just before close(), which then leaves it held:
// no later lock() wants it. The holder keeps it until unlock().
class io_lock {
 public:
  // True: held. False: closed (now, or while queued).
  bool lock() {
    // Every read, write, accept, send and receive passes here: a goro call
    // that can switch honours a pending preemption request even when the
    // syscall after it never parks (detail/preempt.hpp), and ends the
    // goroutine after main returned (detail/goexit.hpp).
    call_point();
    std::uint32_t v = 0;
    if (GORO_LIKELY(word_.compare_exchange_strong(v, held, std::memory_order_acquire, std::memory_order_relaxed)))
      return true;
    return lock_slow(v);
  }

  void unlock() noexcept {
    std::uint32_t v = held;
    if (GORO_LIKELY(word_.compare_exchange_strong(v, 0, std::memory_order_release, std::memory_order_relaxed))) return;
    for (;;) {
      if ((v >> waiter_shift) != 0) {  // hand over: held stays set
        if (word_.compare_exchange_weak(v, v - one_waiter, std::memory_order_release, std::memory_order_relaxed)) {
          sema_.release();
          return;
        }
      } else if (word_.compare_exchange_weak(v, v & ~held, std::memory_order_release, std::memory_order_relaxed)) {
        return;
      }
    }
  }

  // Fails every queued and later lock(); the holder keeps it until unlock().
  void close() noexcept {
    std::uint32_t v = word_.load(std::memory_order_relaxed);
    while (!word_.compare_exchange_weak(v, (v | closed) & (held | closed), std::memory_order_acq_rel,
                                        std::memory_order_relaxed)) {
    }
    sema_.release(v >> waiter_shift);
  }

 private:
  static constexpr std::uint32_t held = 1, closed = 2;
  static constexpr unsigned waiter_shift = 2;
  static constexpr std::uint32_t one_waiter = 1u << waiter_shift;

  GORO_NOINLINE bool lock_slow(std::uint32_t v) {
    for (;;) {
      if (v & closed) return false;
      if (!(v & held)) {  // no waiters either (unlock hands over while there are)
        if (word_.compare_exchange_weak(v, v | held, std::memory_order_acquire, std::memory_order_relaxed)) return true;
      } else if (word_.compare_exchange_weak(v, v + one_waiter, std::memory_order_relaxed, std::memory_order_relaxed)) {
        break;
      }
    }
    g* gp = parking_g();  // nullptr inside goro::blocking: wait as a thread (as net waits do)
    sema_.acquire(false, &uncount_waiter, this, wait_reason::io_wait);
    exit_if_killed(gp);  // main_return: taken off the queue (uncounted) to end (detail/goexit.hpp)
    // Our token: unlock() handed us the lock, or close() woke us.
    return !(word_.load(std::memory_order_acquire) & closed);
  }

  // A waiter taken off sema_'s queue without a token (main_return ending
  // its goroutine): it no longer counts (as goro::mutex's uncount_waiter).
  static void uncount_waiter(void* self) noexcept {
    auto& st = static_cast<io_lock*>(self)->word_;
    std::uint32_t v = st.load(std::memory_order_relaxed);
    while ((v >> waiter_shift) != 0 && !st.compare_exchange_weak(v, v - one_waiter, std::memory_order_relaxed)) {
    }
  }

  std::atomic<std::uint32_t> word_{0};  // held | closed | waiters << waiter_shift
  sema sema_;                           // the queue; a token is the lock handed over (or close)
};

// An RAII hold of what Acquire (a bool member function of T) takes and
// Release gives back; false (and nothing held) when Acquire failed.
// socket_state::op and io_guard.
template <class T, bool (T::*Acquire)(), void (T::*Release)() noexcept>
class hold {
 public:
  // Acquire may end the goroutine (io_lock::lock after main returned).
  explicit hold(T& t) : t_(t), ok_((t.*Acquire)()) {}
  ~hold() {
    if (ok_) (t_.*Release)();
  }
  hold(const hold&) = delete;
  hold& operator=(const hold&) = delete;
  explicit operator bool() const noexcept { return ok_; }

 private:
  T& t_;
  bool ok_;
};

// A socket: the fd, its poll descriptor, and a reference count of
// operations in progress (a small Go fdMutex): close() marks it closed and
// wakes the waiters; the fd is closed by whoever drops the last reference,
// so no operation ever uses a closed (or reused) fd number.
class socket_state {
  static constexpr std::uint32_t closed_bit = 1u << 31;

  // An operation's reference (op): false, and none taken, once closed.
  bool incref() noexcept {
    if (!(refs_.fetch_add(1, std::memory_order_seq_cst) & closed_bit)) return true;
    decref();
    return false;
  }
  void decref() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_seq_cst) - 1 == closed_bit) destroy();
  }

 public:
  explicit socket_state(native_socket fd, address peer = {}) : fd_(fd), pd_(pd_alloc(fd)), peer_(peer) {}
  socket_state(const socket_state&) = delete;
  socket_state& operator=(const socket_state&) = delete;
  ~socket_state() { destroy(); }  // no handle left: no operation in progress

  native_socket fd() const noexcept { return fd_; }
  poll_desc* pd() const noexcept { return pd_; }
  // The peer's address, when known at creation (accepted, dialed).
  const address& peer() const noexcept { return peer_; }
  // This end's address, noted once bound or connected (Go's netFD laddr),
  // so that it is still known after close; empty until then, or if
  // getsockname failed.
  const address& local() const noexcept { return local_; }
  // Notes local() (getsockname): once, before the socket is shared.
  GORO_DECL void note_local() noexcept;
  // A path unlinked by close(), or when the socket is destroyed unclosed
  // (a Unix listener's, as Go).
  void unlink_on_close(std::string path) { unlink_path_ = std::move(path); }

  // RAII reference for one operation; false (and nothing held) if closed.
  class op : public hold<socket_state, &socket_state::incref, &socket_state::decref> {
   public:
    explicit op(socket_state& s) noexcept : hold(s) {}
  };

  // RAII hold of the read ('r') or write ('w') lock for one call; false if
  // the socket is (or gets, while queued) closed. Inside an op.
  class io_guard : public hold<io_lock, &io_lock::lock, &io_lock::unlock> {
   public:
    io_guard(socket_state& s, char mode) : hold(mode == 'r' ? s.rlock_ : s.wlock_) {}
  };

  // Go's pollDesc evict + fd close: idempotent. The first call waits for
  // the operations it woke to leave and the fd to be closed (Go's csema).
  GORO_DECL void close() noexcept;
  // close() was called (the fd is closed, or will be once the operations
  // in progress end).
  bool closed() const noexcept { return (refs_.load(std::memory_order_seq_cst) & closed_bit) != 0; }

  // Waits until fd_ is ready for `mode` ('r' / 'w'): none, closed, a
  // passed deadline, or (a plain thread) ctx done. The caller holds an op.
  GORO_DECL std::error_code wait(char mode, const goro::context* ctx = nullptr);

  GORO_DECL std::error_code set_deadline(char mode, std::int64_t d);

  // Go's prepareRead / prepareWrite: a call made after its deadline fails
  // even when it would not block (docs/net.md). Under the io_guard.
  std::error_code passed(char mode) const noexcept {
    std::int64_t d = pd_->deadline(mode).load(std::memory_order_seq_cst);
    return d != 0 && d <= nanotime() ? deadline_error() : std::error_code{};
  }

 private:
  // Runs once, with nobody inside an operation.
  GORO_DECL void destroy() noexcept;

  native_socket fd_;
  poll_desc* pd_;
  std::atomic<std::uint32_t> refs_{0};  // closed_bit | operations in progress
  std::atomic<bool> destroyed_{false};
  sema destroyed_sema_;  // a token once destroy() has closed the fd (close() waits for it)
  static constexpr std::int64_t close_wait_limit_ns = 100'000'000;
  io_lock rlock_, wlock_;  // one reader / writer at a time (Go's fdMutex)
  address peer_;
  address local_;
  std::string unlink_path_;
};

// Wraps fd in a socket_state (closing fd if that fails).
GORO_DECL std::shared_ptr<socket_state> adopt_fd(native_socket fd, address peer = {});

// A new non-blocking, close-on-exec socket wrapped in a socket_state (the
// fd is closed if the wrapping fails).
GORO_DECL std::shared_ptr<socket_state> new_socket(int family, int type, std::error_code& ec, address peer = {});

// The earlier of two deadlines (0: none).
inline std::int64_t earlier(std::int64_t a, std::int64_t b) noexcept {
  if (a == 0) return b;
  if (b == 0) return a;
  return a < b ? a : b;
}
GORO_DECL std::int64_t context_deadline(const goro::context* ctx) noexcept;

// Waits on an fd that goro::net does not own (wait_readable/_writable):
// a goroutine registers it for this wait only. When the fd is registered
// already (another goroutine waits on it: EEXIST), this wait registers a
// dup of it instead, which epoll treats as a registration of its own
// (epoll(7)), so every waiter is woken by the readiness (as with poll(2)
// from several threads). (Windows' poller never refuses a second
// registration: each waiter's AFD poll is its own.) With a context, its deadline bounds the wait too,
// and its cancellation ends it (context_code).
GORO_DECL std::error_code wait_fd(native_socket fd, char mode, std::int64_t d, const goro::context* ctx = nullptr);

// Connects a new socket of `type` to a: a non-blocking connect, then a
// wait until writable (bounded by deadline d and ctx) and SO_ERROR.
GORO_DECL std::shared_ptr<socket_state> connect_to(const address& a, int type, std::int64_t d, const goro::context* ctx,
                                                   std::error_code& ec);

// A bound (and for streams listening) socket on a.
GORO_DECL std::shared_ptr<socket_state> bind_to(const address& a, int type, std::error_code& ec);

// getsockname of s as an address (local_address when note_local had none).
GORO_DECL address sock_name(const std::shared_ptr<socket_state>& s, std::error_code& ec);

}  // namespace detail
}  // namespace goro::net

#if GORO_COMPILE_RUNTIME
namespace goro::net::detail {

GORO_DECL void set_deadline(poll_desc* pd, char mode, std::int64_t d) {
  goro::detail::timer& t = mode == 'r' ? pd->rt : pd->wt;
  rearm_timer(pd->lock, t, [&](bool) {
    pd->deadline(mode).store(d, std::memory_order_seq_cst);
    return arm_deadline_locked(pd, mode, d);
  });
}

GORO_DECL bool arm_deadline_locked(poll_desc* pd, char mode, std::int64_t d) {
  goro::detail::timer& t = mode == 'r' ? pd->rt : pd->wt;
  if (d == 0) return false;
  if (d <= nanotime()) {  // already passed: wake the waiter now
    if (g* gp = netpoller::unblock(pd, mode, false)) gp->sched->ready(gp);
    return false;
  }
  t.when = d;
  t.period = 0;
  t.sync = true;
  t.arg = pd;
  t.seq = pd->seq.load(std::memory_order_seq_cst);
  t.f = mode == 'r' ? +[](void* a, std::uintptr_t seq,
                          std::int64_t) { netpoller::deadline_fired(static_cast<poll_desc*>(a), 'r', seq); }
                    : +[](void* a, std::uintptr_t seq, std::int64_t) {
                        netpoller::deadline_fired(static_cast<poll_desc*>(a), 'w', seq);
                      };
  return true;
}

GORO_DECL void keep_deadline_armed(poll_desc* pd, char mode) {
  goro::detail::timer& t = mode == 'r' ? pd->rt : pd->wt;
  // Cheap look first: no deadline, or its timer queued. A timer off its
  // heap because it fired (or is firing) has a deadline that has passed.
  std::int64_t d = pd->deadline(mode).load(std::memory_order_seq_cst);
  if (d == 0 || t.where.load(std::memory_order_acquire) != nullptr || d <= nanotime()) return;
  // Under pd->lock (rearm_timer), against a setter: re-read the deadline
  // it may have changed, and queue the timer again unless it is queued.
  rearm_timer(pd->lock, t, [&](bool pending) {
    if (pending) return true;  // a setter armed it meanwhile: back where we are
    return arm_deadline_locked(pd, mode, pd->deadline(mode).load(std::memory_order_seq_cst));
  });
}

GORO_DECL std::error_code ensure_registered(poll_desc* pd, netpoller* np) {
  if (pd->owner.load(std::memory_order_seq_cst) != nullptr) return {};
  std::lock_guard<spinlock> lk(pd->lock);
  if (pd->owner.load(std::memory_order_seq_cst) == nullptr)
    if (int err = np->try_open(pd)) return errno_code(err);
  return {};
}

GORO_DECL std::error_code thread_wait(native_socket fd, char mode, const std::atomic<bool>* closing,
                                      const std::atomic<std::int64_t>* dl, const goro::context* ctx) {
  extm_plain_op();  // checkdead: a plain thread waiting on a goro socket is a live external M
  for (;;) {
    if (closing && closing->load(std::memory_order_seq_cst)) return closed_code();
    if (ctx && ctx->err() != cancel_reason::none) return context_code(*ctx);
    std::int64_t d = dl ? dl->load(std::memory_order_seq_cst) : 0;
    int ms = thread_poll_slice_ms;
    if (d != 0) {
      std::int64_t left = d - nanotime();
      if (left <= 0) return deadline_error();
      if (left < std::int64_t{ms} * 1'000'000) ms = static_cast<int>((left + 999'999) / 1'000'000);
    }
    int r = os::socket_poll(fd, mode, ms);
    if (r > 0) return {};
    if (r < 0 && r != -EINTR) return errno_code(-r);
  }
}

GORO_DECL ctx_watch::ctx_watch(const goro::context& ctx, poll_desc* pd, char mode) {
  recv_chan<std::monostate> done = ctx.done();
  if (!done || !goroutine_poller()) return;
  stop_ = chan<std::monostate>();
  fired_ = chan<bool>(1);
  goro::go([done, stop = stop_, fired = fired_, pd, mode]() mutable {
    bool f = false;
    goro::select(goro::on_recv(done,
                               [&f, pd, mode](std::optional<std::monostate>) {
                                 set_deadline(pd, mode, 1);
                                 f = true;
                               }),
                 goro::on_recv(stop, [](std::optional<std::monostate>) {}));
    fired.send(f);
  });
}

GORO_DECL bool ctx_watch::stop() {
  if (!stop_) return false;
  stop_.close();
  stop_ = nullptr;
  return fired_.recv().value_or(false);
}

GORO_DECL void socket_state::close() noexcept {
  // Sets closed_bit and takes an op at once, only if not closed yet: adding
  // closed_bit a second time would carry it out of the word, reopening the
  // socket for ops on its (closed, maybe reused) fd and freed poll_desc.
  std::uint32_t old = refs_.load(std::memory_order_seq_cst);
  do {
    if (old & closed_bit) return;
  } while (!refs_.compare_exchange_weak(old, (old | closed_bit) + 1, std::memory_order_seq_cst));
  pd_->closing.store(true, std::memory_order_seq_cst);
  if (g* gp = netpoller::unblock(pd_, 'r', false)) gp->sched->ready(gp);
  if (g* gp = netpoller::unblock(pd_, 'w', false)) gp->sched->ready(gp);
  rlock_.close();  // goroutines queued behind a reader / writer
  wlock_.close();
  // A Unix listener's file goes now, as in Go's Close: the fd is closed
  // only once the operations in progress leave (a woken accept that has
  // not run yet), and until then listen_unix on the path was EADDRINUSE.
  // Cleared, so that destroy() cannot remove a file bound there since.
  if (!unlink_path_.empty()) {
    os::unlink_path(unlink_path_.c_str());
    unlink_path_.clear();
  }
  decref();
  // Go's FD.Close waits until the fd is closed (fd.csema): when close()
  // returns, a listener's port is free and the peer has the end of stream,
  // though a goroutine woken above has not run yet (a plain thread notices
  // within a poll slice). destroy() releases the token. Bounded (100 ms,
  // five slices): an operation whose goroutine ended without destructors
  // (-fno-exceptions, after main returned) never leaves, and a woken
  // goroutine a busy runtime has not run by then closes the fd later.
  destroyed_sema_.acquire_until(when_after(nanotime(), close_wait_limit_ns), nullptr, nullptr, wait_reason::io_wait);
}

GORO_DECL std::error_code socket_state::wait(char mode, const goro::context* ctx) {
  if (netpoller* np = goroutine_poller()) {
    if (std::error_code ec = ensure_registered(pd_, np)) return ec;
    keep_deadline_armed(pd_, mode);
    switch (pd_wait_g(pd_, mode)) {
      case pd_error::none:
        return {};
      case pd_error::closing:
        return closed_code();
      case pd_error::timeout:
        return deadline_error();
    }
  }
  return thread_wait(fd_, mode, &pd_->closing, &pd_->deadline(mode), ctx);
}

GORO_DECL void socket_state::note_local() noexcept {
  sockaddr_storage ss{};
  os::sock_len len = sizeof ss;
  if (os::socket_name(fd_, false, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
    local_ = address::from_native(reinterpret_cast<sockaddr*>(&ss), len);
}

GORO_DECL std::error_code socket_state::set_deadline(char mode, std::int64_t d) {
  op o(*this);
  if (!o) return closed_code();
  detail::set_deadline(pd_, mode, d);
  return {};
}

GORO_DECL void socket_state::destroy() noexcept {
  if (destroyed_.exchange(true, std::memory_order_seq_cst)) return;
  timer_heap::del(&pd_->rt);  // sync: waits for a running deadline timer
  timer_heap::del(&pd_->wt);
  {
    // The owner may be another runtime's poller, whose end may have begun
    // (pinned: netpoller::pin_owner); an owner in its end has detached pd
    // already, and closes its epoll fd itself.
    std::lock_guard<spinlock> lk(pd_->lock);
    netpoller::pin p;
    netpoller::pin_owner(pd_, p);
    GORO_CHAOS_POINT("netpoll.destroy");
    if (netpoller* np = p.get()) np->close(pd_);
  }
  os::close_socket(fd_);
  pd_free(pd_);
  if (!unlink_path_.empty()) os::unlink_path(unlink_path_.c_str());
  destroyed_sema_.release();  // close() may wait for it; the last access to *this
}

GORO_DECL std::shared_ptr<socket_state> adopt_fd(native_socket fd, address peer) {
  std::shared_ptr<socket_state> s;
  GORO_TRY { s = std::make_shared<socket_state>(fd, peer); }
  GORO_CATCH_ALL {
    os::close_socket(fd);
    GORO_RETHROW;
  }
  return s;
}

GORO_DECL std::shared_ptr<socket_state> new_socket(int family, int type, std::error_code& ec, address peer) {
  int err = 0;
  native_socket fd = os::open_socket(family, type, &err);
  if (fd == os::invalid_socket) {
    ec = errno_code(err);
    return nullptr;
  }
  return adopt_fd(fd, peer);
}

GORO_DECL std::int64_t context_deadline(const goro::context* ctx) noexcept {
  if (!ctx) return 0;
  auto d = ctx->deadline();
  return d ? deadline_ns(*d) : 0;
}

GORO_DECL std::error_code wait_fd(native_socket fd, char mode, std::int64_t d, const goro::context* ctx) {
  if (ctx && ctx->err() != cancel_reason::none) return context_code(*ctx);
  d = earlier(d, context_deadline(ctx));
  netpoller* np = goroutine_poller();
  if (!np) {
    std::atomic<std::int64_t> dl{d};
    return thread_wait(fd, mode, nullptr, &dl, ctx);
  }
  if (d != 0 && d <= nanotime()) return deadline_error();
  poll_desc* pd = pd_alloc(fd);
  struct cleanup {
    poll_desc* pd;
    native_socket dup_fd = os::invalid_socket;
    ~cleanup() {
      timer_heap::del(&pd->rt);
      timer_heap::del(&pd->wt);
      // Our own runtime's poller (or none): it lives while we run.
      if (netpoller* o = pd->owner.load(std::memory_order_seq_cst)) o->close(pd);
      pd_free(pd);
      if (dup_fd != os::invalid_socket) os::close_socket(dup_fd);  // after the EPOLL_CTL_DEL
    }
  } c{pd};
  {
    std::lock_guard<spinlock> lk(pd->lock);
    int err = np->try_open(pd);
    if (err == EEXIST) {  // another waiter registered fd: register a dup
      int e = 0;
      c.dup_fd = os::dup_socket(fd, &e);
      if (c.dup_fd == os::invalid_socket) return errno_code(e);
      pd->fd = c.dup_fd;
      err = np->try_open(pd);
    }
    if (err == EPERM) return {};  // epoll refuses regular files: they are always ready
    if (err != 0) return errno_code(err);
  }
  if (d != 0) set_deadline(pd, mode, d);
  ctx_watch w(ctx ? *ctx : goro::context{}, pd, mode);
  pd_error e = pd_wait_g(pd, mode);
  if (w.stop() || (e == pd_error::timeout && ctx && ctx->err() != cancel_reason::none)) return context_code(*ctx);
  if (e == pd_error::timeout) return deadline_error();
  return {};
}

GORO_DECL std::shared_ptr<socket_state> connect_to(const address& a, int type, std::int64_t d, const goro::context* ctx,
                                                   std::error_code& ec) {
  if (ctx && ctx->err() != cancel_reason::none) return ec = context_code(*ctx), nullptr;
  d = earlier(d, context_deadline(ctx));
  if (d != 0 && d <= nanotime()) return ec = deadline_error(), nullptr;
  auto s = new_socket(a.family(), type, ec, a);
  if (!s) return nullptr;
  socket_state::op o(*s);
  int e = os::socket_connect(s->fd(), a.native(), a.native_size());
  if (e == 0) return s->note_local(), s;
  if (e != EINPROGRESS && e != EINTR) return ec = errno_code(e), nullptr;
  if (d != 0) set_deadline(s->pd(), 'w', d);
  {
    ctx_watch w(ctx ? *ctx : goro::context{}, s->pd(), 'w');
    ec = s->wait('w', ctx);
    if (w.stop() || (is_deadline(ec) && ctx && ctx->err() != cancel_reason::none)) ec = context_code(*ctx);
  }
  if (ec) return nullptr;
  if (int err = os::socket_take_error(s->fd())) return ec = errno_code(err), nullptr;
  if (d != 0) set_deadline(s->pd(), 'w', 0);
  s->note_local();
  return s;
}

GORO_DECL std::shared_ptr<socket_state> bind_to(const address& a, int type, std::error_code& ec) {
  auto s = new_socket(a.family(), type, ec);
  if (!s) return nullptr;
  if (a.is_ip() && type == SOCK_STREAM) os::socket_set_reuseaddr(s->fd());
  int err = os::socket_bind(s->fd(), a.native(), a.native_size());
  if (err == 0 && type == SOCK_STREAM) err = os::socket_listen(s->fd());
  if (err != 0) return ec = errno_code(err), nullptr;
  s->note_local();
  return s;
}

GORO_DECL address sock_name(const std::shared_ptr<socket_state>& s, std::error_code& ec) {
  if (!s) return ec = empty_handle(), address{};
  socket_state::op o(*s);
  if (!o) return ec = closed_code(), address{};
  sockaddr_storage ss{};
  os::sock_len len = sizeof ss;
  if (int err = os::socket_name(s->fd(), false, reinterpret_cast<sockaddr*>(&ss), &len))
    return ec = errno_code(err), address{};
  ec.clear();
  return address::from_native(reinterpret_cast<sockaddr*>(&ss), len);
}

}  // namespace goro::net::detail
#endif  // GORO_COMPILE_RUNTIME
