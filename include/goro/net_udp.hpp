// goro::net UDP: packet_conn (part of <goro/net.hpp>), Go's UDPConn.
//
//   auto srv = goro::net::listen_udp("127.0.0.1:0");
//   auto [n, from] = srv.read_from(buf);      // parks until a datagram arrives
//   srv.write_to(std::span(buf, n), from);
//
//   auto c = goro::net::dial_udp("127.0.0.1:" + std::to_string(srv.port()));
//   c.write("ping");  c.read(buf);            // connected: to / from that peer only
//
// A packet_conn is a shared handle like conn (copies refer to one socket;
// default-constructed: empty). Each read returns one datagram (the part
// that fits in the buffer; the rest of a longer one is dropped); each
// write sends one. Deadlines, close() waking blocked goroutines, the
// errors and the std::error_code& overloads are as for conn (net.hpp). On
// a connected socket, a datagram the peer's host refused (nobody on that
// port) makes a later read or write fail with ECONNREFUSED.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "detail/config.hpp"
#include "detail/net_dial.hpp"
#include "detail/net_handle.hpp"
#include "detail/net_socket.hpp"
#include "error.hpp"
#include "net_address.hpp"
#include "os/socket.hpp"

namespace goro::net {

class packet_conn;
namespace detail {
struct udp_handles;

// One recvfrom(2), parking until a datagram arrives; `from` may be null.
GORO_DECL std::size_t dgram_recv(socket_state& s, std::span<std::byte> buf, address* from, std::error_code& ec);

// One sendto(2) (to: null on a connected socket), parking while the
// socket buffer is full.
GORO_DECL std::size_t dgram_send(socket_state& s, std::span<const std::byte> buf, const address* to,
                                 std::error_code& ec);

}  // namespace detail

// A UDP socket (a shared handle).
class packet_conn : private detail::socket_handle<detail::packet_conn_name> {
 public:
  packet_conn() = default;

  // Receives one datagram: its size (what fit in buf) and its sender.
  std::pair<std::size_t, address> read_from(std::span<std::byte> buf) {
    std::error_code ec;
    address from;
    std::size_t n = detail::dgram_recv(state("read_from"), buf, &from, ec);
    if (ec) detail::raise_net(ec, "read_from");
    return {n, from};
  }
  std::pair<std::size_t, address> read_from(std::span<std::byte> buf, std::error_code& ec) {
    address from;
    std::size_t n = with_state<std::size_t>(ec, [&](auto& s, auto& e) { return detail::dgram_recv(s, buf, &from, e); });
    return {n, from};
  }

  // Sends buf as one datagram to `to`; returns its size.
  std::size_t write_to(std::span<const std::byte> buf, const address& to) {
    std::error_code ec;
    std::size_t n = detail::dgram_send(state("write_to"), buf, &to, ec);
    if (ec) detail::raise_net(ec, "write_to " + to.to_string());
    return n;
  }
  std::size_t write_to(std::span<const std::byte> buf, const address& to, std::error_code& ec) {
    return send(buf, &to, ec);
  }
  std::size_t write_to(std::string_view s, const address& to) { return write_to(bytes(s), to); }
  std::size_t write_to(std::string_view s, const address& to, std::error_code& ec) {
    return write_to(bytes(s), to, ec);
  }

  // A connected socket's (dial_udp) datagrams from / to its peer.
  std::size_t read(std::span<std::byte> buf) {
    std::error_code ec;
    return detail::or_raise(detail::dgram_recv(state("read"), buf, nullptr, ec), ec, "read");
  }
  std::size_t read(std::span<std::byte> buf, std::error_code& ec) {
    return with_state<std::size_t>(ec, [&](auto& s, auto& e) { return detail::dgram_recv(s, buf, nullptr, e); });
  }
  std::size_t write(std::span<const std::byte> buf) {
    std::error_code ec;
    return detail::or_raise(detail::dgram_send(state("write"), buf, nullptr, ec), ec, "write");
  }
  std::size_t write(std::span<const std::byte> buf, std::error_code& ec) { return send(buf, nullptr, ec); }
  std::size_t write(std::string_view s) { return write(bytes(s)); }
  std::size_t write(std::string_view s, std::error_code& ec) { return write(bytes(s), ec); }

  // Deadlines, as conn's: set_deadline, set_read_deadline,
  // set_write_deadline, each also with a std::error_code&.
  using socket_handle::set_deadline;
  using socket_handle::set_read_deadline;
  using socket_handle::set_write_deadline;

  // The bound address, its port (useful after listening on port 0), and a
  // connected socket's peer: an empty address when not connected (Go's nil
  // RemoteAddr), not an error. Both still answer after close.
  using socket_handle::local_address;
  using socket_handle::port;
  using socket_handle::remote_address;

