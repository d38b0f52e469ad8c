// goro::net: TCP on the network poller (detail/netpoll.hpp). A goroutine
// blocked on a socket parks; its M runs other goroutines. From a plain
// thread (not a goroutine) the same calls block the thread in poll(2).
//
//   auto ln = goro::net::listen_tcp("127.0.0.1:0");
//   goro::go([ln]() mutable { auto c = ln.accept(); ... });
//   auto c = goro::net::dial_tcp("127.0.0.1:" + std::to_string(ln.port()));
//
// Errors: std::system_error with the errno (connection refused, reset...;
// a malformed address is EINVAL, "goro: bad address \"foo\": missing port");
// a passed deadline is goro::timeout_error ("goro: i/o timeout"); an
// operation on a closed socket, or one a close interrupts, is
// goro::usage_error ("goro: use of closed network connection"); using an
// empty (default-constructed) handle is goro::usage_error.
//
// Handles are shared: copies refer to one socket, closed by close() or
// when the last copy goes. Goroutines may read (write) one socket
// concurrently: as in Go, they take turns (a read / write / accept call
// holds that direction's lock throughout, so one write()'s bytes are never
// interleaved with another's), and close() wakes them all.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "detail/config.hpp"
#include "detail/extm.hpp"
#include "detail/inside_blocking.hpp"
#include "detail/m.hpp"
#include "detail/netpoll.hpp"
#include "detail/park.hpp"
#include "error.hpp"
#include "time.hpp"

