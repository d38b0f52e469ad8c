// goro::net: TCP, Unix and UDP sockets on the network poller
// (detail/netpoll.hpp). A goroutine blocked on a socket parks; its M runs
// other goroutines. From a plain thread (not a goroutine) the same calls
// block the thread in poll(2) (WSAPoll on Windows). On Windows the poller
// is an I/O completion port (os/windows/poller.hpp) and Unix sockets are
// not offered (listen_unix / dial_unix fail with
// std::errc::address_family_not_supported: os/windows/socket.hpp).
//
//   auto ln = goro::net::listen_tcp("127.0.0.1:0");
//   goro::go([ln]() mutable { auto c = ln.accept(); ... });
//   auto c = goro::net::dial_tcp("localhost:" + std::to_string(ln.port()));
//
// Errors: std::system_error with the errno (connection refused, reset...;
// a malformed address is EINVAL, "goro: bad address \"foo\": missing port");
// a passed deadline is goro::timeout_error ("goro: i/o timeout"); an
// operation on a closed socket, or one a close interrupts, is
// goro::usage_error ("goro: use of closed network connection"); using an
// empty (default-constructed) handle is goro::usage_error. Every call that
// can fail also has an overload taking std::error_code& last, which
// reports instead of throwing (net_address.hpp lists the codes): the way
// to use goro::net with -fno-exceptions.
//
// Handles are shared: copies refer to one socket, closed by close() or
// when the last copy goes. Goroutines may read (write) one socket
// concurrently: as in Go, they take turns (a read / write / accept call
// holds that direction's lock throughout, so one write()'s bytes are never
// interleaved with another's), and close() wakes them all.
//
// Headers: net_address.hpp (address, lookup_host, error codes), this one
// (conn, listener, TCP and Unix streams, wait_readable / wait_writable),
// net_udp.hpp (packet_conn); detail/net_socket.hpp is the socket layer.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "context.hpp"
#include "detail/config.hpp"
#include "detail/net_dial.hpp"
#include "detail/net_handle.hpp"
#include "detail/net_socket.hpp"
#include "error.hpp"
#include "net_address.hpp"
#include "os/socket.hpp"
#include "time.hpp"

namespace goro::net {

class conn;
class listener;
namespace detail {
struct handles;  // makes conns and listeners from socket_states

inline void set_nodelay(native_socket fd) noexcept { goro::detail::os::socket_set_nodelay(fd); }

// One read(2): parks until some data arrives; 0 at end of stream.
GORO_DECL std::size_t stream_read(socket_state& s, std::span<std::byte> buf, std::error_code& ec);

// Writes all of buf (parking while the socket buffer is full); returns the
// bytes written (all of them unless ec is set).
GORO_DECL std::size_t stream_write(socket_state& s, std::span<const std::byte> buf, std::error_code& ec);

}  // namespace detail

// A stream connection, TCP or Unix (a shared handle).
class conn : private detail::socket_handle<detail::conn_name> {
 public:
  conn() = default;

  // Reads up to buf.size() bytes; returns 0 at end of stream (or for an
  // empty buf). Blocks (parks) until some data arrives.
  std::size_t read(std::span<std::byte> buf) {
    std::error_code ec;
    return detail::or_raise(detail::stream_read(state("read"), buf, ec), ec, "read");
  }
  std::size_t read(std::span<std::byte> buf, std::error_code& ec) {
    return with_state<std::size_t>(ec, [&](auto& s, auto& e) { return detail::stream_read(s, buf, e); });
  }

  // Writes all of buf (parks while the socket buffer is full). The
  // std::error_code& form returns how many bytes went out (all of them
  // unless it reports a failure). An empty buf still makes the system
  // call, as Go does: on a broken connection it fails (EPIPE, ECONNRESET).
  void write(std::span<const std::byte> buf) {
    std::error_code ec;
    detail::or_raise(detail::stream_write(state("write"), buf, ec), ec, "write");
  }
  std::size_t write(std::span<const std::byte> buf, std::error_code& ec) {
    return with_state<std::size_t>(ec, [&](auto& s, auto& e) { return detail::stream_write(s, buf, e); });
  }
  void write(std::string_view s) { write(std::as_bytes(std::span<const char>(s.data(), s.size()))); }
  std::size_t write(std::string_view s, std::error_code& ec) {
    return write(std::as_bytes(std::span<const char>(s.data(), s.size())), ec);
  }

