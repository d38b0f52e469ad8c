// goro::net's handle layer (internal): what conn, listener and packet_conn
// share. socket_handle<Name> holds the shared socket_state and provides
// close, native_handle, operator bool, deadlines and the addresses; each
// public class exposes the members it has with using-declarations. Name is
// the public class's name, for the usage_error an empty handle raises
// ("net::conn::read on an empty conn"). The std::error_code& members never
// throw (they must work under -fno-exceptions).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "../error.hpp"
#include "../net_address.hpp"
#include "config.hpp"
#include "net_socket.hpp"

namespace goro::net::detail {

// A throwing overload's tail: raises for ec, else returns v.
template <class T>
T or_raise(T v, const std::error_code& ec, const char* what) {
  if (GORO_UNLIKELY(static_cast<bool>(ec))) raise_net(ec, what);
  return v;
}
// The same for listen / dial: the call named "<op> <addr>" ("dial tcp
// 1.2.3.4:5"), addr for a malformed address's message.
template <class T>
T or_raise(T v, const std::error_code& ec, const char* op, std::string_view addr) {
  if (GORO_UNLIKELY(static_cast<bool>(ec))) raise_net(ec, std::string(op) + " " + std::string(addr), addr);
  return v;
}
// A std::error_code& overload's tail: internal codes made public.
template <class T>
T reported(T v, std::error_code& ec) noexcept {
  public_code(ec);
  return v;
}

// The public classes' names, for socket_handle's Name.
inline constexpr char conn_name[] = "conn";
inline constexpr char listener_name[] = "listener";
inline constexpr char packet_conn_name[] = "packet_conn";

template <const char* Name>
class socket_handle {
 protected:
  socket_handle() = default;
  explicit socket_handle(std::shared_ptr<socket_state> s) noexcept : s_(std::move(s)) {}

  // Closes the socket (idempotent); goroutines blocked on it wake with
  // usage_error("goro: use of closed network connection") (errc::closed).
  // Returns once the fd is closed (the woken operations have left), as Go.
  void close() { state("close").close(); }
  void close(std::error_code& ec) noexcept {
    ec.clear();
    if (!s_)
      ec = empty_handle();
    else
      s_->close();
  }

  // The socket's fd (a SOCKET on Windows; -1, INVALID_SOCKET there, for
  // an empty handle, and once closed: the number may name another file
  // by then); still owned by the handle.
  native_socket native_handle() const noexcept {
    return s_ && !s_->closed() ? s_->fd() : goro::detail::os::invalid_socket;
  }
  explicit operator bool() const noexcept { return s_ != nullptr; }

  // Deadlines (steady_clock; a default time_point clears): an operation
  // blocked past it, or started after it, raises timeout_error (reports
  // std::errc::timed_out). Setting a later deadline lets later operations
  // proceed.
  void set_deadline(time_point t) {
    set_read_deadline(t);
    set_write_deadline(t);
  }
  void set_read_deadline(time_point t) { set_dl("set_read_deadline", 'r', t); }
  void set_write_deadline(time_point t) { set_dl("set_write_deadline", 'w', t); }
  void set_deadline(time_point t, std::error_code& ec) {
    set_read_deadline(t, ec);
    if (!ec) set_write_deadline(t, ec);
  }
  void set_read_deadline(time_point t, std::error_code& ec) { set_dl('r', t, ec); }
  void set_write_deadline(time_point t, std::error_code& ec) { set_dl('w', t, ec); }

  // The bound address and its port, noted when the socket was bound,
  // connected or accepted (Go's netFD laddr): still there after close.
  // The peer's address, known from the dial or accept (also after close);
  // an empty address for a socket that has none, an unconnected
  // packet_conn (Go's nil RemoteAddr), not an error.
  address local_address() const {
    if (const address& a = state("local_address").local()) return a;
    std::error_code ec;
    return or_raise(sock_name(s_, ec), ec, "getsockname");
  }
  address local_address(std::error_code& ec) const {
    ec.clear();
    if (s_ && s_->local()) return s_->local();
    return reported(sock_name(s_, ec), ec);
  }
  std::uint16_t port() const { return local_address().port(); }
  std::uint16_t port(std::error_code& ec) const { return local_address(ec).port(); }
  address remote_address() const { return state("remote_address").peer(); }
  address remote_address(std::error_code& ec) const {
    ec.clear();
    if (!s_) return ec = empty_handle(), address{};
    return s_->peer();
  }

  // The socket, or usage_error naming the call on an empty handle.
  socket_state& state(const char* what) const {
    if (!s_) goro::detail::raise_usage((std::string("net::") + Name + "::" + what + " on an empty " + Name).c_str());
    return *s_;
  }
  // An std::error_code& overload's body: f(socket_state&, ec) on the
  // socket (its codes made public), or T{} and empty_handle() when empty.
  template <class T, class F>
  T with_state(std::error_code& ec, F&& f) {
    ec.clear();
    if (!s_) return ec = empty_handle(), T{};
    return reported(std::forward<F>(f)(*s_, ec), ec);
  }

  std::shared_ptr<socket_state> s_;

 private:
  void set_dl(const char* what, char mode, time_point t) {
    if (std::error_code ec = state(what).set_deadline(mode, deadline_ns(t))) raise_net(ec, what);
  }
  void set_dl(char mode, time_point t, std::error_code& ec) {
    ec.clear();
    if (!s_)
      ec = empty_handle();
    else
      ec = s_->set_deadline(mode, deadline_ns(t));
  }
};

}  // namespace goro::net::detail