namespace goro::net {

using time_point = std::chrono::steady_clock::time_point;

namespace detail {
using namespace goro::detail;

[[noreturn]] inline void raise_closed() { raise<usage_error>("goro: use of closed network connection"); }
[[noreturn]] inline void raise_timeout() { raise<timeout_error>("goro: i/o timeout"); }

// read(2) / send(2) on a non-blocking socket as plain system calls: glibc's
// wrappers are thread-cancellation points, which costs two extra calls
// around each (a few per cent of a request/response server's CPU); Go
// makes raw system calls too. They set errno as the wrappers do. Under
// the sanitizers the wrappers stay: ThreadSanitizer intercepts them to
// see the happens-before edge a byte sent over a socket carries.
inline ssize_t sys_read(int fd, void* buf, std::size_t n) noexcept {
#if GORO_TSAN || GORO_ASAN
  return ::read(fd, buf, n);
#else
  return static_cast<ssize_t>(::syscall(SYS_read, fd, buf, n));
#endif
}
inline ssize_t sys_send(int fd, const void* buf, std::size_t n) noexcept {
#if GORO_TSAN || GORO_ASAN
  return ::send(fd, buf, n, MSG_NOSIGNAL);
#else
  return static_cast<ssize_t>(::syscall(SYS_sendto, fd, buf, n, MSG_NOSIGNAL, nullptr, 0));
#endif
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

// Deadline timers (Go's poll_runtime_pollSetDeadline): a sync timer per
// direction readies the waiter, which then sees the passed deadline.
// Setters are serialized by pd->lock; the timers' function takes no lock,
// so del() (which waits for a running one) cannot deadlock with it.
inline void set_deadline(poll_desc* pd, char mode, std::int64_t d) {
  std::lock_guard<spinlock> lk(pd->lock);
  goro::detail::timer& t = mode == 'r' ? pd->rt : pd->wt;
  timer_heap::del(&t);
  pd->deadline(mode).store(d, std::memory_order_seq_cst);
  if (d == 0) return;
  if (d <= nanotime()) {  // already passed: wake the waiter now
    if (g* gp = netpoller::unblock(pd, mode, false)) gp->sched->ready(gp);
    return;
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
  add_timer_anywhere(&t);
}

// Registers pd with the calling goroutine's poller if it is on none.
inline void ensure_registered(poll_desc* pd, netpoller* np) {
  if (pd->owner.load(std::memory_order_seq_cst) != nullptr) return;
  std::lock_guard<spinlock> lk(pd->lock);
  if (pd->owner.load(std::memory_order_seq_cst) == nullptr) np->open(pd);
}

// A plain thread's wait: poll(2) in slices, so a close or a deadline
// change is noticed within a slice.
inline constexpr int thread_poll_slice_ms = 20;
inline pd_error thread_wait(int fd, char mode, const std::atomic<bool>* closing, const std::atomic<std::int64_t>* dl) {
  extm_plain_op();  // checkdead: a plain thread waiting on a goro socket is a live external M
  for (;;) {
    if (closing && closing->load(std::memory_order_seq_cst)) return pd_error::closing;
    std::int64_t d = dl ? dl->load(std::memory_order_seq_cst) : 0;
    int ms = thread_poll_slice_ms;
    if (d != 0) {
      std::int64_t left = d - nanotime();
      if (left <= 0) return pd_error::timeout;
      if (left < std::int64_t{ms} * 1'000'000) ms = static_cast<int>((left + 999'999) / 1'000'000);
    }
    pollfd p{fd, static_cast<short>(mode == 'r' ? POLLIN : POLLOUT), 0};
    int r = ::poll(&p, 1, ms);
    if (r > 0) {
      if (p.revents & POLLNVAL) raise_system(EBADF, "poll");
      return pd_error::none;
    }
    if (r < 0) {
      int e = errno;  // right after the call (DESIGN §7)
      if (e != EINTR) raise_system(e, "poll");
    }
  }
}

// One direction's lock of a socket (the read or the write half of Go's
// fdMutex, internal/poll/fd_mutex.go): held for a whole read / write /
// accept call, so concurrent readers (writers) take turns and one write()
// is never interleaved with another's bytes. Waiters queue FIFO and the
// lock is handed to the oldest directly. close() wakes every queued
// waiter, whose lock() then returns false (Go's rwlock after
// increfAndClose). Goroutines park; plain threads sleep on a futex.
class io_lock {
 public:
  // True: held. False: closed (now, or while queued).
  bool lock() {
    std::uint32_t v = 0;
    if (GORO_LIKELY(word_.compare_exchange_strong(v, held, std::memory_order_acquire, std::memory_order_relaxed)))
      return true;
    lock_.lock();
    v = word_.load(std::memory_order_relaxed);
    for (;;) {
      if (v & closed) {
        lock_.unlock();
        return false;
      }
      if (!(v & held)) {
        if (word_.compare_exchange_weak(v, v | held, std::memory_order_acquire, std::memory_order_relaxed)) {
          lock_.unlock();
          return true;
        }
      } else if ((v & waiting) ||
                 word_.compare_exchange_weak(v, v | waiting, std::memory_order_acq_rel, std::memory_order_relaxed)) {
        break;  // held, and the holder's unlock() will take the slow path
      }
    }
    waiter w;
    w.ticket = 0;
    if (w.gp && inside_blocking(current_m())) w.gp = nullptr;  // goro::blocking: wait as a thread (as net waits do)
    queue_.push_back(&w);
    block_on(w, queue_, lock_, wait_reason::io_wait);
    exit_if_killed(w.gp);  // main_return: taken off the queue to end (detail/goexit.hpp)
    // unlock() handed us the lock (ticket 1) or close() woke us (0); either
    // wrote the ticket under lock_ before waking us.
    return w.ticket == 1;
  }

  void unlock() noexcept {
    std::uint32_t v = held;
    if (GORO_LIKELY(word_.compare_exchange_strong(v, 0, std::memory_order_release, std::memory_order_relaxed))) return;
    lock_.lock();
    waiter* w = queue_.pop_front();
    if (w) {
      w->ticket = 1;  // handed over: `held` stays set
      if (queue_.empty()) word_.fetch_and(~waiting, std::memory_order_release);
    } else {
      word_.fetch_and(~(held | waiting), std::memory_order_release);
    }
    lock_.unlock();
    if (w) wake(w);
  }

  // Fails every queued and later lock(); the holder keeps it until unlock().
  void close() noexcept {
    lock_.lock();
    word_.fetch_or(closed, std::memory_order_acq_rel);
    word_.fetch_and(~waiting, std::memory_order_relaxed);
    waiter* all = queue_.take_all();  // their tickets are 0
    lock_.unlock();
    wake_list(all);
  }

 private:
  static constexpr std::uint32_t held = 1, waiting = 2, closed = 4;
  std::atomic<std::uint32_t> word_{0};  // held | waiting | closed
  spinlock lock_;                       // queue_, and the waiting / closed bits
  waiter_queue queue_;
};

// A socket: the fd, its poll descriptor, and a reference count of
// operations in progress (a small Go fdMutex): close() marks it closed and
// wakes the waiters; the fd is closed by whoever drops the last reference,
// so no operation ever uses a closed (or reused) fd number.
class socket_state {
 public:
  explicit socket_state(int fd) : fd_(fd), pd_(pd_cache::alloc(fd)) {}
  socket_state(const socket_state&) = delete;
  socket_state& operator=(const socket_state&) = delete;
  ~socket_state() { destroy(); }  // no handle left: no operation in progress

  int fd() const noexcept { return fd_; }
  poll_desc* pd() const noexcept { return pd_; }

  // RAII reference for one operation; raises if closed.
  class op {
   public:
    explicit op(socket_state& s) : s_(s) {
      if (s.refs_.fetch_add(1, std::memory_order_seq_cst) & closed_bit) {
        s.decref();
        raise_closed();
      }
    }
    ~op() { s_.decref(); }
    op(const op&) = delete;
    op& operator=(const op&) = delete;

   private:
    socket_state& s_;
  };

  // RAII hold of the read ('r') or write ('w') lock for one call; raises
  // if the socket is (or gets, while queued) closed. Inside an op.
  class io_guard {
   public:
    io_guard(socket_state& s, char mode) : l_(mode == 'r' ? s.rlock_ : s.wlock_) {
      if (!l_.lock()) raise_closed();
    }
    ~io_guard() { l_.unlock(); }
    io_guard(const io_guard&) = delete;
    io_guard& operator=(const io_guard&) = delete;

   private:
    io_lock& l_;
  };

  // Go's pollDesc evict + fd close: idempotent.
  void close() noexcept {
    std::uint32_t old = refs_.fetch_add(closed_bit + 1, std::memory_order_seq_cst);
    if (old & closed_bit) {
      decref();
      return;
    }
    pd_->closing.store(true, std::memory_order_seq_cst);
    if (g* gp = netpoller::unblock(pd_, 'r', false)) gp->sched->ready(gp);
    if (g* gp = netpoller::unblock(pd_, 'w', false)) gp->sched->ready(gp);
    rlock_.close();  // goroutines queued behind a reader / writer
    wlock_.close();
    decref();
  }

  // Waits until fd_ is ready for `mode` ('r' / 'w'); raises on close or
  // deadline. The caller holds an op.
  void wait(char mode) {
    pd_error e;
    if (netpoller* np = goroutine_poller()) {
      ensure_registered(pd_, np);
      e = pd_wait_g(pd_, mode);
    } else {
      e = thread_wait(fd_, mode, &pd_->closing, &pd_->deadline(mode));
    }
    if (e == pd_error::closing) raise_closed();
    if (e == pd_error::timeout) raise_timeout();
  }

  void set_deadline(char mode, std::int64_t d) {
    op o(*this);
    detail::set_deadline(pd_, mode, d);
  }

 private:
  static constexpr std::uint32_t closed_bit = 1u << 31;

  void decref() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_seq_cst) - 1 == closed_bit) destroy();
  }
  // Runs once, with nobody inside an operation.
  void destroy() noexcept {
    if (destroyed_.exchange(true, std::memory_order_seq_cst)) return;
    timer_heap::del(&pd_->rt);  // sync: waits for a running deadline timer
    timer_heap::del(&pd_->wt);
    {
      std::lock_guard<spinlock> lk(pd_->lock);
      if (netpoller* np = pd_->owner.load(std::memory_order_seq_cst)) np->close(pd_);
    }
    ::close(fd_);
    pd_cache::free(pd_);
  }

  int fd_;
  poll_desc* pd_;
  std::atomic<std::uint32_t> refs_{0};  // closed_bit | operations in progress
  std::atomic<bool> destroyed_{false};
  io_lock rlock_, wlock_;  // one reader / writer at a time (Go's fdMutex)
};

struct sock_addr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  int family() const noexcept { return ss.ss_family; }
};

[[noreturn]] inline void raise_addr(std::string_view a, const char* why) {
  raise_system(EINVAL, (std::string("bad address \"") + std::string(a) + "\": " + why).c_str());
}

// "host:port", "[v6]:port"; host may be empty (any address) or
// "localhost" (127.0.0.1). Numeric hosts only otherwise: no DNS here.
inline sock_addr parse_addr(std::string_view hp) {
  std::string_view host, port;
  if (!hp.empty() && hp.front() == '[') {
    auto close = hp.find(']');
    if (close == std::string_view::npos) raise_addr(hp, "missing ']'");
    host = hp.substr(1, close - 1);
    if (close + 1 >= hp.size() || hp[close + 1] != ':') raise_addr(hp, "missing port");
    port = hp.substr(close + 2);
  } else {
    auto colon = hp.rfind(':');
    if (colon == std::string_view::npos) raise_addr(hp, "missing port");
    host = hp.substr(0, colon);
    if (host.find(':') != std::string_view::npos) raise_addr(hp, "too many colons (IPv6 needs [brackets])");
    port = hp.substr(colon + 1);
  }
  if (port.empty() || port.size() > 5) raise_addr(hp, "bad port");
  unsigned pn = 0;
  for (char c : port) {
    if (c < '0' || c > '9') raise_addr(hp, "bad port");
    pn = pn * 10 + static_cast<unsigned>(c - '0');
  }
  if (pn > 65535) raise_addr(hp, "port out of range");
  std::string h(host == "localhost" ? std::string_view("127.0.0.1") : host);
  sock_addr a;
  if (h.empty()) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a.ss);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_ANY);
    in->sin_port = htons(static_cast<std::uint16_t>(pn));
    a.len = sizeof(sockaddr_in);
  } else if (auto* in = reinterpret_cast<sockaddr_in*>(&a.ss); inet_pton(AF_INET, h.c_str(), &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons(static_cast<std::uint16_t>(pn));
    a.len = sizeof(sockaddr_in);
  } else if (auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.ss); inet_pton(AF_INET6, h.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<std::uint16_t>(pn));
    a.len = sizeof(sockaddr_in6);
  } else {
    raise_addr(hp, "not a numeric IP address");
  }
  return a;
}