  // close(), close(ec): closes the socket (idempotent); goroutines blocked
  // on it wake with usage_error("goro: use of closed network connection")
  // (errc::closed).
  using socket_handle::close;

  // Shuts the sending side (shutdown(SHUT_WR)): the peer reads end of
  // stream once it has read what was sent; this side can still read.
  void close_write() {
    std::error_code ec;
    close_write(state("close_write"), ec);
    if (ec) detail::raise_net(ec, "close_write");
  }
  void close_write(std::error_code& ec) {
    with_state<int>(ec, [](auto& s, auto& e) { return close_write(s, e), 0; });
  }

  // Deadlines (steady_clock; a default time_point clears): an operation
  // blocked past it, or started after it, raises timeout_error (reports
  // std::errc::timed_out). Setting a later deadline lets later operations
  // proceed. set_deadline, set_read_deadline, set_write_deadline, each
  // also with a std::error_code&.
  using socket_handle::set_deadline;
  using socket_handle::set_read_deadline;
  using socket_handle::set_write_deadline;

  // This end's address, and the peer's (both known from the dial or
  // accept: still there after close, as in Go).
  using socket_handle::local_address;
  using socket_handle::remote_address;

  // The socket's fd (-1 for an empty handle, and once closed); still
  // owned by the conn.
  using socket_handle::native_handle;
  using socket_handle::operator bool;

 private:
  friend struct detail::handles;
  friend class listener;
  explicit conn(std::shared_ptr<detail::socket_state> s) noexcept : socket_handle(std::move(s)) {}
  GORO_DECL static void close_write(detail::socket_state& s, std::error_code& ec) noexcept;
};

// A listening socket, TCP or Unix (a shared handle).
class listener : private detail::socket_handle<detail::listener_name> {
 public:
  listener() = default;

  // Waits for and returns the next connection.
  conn accept() {
    std::error_code ec;
    return detail::or_raise(accept(state("accept"), ec), ec, "accept");
  }
  conn accept(std::error_code& ec) {
    return with_state<conn>(ec, [](auto& s, auto& e) { return accept(s, e); });
  }

  // Go's TCPListener.SetDeadline (steady_clock; a default time_point
  // clears): an accept() blocked past it, or called after it, raises
  // timeout_error (reports std::errc::timed_out), even with a connection
  // waiting. Moving it earlier (or into the past) wakes a blocked accept at
  // the new time, as conn's deadlines do; a later one lets accept() wait
  // again. Also set_deadline(t, ec).
  using socket_handle::set_deadline;

  // The local port (useful after listening on port 0; 0 for Unix), and
  // the address.
  using socket_handle::local_address;
  using socket_handle::port;

  // Closes it; a goroutine blocked in accept() wakes with usage_error
  // (errc::closed). A Unix listener removes its socket file.
  using socket_handle::close;

  using socket_handle::native_handle;
  using socket_handle::operator bool;

 private:
  friend struct detail::handles;
  explicit listener(std::shared_ptr<detail::socket_state> s) noexcept : socket_handle(std::move(s)) {}
  GORO_DECL static conn accept(detail::socket_state& s, std::error_code& ec);
};

namespace detail {
struct handles {
  static conn make_conn(std::shared_ptr<socket_state> s) { return conn(std::move(s)); }
  static listener make_listener(std::shared_ptr<socket_state> s) { return listener(std::move(s)); }