  // Closes the socket (idempotent); blocked goroutines wake with
  // usage_error (errc::closed).
  using socket_handle::close;

  using socket_handle::native_handle;
  using socket_handle::operator bool;

 private:
  friend struct detail::udp_handles;
  explicit packet_conn(std::shared_ptr<detail::socket_state> s) noexcept : socket_handle(std::move(s)) {}
  static std::span<const std::byte> bytes(std::string_view s) noexcept {
    return std::as_bytes(std::span<const char>(s.data(), s.size()));
  }
  std::size_t send(std::span<const std::byte> buf, const address* to, std::error_code& ec) {
    return with_state<std::size_t>(ec, [&](auto& s, auto& e) { return detail::dgram_send(s, buf, to, e); });
  }
};

namespace detail {
struct udp_handles {
  GORO_DECL static packet_conn listen(std::string_view host_port, std::error_code& ec);
  GORO_DECL static packet_conn dial(std::string_view host_port, std::error_code& ec);
};
}  // namespace detail

// A UDP socket bound to host_port ("127.0.0.1:0" picks a port; the host as
// for listen_tcp), for read_from / write_to.
inline packet_conn listen_udp(std::string_view host_port, std::error_code& ec) {
  return detail::reported(detail::udp_handles::listen(host_port, ec), ec);
}
inline packet_conn listen_udp(std::string_view host_port) {
  std::error_code ec;
  return detail::or_raise(detail::udp_handles::listen(host_port, ec), ec, "listen udp", host_port);
}

// A UDP socket connected to host_port (a name: its first address), for
// read / write (write_to works too). Nothing is sent: a missing peer shows
// as ECONNREFUSED on a later read or write.
inline packet_conn dial_udp(std::string_view host_port, std::error_code& ec) {
  return detail::reported(detail::udp_handles::dial(host_port, ec), ec);
}
inline packet_conn dial_udp(std::string_view host_port) {
  std::error_code ec;
  return detail::or_raise(detail::udp_handles::dial(host_port, ec), ec, "dial udp", host_port);
}

}  // namespace goro::net

#if GORO_COMPILE_RUNTIME
namespace goro::net {

GORO_DECL std::size_t detail::dgram_recv(socket_state& s, std::span<std::byte> buf, address* from,
                                         std::error_code& ec) {
  socket_state::op o(s);
  if (!o) return ec = closed_code(), 0;
  socket_state::io_guard g(s, 'r');
  if (!g) return ec = closed_code(), 0;
  if ((ec = s.passed('r'))) return 0;
  for (;;) {
    sockaddr_storage ss{};
    os::sock_len len = sizeof ss;
    int e = 0;
    long long n = os::socket_recvfrom(s.fd(), buf.data(), buf.size(), from ? reinterpret_cast<sockaddr*>(&ss) : nullptr,
                                      from ? &len : nullptr, &e);
    if (n >= 0) {
      if (from) *from = address::from_native(reinterpret_cast<sockaddr*>(&ss), len);
      return static_cast<std::size_t>(n);
    }
    if (e == EAGAIN || e == EWOULDBLOCK) {
      if ((ec = s.wait('r'))) return 0;
    } else if (e != EINTR) {
      return ec = errno_code(e), 0;
    }
  }
}

GORO_DECL std::size_t detail::dgram_send(socket_state& s, std::span<const std::byte> buf, const address* to,
                                         std::error_code& ec) {
  socket_state::op o(s);
  if (!o) return ec = closed_code(), 0;
  socket_state::io_guard g(s, 'w');
  if (!g) return ec = closed_code(), 0;
  if ((ec = s.passed('w'))) return 0;
  for (;;) {
    int e = 0;
    long long n =
        os::socket_sendto(s.fd(), buf.data(), buf.size(), to ? to->native() : nullptr, to ? to->native_size() : 0, &e);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (e == EAGAIN || e == EWOULDBLOCK) {
      if ((ec = s.wait('w'))) return 0;
    } else if (e != EINTR) {
      return ec = errno_code(e), 0;
    }
  }
}

GORO_DECL packet_conn detail::udp_handles::listen(std::string_view host_port, std::error_code& ec) {
  ec.clear();
  address a = listen_target(host_port, SOCK_DGRAM, ec);
  if (ec) return {};
  return packet_conn(bind_to(a, SOCK_DGRAM, ec));
}

GORO_DECL packet_conn detail::udp_handles::dial(std::string_view host_port, std::error_code& ec) {
  ec.clear();
  std::vector<address> targets = dial_targets(host_port, SOCK_DGRAM, 0, nullptr, ec);
  if (ec) return {};
  return packet_conn(connect_to(targets.front(), SOCK_DGRAM, 0, nullptr, ec));
}

}  // namespace goro::net
#endif  // GORO_COMPILE_RUNTIME