inline int new_socket(int family) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) raise_system(errno, "socket");
  return fd;
}

inline void set_nodelay(int fd) noexcept {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Waits on an fd that goro::net does not own (wait_readable/_writable):
// a goroutine registers it for this wait only. When the fd is registered
// already (another goroutine waits on it: EEXIST), this wait registers a
// dup of it instead, which epoll treats as a registration of its own
// (epoll(7)), so every waiter is woken by the readiness (as with poll(2)
// from several threads).
inline bool wait_fd(int fd, char mode, time_point deadline) {
  std::int64_t d = deadline_ns(deadline);
  netpoller* np = goroutine_poller();
  if (!np) {
    std::atomic<std::int64_t> dl{d};
    if (thread_wait(fd, mode, nullptr, &dl) == pd_error::timeout) raise_timeout();
    return true;
  }
  if (d != 0 && d <= nanotime()) raise_timeout();
  poll_desc* pd = pd_cache::alloc(fd);
  struct cleanup {
    poll_desc* pd;
    int dup_fd = -1;
    ~cleanup() {
      timer_heap::del(&pd->rt);
      timer_heap::del(&pd->wt);
      if (netpoller* o = pd->owner.load(std::memory_order_seq_cst)) o->close(pd);
      pd_cache::free(pd);
      if (dup_fd >= 0) ::close(dup_fd);  // after the EPOLL_CTL_DEL
    }
  } c{pd};
  {
    std::lock_guard<spinlock> lk(pd->lock);
    int err = np->try_open(pd);
    if (err == EEXIST) {  // another waiter registered fd: register a dup
      c.dup_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
      if (c.dup_fd < 0) raise_system(errno, "fcntl(F_DUPFD_CLOEXEC)");
      pd->fd = c.dup_fd;
      err = np->try_open(pd);
    }
    if (err == EPERM) return true;  // epoll refuses regular files: they are always ready
    if (err != 0) raise_system(err, "epoll_ctl(ADD)");
  }
  if (d != 0) set_deadline(pd, mode, d);
  pd_error e = pd_wait_g(pd, mode);
  if (e == pd_error::timeout) raise_timeout();
  return true;
}

}  // namespace detail