  GORO_DECL static listener listen_tcp(std::string_view host_port, std::error_code& ec);
  GORO_DECL static conn dial_tcp(std::string_view host_port, std::int64_t d, const goro::context* ctx,
                                 std::error_code& ec);
  GORO_DECL static listener listen_unix(std::string_view path, std::error_code& ec);
  GORO_DECL static conn dial_unix(std::string_view path, std::error_code& ec);
};

// Go's Dialer.Timeout: zero is none, a negative one has passed already.
// Any std::chrono duration, saturated (hours::max() is "forever"): taken
// as std::chrono::nanoseconds, hours::max() overflowed in the conversion
// at the call, to a negative timeout (an instant timeout_error).
template <class Rep, class Period>
std::int64_t deadline_after(const std::chrono::duration<Rep, Period>& timeout) noexcept {
  if (timeout == timeout.zero()) return 0;
  if (timeout < timeout.zero()) return 1;
  return when_after(nanotime(), to_ns(timeout));
}
}  // namespace detail

// Listens on host_port ("127.0.0.1:0" picks a free port, "[::1]:0" IPv6,
// ":80" every address, "localhost:80" 127.0.0.1, a name its first IPv4
// address). In dial_tcp and dial_udp / listen_udp too, the port may be a
// service name (":http"), looked up as Go does (detail::lookup_port; not
// known: errc::unknown_port).
inline listener listen_tcp(std::string_view host_port, std::error_code& ec) {
  return detail::reported(detail::handles::listen_tcp(host_port, ec), ec);
}
inline listener listen_tcp(std::string_view host_port) {
  std::error_code ec;
  return detail::or_raise(detail::handles::listen_tcp(host_port, ec), ec, "listen tcp", host_port);
}

// Connects to host_port (a name is resolved with lookup_host and each of
// its addresses tried in turn): a non-blocking connect, then a wait until
// writable. Refused: std::system_error(ECONNREFUSED). With a timeout (or a
// context), the connect gives up when it passes (timeout_error /
// std::errc::timed_out) or the context is cancelled (ECANCELED). A zero
// timeout is none (Go's DialTimeout); any std::chrono duration, a huge one
// (hours::max()) meaning no limit. The timeout and the context bound the
// whole dial, as Go's Dialer: the name and service lookups (which run in
// a goroutine of their own then, abandoned when the dial gives up) and
// every address tried.
inline conn dial_tcp(std::string_view host_port, std::error_code& ec) {
  return detail::reported(detail::handles::dial_tcp(host_port, 0, nullptr, ec), ec);
}
inline conn dial_tcp(std::string_view host_port) {
  std::error_code ec;
  return detail::or_raise(detail::handles::dial_tcp(host_port, 0, nullptr, ec), ec, "dial tcp", host_port);
}
template <class Rep, class Period>
conn dial_tcp(std::string_view host_port, std::chrono::duration<Rep, Period> timeout, std::error_code& ec) {
  return detail::reported(detail::handles::dial_tcp(host_port, detail::deadline_after(timeout), nullptr, ec), ec);
}
template <class Rep, class Period>
conn dial_tcp(std::string_view host_port, std::chrono::duration<Rep, Period> timeout) {
  std::error_code ec;
  return detail::or_raise(detail::handles::dial_tcp(host_port, detail::deadline_after(timeout), nullptr, ec), ec,
                          "dial tcp", host_port);
}
inline conn dial_tcp(std::string_view host_port, const context& ctx, std::error_code& ec) {
  return detail::reported(detail::handles::dial_tcp(host_port, 0, &ctx, ec), ec);
}
inline conn dial_tcp(std::string_view host_port, const context& ctx) {
  std::error_code ec;
  return detail::or_raise(detail::handles::dial_tcp(host_port, 0, &ctx, ec), ec, "dial tcp", host_port);
}

// A Unix stream socket listening at path (a file it creates, removed again
// by close(); "@name" is Linux's abstract namespace). A path in use:
// EADDRINUSE.
inline listener listen_unix(std::string_view path, std::error_code& ec) {
  return detail::reported(detail::handles::listen_unix(path, ec), ec);
}
inline listener listen_unix(std::string_view path) {
  std::error_code ec;
  return detail::or_raise(detail::handles::listen_unix(path, ec), ec, "listen unix", path);
}
// Connects to the Unix socket at path (nobody listening: ECONNREFUSED, no
// such file: ENOENT).
inline conn dial_unix(std::string_view path, std::error_code& ec) {
  return detail::reported(detail::handles::dial_unix(path, ec), ec);
}
inline conn dial_unix(std::string_view path) {
  std::error_code ec;
  return detail::or_raise(detail::handles::dial_unix(path, ec), ec, "dial unix", path);
}

// Waits until fd is readable / writable (any fd: pipes, eventfds, another
// library's sockets), parking the goroutine (a plain thread blocks in
// poll(2)). Returns true when ready (a hang-up or error counts: the next
// call will not block); a passed deadline raises timeout_error (reports
// std::errc::timed_out). With a context, returns false once it is done
// (cancelled or past its deadline). Several goroutines may wait on one fd
// at once (each is woken). The fd should not be one a goro::net handle
// owns, and must stay open during the wait; it is registered with the
// poller for this wait only. Regular files are always ready.
namespace detail {
// A deadline wait: true when ready; a failure in ec.
GORO_DECL bool wait_fd_for(native_socket fd, char mode, time_point deadline, std::error_code& ec);
// A context wait: false once ctx is done; other failures in ec.
GORO_DECL bool wait_fd_for(native_socket fd, char mode, const context& ctx, std::error_code& ec);
// wait_readable / wait_writable (mode 'r' / 'w') until a deadline or a
// context: the throwing overloads and the std::error_code& ones.
template <class Until>
bool wait_or_raise(native_socket fd, char mode, const Until& until) {
  std::error_code ec;
  return or_raise(wait_fd_for(fd, mode, until, ec), ec, mode == 'r' ? "wait_readable" : "wait_writable");
}
template <class Until>
bool wait_or_report(native_socket fd, char mode, const Until& until, std::error_code& ec) {
  return reported(wait_fd_for(fd, mode, until, ec), ec);
}
}  // namespace detail

inline bool wait_readable(native_socket fd, time_point deadline = {}) {
  return detail::wait_or_raise(fd, 'r', deadline);
}
inline bool wait_writable(native_socket fd, time_point deadline = {}) {
  return detail::wait_or_raise(fd, 'w', deadline);
}
inline bool wait_readable(native_socket fd, time_point deadline, std::error_code& ec) {
  return detail::wait_or_report(fd, 'r', deadline, ec);
}
inline bool wait_writable(native_socket fd, time_point deadline, std::error_code& ec) {
  return detail::wait_or_report(fd, 'w', deadline, ec);
}
inline bool wait_readable(native_socket fd, std::error_code& ec) { return wait_readable(fd, time_point{}, ec); }
inline bool wait_writable(native_socket fd, std::error_code& ec) { return wait_writable(fd, time_point{}, ec); }
inline bool wait_readable(native_socket fd, const context& ctx) { return detail::wait_or_raise(fd, 'r', ctx); }
inline bool wait_writable(native_socket fd, const context& ctx) { return detail::wait_or_raise(fd, 'w', ctx); }
inline bool wait_readable(native_socket fd, const context& ctx, std::error_code& ec) {
  return detail::wait_or_report(fd, 'r', ctx, ec);
}
inline bool wait_writable(native_socket fd, const context& ctx, std::error_code& ec) {
  return detail::wait_or_report(fd, 'w', ctx, ec);
}

}  // namespace goro::net

#include "net_udp.hpp"

#if GORO_COMPILE_RUNTIME
namespace goro::net {

GORO_DECL std::size_t detail::stream_read(socket_state& s, std::span<std::byte> buf, std::error_code& ec) {
  socket_state::op o(s);
  if (!o) return ec = closed_code(), 0;
  if (buf.empty()) return 0;
  socket_state::io_guard g(s, 'r');
  if (!g) return ec = closed_code(), 0;
  if ((ec = s.passed('r'))) return 0;
  for (;;) {
    int e = 0;
    long long n = os::socket_read(s.fd(), buf.data(), buf.size(), &e);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (e == EAGAIN || e == EWOULDBLOCK) {
      if ((ec = s.wait('r'))) return 0;
    } else if (e != EINTR) {
      return ec = errno_code(e), 0;
    }
  }
}

GORO_DECL std::size_t detail::stream_write(socket_state& s, std::span<const std::byte> buf, std::error_code& ec) {
  socket_state::op o(s);
  if (!o) return ec = closed_code(), 0;
  socket_state::io_guard g(s, 'w');
  if (!g) return ec = closed_code(), 0;
  if ((ec = s.passed('w'))) return 0;
  // At least one send, also for an empty buf, as Go's write: the system
  // call reports a broken connection (EPIPE) though no byte was to go.
  std::size_t done = 0;
  for (;;) {
    int e = 0;
    long long n = os::socket_send(s.fd(), buf.data() + done, buf.size() - done, &e);
    if (n >= 0) {
      done += static_cast<std::size_t>(n);
      if (done == buf.size()) return done;
      continue;
    }
    if (e == EAGAIN || e == EWOULDBLOCK) {
      if ((ec = s.wait('w'))) return done;
    } else if (e != EINTR) {
      return ec = errno_code(e), done;
    }
  }
}

GORO_DECL void conn::close_write(detail::socket_state& s, std::error_code& ec) noexcept {
  detail::socket_state::op o(s);
  if (!o)
    ec = detail::closed_code();
  else if (int e = goro::detail::os::socket_shutdown_write(s.fd()))
    ec = detail::errno_code(e);
}

GORO_DECL conn listener::accept(detail::socket_state& s, std::error_code& ec) {
  detail::socket_state::op o(s);
  if (!o) return ec = detail::closed_code(), conn{};
  detail::socket_state::io_guard g(s, 'r');
  if (!g) return ec = detail::closed_code(), conn{};
  // Past the deadline (set_deadline): fails though a connection may be
  // waiting, as Go's accept after prepareRead.
  if ((ec = s.passed('r'))) return conn{};
  for (;;) {
    sockaddr_storage ss{};
    goro::detail::os::sock_len len = sizeof ss;
    int e = 0;
    native_socket fd = goro::detail::os::accept_socket(s.fd(), reinterpret_cast<sockaddr*>(&ss), &len, &e);
    if (fd != goro::detail::os::invalid_socket) {
      if (ss.ss_family != AF_UNIX) detail::set_nodelay(fd);
      auto c = detail::adopt_fd(fd, address::from_native(reinterpret_cast<sockaddr*>(&ss), len));
      c->note_local();
      return conn(std::move(c));
    }
    if (e == EAGAIN || e == EWOULDBLOCK) {
      if ((ec = s.wait('r'))) return conn{};
    } else if (e != EINTR && e != ECONNABORTED) {
      return ec = detail::errno_code(e), conn{};
    }
  }
}

GORO_DECL listener detail::handles::listen_tcp(std::string_view host_port, std::error_code& ec) {
  ec.clear();
  address a = listen_target(host_port, SOCK_STREAM, ec);
  if (ec) return {};
  return listener(bind_to(a, SOCK_STREAM, ec));
}

GORO_DECL conn detail::handles::dial_tcp(std::string_view host_port, std::int64_t d, const goro::context* ctx,
                                         std::error_code& ec) {
  ec.clear();
  auto s = dial_any(host_port, SOCK_STREAM, d, ctx, ec);
  if (s) set_nodelay(s->fd());
  return conn(std::move(s));
}

GORO_DECL listener detail::handles::listen_unix(std::string_view path, std::error_code& ec) {
  if constexpr (!os::unix_sockets) return ec = errno_code(EAFNOSUPPORT), listener{};
  address a = unix_target(path, ec);  // the reason kept: "unix path too long"
  if (ec) return {};
  auto s = bind_to(a, SOCK_STREAM, ec);
  if (s && path.front() != '@') s->unlink_on_close(std::string(path));
  return listener(std::move(s));
}

GORO_DECL conn detail::handles::dial_unix(std::string_view path, std::error_code& ec) {
  if constexpr (!os::unix_sockets) return ec = errno_code(EAFNOSUPPORT), conn{};
  address a = unix_target(path, ec);  // the reason kept: "unix path too long"
  if (ec) return {};
  return conn(connect_to(a, SOCK_STREAM, 0, nullptr, ec));
}

GORO_DECL bool detail::wait_fd_for(native_socket fd, char mode, time_point deadline, std::error_code& ec) {
  ec = wait_fd(fd, mode, deadline_ns(deadline));
  return !ec;
}

GORO_DECL bool detail::wait_fd_for(native_socket fd, char mode, const context& ctx, std::error_code& ec) {
  ec = wait_fd(fd, mode, 0, &ctx);
  if (!ec) return true;
  if (ctx.err() != cancel_reason::none || is_deadline(ec) || ec == std::errc::operation_canceled) ec.clear();
  return false;
}

}  // namespace goro::net
#endif  // GORO_COMPILE_RUNTIME