// A TCP connection (a shared handle).
class conn {
 public:
  conn() = default;

  // Reads up to buf.size() bytes; returns 0 at end of stream (or for an
  // empty buf). Blocks (parks) until some data arrives.
  std::size_t read(std::span<std::byte> buf) {
    auto& s = state("read");
    detail::socket_state::op o(s);
    if (buf.empty()) return 0;
    detail::socket_state::io_guard g(s, 'r');
    for (;;) {
      ssize_t n = detail::sys_read(s.fd(), buf.data(), buf.size());
      if (n >= 0) return static_cast<std::size_t>(n);
      int e = errno;  // right after the call: errno is per thread (DESIGN §7)
      if (e == EAGAIN || e == EWOULDBLOCK)
        s.wait('r');
      else if (e != EINTR)
        goro::detail::raise_system(e, "read");
    }
  }

  // Writes all of buf (parks while the socket buffer is full).
  void write(std::span<const std::byte> buf) {
    auto& s = state("write");
    detail::socket_state::op o(s);
    detail::socket_state::io_guard g(s, 'w');
    std::size_t done = 0;
    while (done < buf.size()) {
      ssize_t n = detail::sys_send(s.fd(), buf.data() + done, buf.size() - done);
      if (n >= 0) {
        done += static_cast<std::size_t>(n);
        continue;
      }
      int e = errno;
      if (e == EAGAIN || e == EWOULDBLOCK)
        s.wait('w');
      else if (e != EINTR)
        goro::detail::raise_system(e, "write");
    }
  }
  void write(std::string_view s) { write(std::as_bytes(std::span<const char>(s.data(), s.size()))); }

  // Closes the socket (idempotent); goroutines blocked on it wake with
  // usage_error("goro: use of closed network connection").
  void close() { state("close").close(); }

  // Deadlines (steady_clock; a default time_point clears): an operation
  // blocked past it, or started after it, raises timeout_error. Setting a
  // later deadline lets later operations proceed.
  void set_deadline(time_point t) {
    set_read_deadline(t);
    set_write_deadline(t);
  }
  void set_read_deadline(time_point t) { state("set_read_deadline").set_deadline('r', detail::deadline_ns(t)); }
  void set_write_deadline(time_point t) { state("set_write_deadline").set_deadline('w', detail::deadline_ns(t)); }

  // The socket's fd (-1 for an empty handle); still owned by the conn.
  int native_handle() const noexcept { return s_ ? s_->fd() : -1; }
  explicit operator bool() const noexcept { return s_ != nullptr; }

 private:
  friend class listener;
  friend conn dial_tcp(std::string_view);
  explicit conn(int fd) : s_(std::make_shared<detail::socket_state>(fd)) {}
  detail::socket_state& state(const char* what) const {
    if (!s_) goro::detail::raise_usage((std::string("net::conn::") + what + " on an empty conn").c_str());
    return *s_;
  }
  std::shared_ptr<detail::socket_state> s_;
};

// A listening TCP socket (a shared handle).
class listener {
 public:
  listener() = default;

  // Waits for and returns the next connection.
  conn accept() {
    auto& s = state("accept");
    detail::socket_state::op o(s);
    detail::socket_state::io_guard g(s, 'r');
    for (;;) {
      int fd = ::accept4(s.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) {
        detail::set_nodelay(fd);
        conn c;
        GORO_TRY { c = conn(fd); }
        GORO_CATCH_ALL {
          ::close(fd);
          GORO_RETHROW;
        }
        return c;
      }
      int e = errno;
      if (e == EAGAIN || e == EWOULDBLOCK)
        s.wait('r');
      else if (e != EINTR && e != ECONNABORTED)
        goro::detail::raise_system(e, "accept");
    }
  }

  // The local port (useful after listening on port 0).
  std::uint16_t port() const {
    auto& s = state("port");
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&ss), &len) != 0)
      goro::detail::raise_system(errno, "getsockname");
    if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
    return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  }

  // Closes it; a goroutine blocked in accept() wakes with usage_error.
  void close() { state("close").close(); }

  int native_handle() const noexcept { return s_ ? s_->fd() : -1; }
  explicit operator bool() const noexcept { return s_ != nullptr; }

 private:
  friend listener listen_tcp(std::string_view);
  explicit listener(int fd) : s_(std::make_shared<detail::socket_state>(fd)) {}
  detail::socket_state& state(const char* what) const {
    if (!s_) goro::detail::raise_usage((std::string("net::listener::") + what + " on an empty listener").c_str());
    return *s_;
  }
  std::shared_ptr<detail::socket_state> s_;
};

// Listens on host_port ("127.0.0.1:0" picks a free port, "[::1]:0" IPv6).
inline listener listen_tcp(std::string_view host_port) {
  detail::sock_addr a = detail::parse_addr(host_port);
  int fd = detail::new_socket(a.family());
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a.ss), a.len) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    int e = errno;
    ::close(fd);
    goro::detail::raise_system(e, ("listen tcp " + std::string(host_port)).c_str());
  }
  listener ln;
  GORO_TRY { ln = listener(fd); }
  GORO_CATCH_ALL {
    ::close(fd);
    GORO_RETHROW;
  }
  return ln;
}

// Connects to host_port (non-blocking connect, then waits until writable
// and reads SO_ERROR). Refused: std::system_error(ECONNREFUSED).
inline conn dial_tcp(std::string_view host_port) {
  detail::sock_addr a = detail::parse_addr(host_port);
  int fd = detail::new_socket(a.family());
  conn c;
  GORO_TRY { c = conn(fd); }
  GORO_CATCH_ALL {
    ::close(fd);
    GORO_RETHROW;
  }
  auto& s = *c.s_;
  {
    detail::socket_state::op o(s);
    if (::connect(s.fd(), reinterpret_cast<sockaddr*>(&a.ss), a.len) != 0) {
      int e = errno;
      if (e != EINPROGRESS && e != EINTR) goro::detail::raise_system(e, ("dial tcp " + std::string(host_port)).c_str());
      s.wait('w');
      int err = 0;
      socklen_t len = sizeof err;
      if (::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err != 0) goro::detail::raise_system(err, ("dial tcp " + std::string(host_port)).c_str());
    }
    detail::set_nodelay(s.fd());
  }
  return c;
}

// Waits until fd is readable / writable (any fd: pipes, eventfds, another
// library's sockets), parking the goroutine (a plain thread blocks in
// poll(2)). Returns true when ready (a hang-up or error counts: the next
// call will not block); a passed deadline raises timeout_error. Several
// goroutines may wait on one fd at once (each is woken). The fd should not
// be one a goro::net handle owns, and must stay open during the wait; it
// is registered with the poller for this wait only. Regular files are
// always ready.
inline bool wait_readable(int fd, time_point deadline = {}) { return detail::wait_fd(fd, 'r', deadline); }
inline bool wait_writable(int fd, time_point deadline = {}) { return detail::wait_fd(fd, 'w', deadline); }

}  // namespace goro::net
