// goro::net addresses, name resolution and error codes (part of
// <goro/net.hpp>).
//
//   auto a = goro::net::address::parse("[::1]:8080");    // numeric only
//   a.to_string();  a.port();  a.is_ipv6();
//   auto v = goro::net::lookup_host("localhost");        // getaddrinfo, port 0
//
// An address is an IPv4 or IPv6 address with a port, or a Unix socket path
// (one that starts with '/' or '.', or '@' for Linux's abstract namespace).
// An IPv6 address may carry a zone, as in Go: "[fe80::1%eth0]:80" (an
// interface name, looked up on Linux, or its index: "%2").
// It is a plain value (a sockaddr inside), cheap to copy and compare.
//
// Error codes: every goro::net call that can fail has an overload taking
// std::error_code& as its last argument (the std::filesystem convention),
// which reports there instead of throwing. Besides the errno values
// (std::generic_category: ECONNREFUSED, ECONNRESET...; on Windows the
// socket ones are in an equivalent category with Linux's messages), it reports
//   std::errc::timed_out          a deadline passed (the throwing form: goro::timeout_error)
//   std::errc::invalid_argument   a malformed address, or an empty handle
//   std::errc::operation_canceled the context given to the call was cancelled
//   goro::net::errc::closed       the socket is closed (throwing form: goro::usage_error)
//   goro::net::errc::host_not_found, try_again, lookup_failed   name resolution
//   goro::net::errc::unknown_port a port that is no number and no service name
#pragma once

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "blocking.hpp"
#include "detail/config.hpp"
#include "detail/test_seam.hpp"
#include "error.hpp"
#include "os/socket.hpp"

namespace goro::net {

// goro::net's own error codes (category "goro.net").
enum class errc {
  closed = 1,          // use of closed network connection (Go's net.ErrClosed)
  host_not_found = 2,  // no such host (getaddrinfo: EAI_NONAME, EAI_NODATA)
  try_again = 3,       // temporary failure in name resolution (EAI_AGAIN)
  lookup_failed = 4,   // any other resolver failure
  unknown_port = 5,    // a port that is neither a number nor a known service name ("localhost:nosuch")
};

namespace detail {

// Codes that never reach a user: the public overloads turn them into
// std::errc values (public_code), the throwing ones into the exception
// today's rules name (raise_net, detail/net_socket.hpp). `deadline` is not
// ETIMEDOUT so that a kernel ETIMEDOUT stays a std::system_error.
inline constexpr int deadline_code = 100;
inline constexpr int bad_addr_first = 101;  // ...bad_addr_last: a malformed address (EINVAL)
inline constexpr int bad_addr_last = 109;
inline constexpr const char* bad_addr_why[] = {"missing port",
                                               "missing ']'",
                                               "too many colons (IPv6 needs [brackets])",
                                               "bad port",
                                               "port out of range",
                                               "not a numeric IP address",
                                               "unix path too long",
                                               "unknown IPv6 zone (no such interface)",
                                               "empty unix path"};

class net_category_impl : public std::error_category {
 public:
  const char* name() const noexcept override { return "goro.net"; }
  std::string message(int v) const override {
    switch (v) {
      case static_cast<int>(errc::closed):
        return "use of closed network connection";
      case static_cast<int>(errc::host_not_found):
        return "no such host";
      case static_cast<int>(errc::try_again):
        return "temporary failure in name resolution";
      case static_cast<int>(errc::lookup_failed):
        return "name resolution failed";
      case static_cast<int>(errc::unknown_port):
        return "unknown port";
      case deadline_code:
        return "i/o timeout";
      default:
        if (v >= bad_addr_first && v <= bad_addr_last) return bad_addr_why[v - bad_addr_first];
        return "unknown goro.net error";
    }
  }
};

}  // namespace detail

inline const std::error_category& net_category() noexcept {
  static const detail::net_category_impl c;
  return c;
}
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), net_category()}; }

}  // namespace goro::net

template <>
struct std::is_error_code_enum<goro::net::errc> : std::true_type {};

namespace goro::net {
namespace detail {

inline std::error_code bad_addr(int i) noexcept { return {bad_addr_first + i, net_category()}; }
// An errno value as a code: std::generic_category, except for the values
// the system's C runtime has no text for (os::errno_text: Winsock's codes
// mapped to errno on Windows), which carry errno_category: the same value,
// equivalent to the generic code (`ec == std::errc::connection_refused`
// holds), with a message.
class errno_category_impl : public std::error_category {
 public:
  const char* name() const noexcept override { return "goro.errno"; }
  std::string message(int v) const override {
    if (const char* t = goro::detail::os::errno_text(v)) return t;
    return std::generic_category().message(v);
  }
  std::error_condition default_error_condition(int v) const noexcept override { return {v, std::generic_category()}; }
};
inline std::error_code errno_code(int e) noexcept {
  if (goro::detail::os::errno_text(e)) {
    static const errno_category_impl c;
    return {e, c};
  }
  return {e, std::generic_category()};
}

// Internal codes -> what a std::error_code& overload reports.
inline void public_code(std::error_code& ec) noexcept {
  if (ec.category() != net_category()) return;
  if (ec.value() == deadline_code) ec = std::make_error_code(std::errc::timed_out);
  if (ec.value() >= bad_addr_first && ec.value() <= bad_addr_last)
    ec = std::make_error_code(std::errc::invalid_argument);
}

// Splits "host:port" / "[v6]:port" (host may be empty). A port that is
// not a number is malformed ("bad port"), unless service is given: then it
// is a service name ("http"), left in *service (port 0) for lookup_port,
// as Go's Dial and Listen take it.
GORO_DECL bool split_host_port(std::string_view hp, std::string_view& host, std::uint16_t& port, std::error_code& ec,
                               std::string_view* service = nullptr) noexcept;

// A service name's port for a socket type (SOCK_STREAM: tcp, SOCK_DGRAM:
// udp), as Go's LookupPort: getaddrinfo (so /etc/services, any case)
// inside goro::blocking, never on a P, then Go's own table of the common
// ones for systems that lack them. Unknown: errc::unknown_port.
GORO_DECL std::uint16_t lookup_port(std::string_view service, int type, std::error_code& ec);

// A test seam (detail/test_seam.hpp): lookup_host and lookup_port call
// it on the thread that then calls getaddrinfo (tests/net_go_test.cpp
// makes a lookup slow there, to see a dial's deadline bound it).
namespace testing {
inline goro::detail::test_seam<> lookup_seam;
}  // namespace testing

}  // namespace detail
class address;
namespace detail {
// unix_address, leaving the internal code (which says what is malformed)
// for listen_unix / dial_unix's messages.
address unix_target(std::string_view path, std::error_code& ec) noexcept;

}  // namespace detail

// An IPv4 / IPv6 address and port, or a Unix socket path. Default: empty
// ("none": false as a bool, to_string() "", port() 0, family() AF_UNSPEC),
// as an unconnected packet_conn's remote_address() is.
class address {
 public:
  address() noexcept = default;

  // "127.0.0.1:80", "[::1]:80", or a Unix path ("/tmp/s", "./s", "@abstract").
  // Numeric hosts only (names: lookup_host). Malformed:
  // std::system_error(EINVAL) / std::errc::invalid_argument.
  static address parse(std::string_view s, std::error_code& ec) {
    address a = parse_raw(s, ec);
    detail::public_code(ec);
    return a;
  }
  GORO_DECL static address parse(std::string_view s);

  // An IP address ("10.0.0.1", "::1", "fe80::1%eth0"; no port, no name)
  // and a port. Malformed: an empty address.
  static address from_ip(std::string_view ip, std::uint16_t port) {
    address a;
    if (a.set_ip(ip, port) != 0) return {};
    return a;
  }
  // The address a sockaddr holds (as accept, recvfrom, getsockname give).
  static address from_native(const sockaddr* sa, goro::detail::os::sock_len len) noexcept {
    address a;
    if (static_cast<std::size_t>(len) > sizeof a.ss_) len = static_cast<goro::detail::os::sock_len>(sizeof a.ss_);
    std::memcpy(&a.ss_, sa, len);
    a.len_ = len;
    return a;
  }

  // "127.0.0.1:80", "[::1]:80", the Unix path ("@name" when abstract), ""
  // when empty (or an unnamed Unix socket).
  GORO_DECL std::string to_string() const;
  // The IP without the port ("::1", "fe80::1%eth0"), or the Unix path.
  GORO_DECL std::string host() const;
  // The port (0 for a Unix path or an empty address).
  std::uint16_t port() const noexcept {
    if (is_ipv4()) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss_)->sin_port);
    if (is_ipv6()) return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss_)->sin6_port);
    return 0;
  }
  // The same IP with another port (an IP address only).
  address with_port(std::uint16_t p) const noexcept {
    address a = *this;
    if (is_ipv4()) reinterpret_cast<sockaddr_in*>(&a.ss_)->sin_port = htons(p);
    if (is_ipv6()) reinterpret_cast<sockaddr_in6*>(&a.ss_)->sin6_port = htons(p);
    return a;
  }

  int family() const noexcept { return len_ ? ss_.ss_family : AF_UNSPEC; }
  bool is_ipv4() const noexcept { return family() == AF_INET; }
  bool is_ipv6() const noexcept { return family() == AF_INET6; }
  bool is_ip() const noexcept { return is_ipv4() || is_ipv6(); }
  bool is_unix() const noexcept { return family() == AF_UNIX; }
  bool is_loopback() const noexcept {
    if (is_ipv4()) return (ntohl(reinterpret_cast<const sockaddr_in*>(&ss_)->sin_addr.s_addr) >> 24) == 127;
    if (is_ipv6()) return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&ss_)->sin6_addr);
    return false;
  }
  explicit operator bool() const noexcept { return len_ != 0; }

  const sockaddr* native() const noexcept { return reinterpret_cast<const sockaddr*>(&ss_); }
  goro::detail::os::sock_len native_size() const noexcept { return len_; }

  friend bool operator==(const address& a, const address& b) noexcept {
    if (a.family() != b.family()) return false;
    if (a.is_unix()) return a.host() == b.host();
    return a.port() == b.port() && a.host() == b.host();
  }

 private:
  // 0, or which bad_addr_why the ip is (not numeric, unknown zone).
  GORO_DECL int set_ip(std::string_view ip, std::uint16_t port);
  GORO_DECL void set_unix(std::string_view path, std::error_code& ec) noexcept;
  // parse, leaving the internal code (which says what is malformed).
  GORO_DECL static address parse_raw(std::string_view s, std::error_code& ec);
  friend address detail::unix_target(std::string_view, std::error_code&) noexcept;

  sockaddr_storage ss_{};
  goro::detail::os::sock_len len_ = 0;
};

inline address detail::unix_target(std::string_view path, std::error_code& ec) noexcept {
  ec.clear();
  address a;
  a.set_unix(path, ec);
  return a;
}
// A Unix socket address for any path (also one parse would not take as a
// path, like "sock"); too long or empty: std::errc::invalid_argument.
inline address unix_address(std::string_view path, std::error_code& ec) noexcept {
  address a = detail::unix_target(path, ec);
  detail::public_code(ec);
  return a;
}

// Resolves a host name to its addresses (port 0), in getaddrinfo's order:
// /etc/hosts, then DNS, as the C library is configured. A numeric IP is
// returned as it is, without a lookup. getaddrinfo blocks, so it runs
// inside goro::blocking(goro::long_call, ...): never on a P. Not found: errc::host_not_found
// (the throwing form: std::system_error with that code); so is a name with
// a NUL in it ("localhost\0evil.com"), as in Go, never cut at the NUL.
GORO_DECL std::vector<address> lookup_host(std::string_view name, std::error_code& ec);
GORO_DECL std::vector<address> lookup_host(std::string_view name);

}  // namespace goro::net

#if GORO_COMPILE_RUNTIME
namespace goro::net {

GORO_DECL bool detail::split_host_port(std::string_view hp, std::string_view& host, std::uint16_t& port,
                                       std::error_code& ec, std::string_view* service) noexcept {
  std::string_view p;
  if (!hp.empty() && hp.front() == '[') {
    auto close = hp.find(']');
    if (close == std::string_view::npos) return ec = bad_addr(1), false;
    host = hp.substr(1, close - 1);
    if (close + 1 >= hp.size() || hp[close + 1] != ':') return ec = bad_addr(0), false;
    p = hp.substr(close + 2);
  } else {
    auto colon = hp.rfind(':');
    if (colon == std::string_view::npos) return ec = bad_addr(0), false;
    host = hp.substr(0, colon);
    if (host.find(':') != std::string_view::npos) return ec = bad_addr(2), false;
    p = hp.substr(colon + 1);
  }
  port = 0;
  if (p.empty()) return true;  // "host:" is port 0, as in Go (parsePort; golang.org/issue/13610)
  if (service && p.find_first_not_of("0123456789") != std::string_view::npos) {
    *service = p;
    return true;
  }
  if (p.size() > 5) return ec = bad_addr(3), false;
  unsigned pn = 0;
  for (char c : p) {
    if (c < '0' || c > '9') return ec = bad_addr(3), false;
    pn = pn * 10 + static_cast<unsigned>(c - '0');
  }
  if (pn > 65535) return ec = bad_addr(4), false;
  port = static_cast<std::uint16_t>(pn);
  return true;
}

GORO_DECL address address::parse(std::string_view s) {
  std::error_code ec;
  address a = parse_raw(s, ec);
  if (ec) goro::detail::raise_system(EINVAL, ("bad address \"" + std::string(s) + "\": " + ec.message()).c_str());
  return a;
}

GORO_DECL std::string address::to_string() const {
  if (is_unix()) return host();
  if (!is_ip()) return {};
  std::string h = host();
  std::string p = std::to_string(port());
  return is_ipv6() ? "[" + h + "]:" + p : h + ":" + p;
}

GORO_DECL std::string address::host() const {
  if (is_unix()) {
    const auto* un = reinterpret_cast<const sockaddr_un*>(&ss_);
    const auto len = static_cast<std::size_t>(len_);
    std::size_t n = len > offsetof(sockaddr_un, sun_path) ? len - offsetof(sockaddr_un, sun_path) : 0;
    if (n == 0) return {};
    if (un->sun_path[0] == '\0') return "@" + std::string(un->sun_path + 1, n - 1);
    return std::string(un->sun_path, strnlen(un->sun_path, n));
  }
  char buf[INET6_ADDRSTRLEN] = {};
  if (is_ipv4()) inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss_)->sin_addr, buf, sizeof buf);
  if (!is_ipv6()) return buf;
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss_);
  inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
  std::string h = buf;
  if (const unsigned zone = in6->sin6_scope_id; zone != 0) {  // Go's "fe80::1%eth0"
    char name[goro::detail::os::interface_name_size + 1] = {};
    h += '%';
    h += goro::detail::os::interface_name(zone, name) ? std::string(name) : std::to_string(zone);
  }
  return h;
}

GORO_DECL int address::set_ip(std::string_view ip, std::uint16_t port) {
  constexpr int not_numeric = 5, bad_zone = 7;  // bad_addr_why
  // inet_pton reads a C string: "127.0.0.1\0junk" would be 127.0.0.1.
  if (ip.find('\0') != std::string_view::npos) return not_numeric;
  // An IPv6 zone, as Go's: "fe80::1%eth0" (an interface) or "fe80::1%2".
  std::uint32_t scope = 0;
  const auto pct = ip.find('%');
  if (pct != std::string_view::npos) {
    const std::string zone(ip.substr(pct + 1));
    ip = ip.substr(0, pct);
    if (zone.empty() || ip.find(':') == std::string_view::npos) return not_numeric;  // IPv6 only
    std::uint64_t n = 0;
    bool number = zone.size() <= 10;  // an index fits 32 bits
    for (char c : zone) {
      if (c < '0' || c > '9') number = false;
      if (number) n = n * 10 + static_cast<unsigned>(c - '0');
    }
    if (number && n <= UINT32_MAX)
      scope = static_cast<std::uint32_t>(n);
    else if ((scope = goro::detail::os::interface_index(zone.c_str())) == 0)
      return bad_zone;
  }
  std::string h(ip);
  auto* in = reinterpret_cast<sockaddr_in*>(&ss_);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss_);
  for (int family : {AF_INET, AF_INET6}) {
    bool v4 = family == AF_INET;
    if ((!v4 || pct == std::string_view::npos) &&
        inet_pton(family, h.c_str(), v4 ? static_cast<void*>(&in->sin_addr) : &in6->sin6_addr) == 1) {
      ss_.ss_family = static_cast<decltype(ss_.ss_family)>(family);
      len_ = v4 ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
      if (!v4) in6->sin6_scope_id = scope;
      *this = with_port(port);
      return 0;
    }
    ss_ = {};
  }
  return not_numeric;
}

GORO_DECL void address::set_unix(std::string_view path, std::error_code& ec) noexcept {
  auto* un = reinterpret_cast<sockaddr_un*>(&ss_);
  // A path needs its NUL terminator in sun_path; an abstract name ("@...")
  // has none, so it may fill sun_path (as Go's SockaddrUnix).
  const bool abstract = !path.empty() && path.front() == '@';
  if (path.empty() || path.size() > sizeof un->sun_path - (abstract ? 0 : 1)) {
    ec = detail::bad_addr(path.empty() ? 8 : 6);
    return;
  }
  un->sun_family = AF_UNIX;
  std::memcpy(un->sun_path, path.data(), path.size());
  if (abstract) {  // a leading NUL, no terminator
    un->sun_path[0] = '\0';
    len_ = static_cast<goro::detail::os::sock_len>(offsetof(sockaddr_un, sun_path) + path.size());
  } else {
    len_ = static_cast<goro::detail::os::sock_len>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  }
}

GORO_DECL address address::parse_raw(std::string_view s, std::error_code& ec) {
  ec.clear();
  address a;
  if (!s.empty() && (s.front() == '/' || s.front() == '.' || s.front() == '@')) {
    a.set_unix(s, ec);
  } else {
    std::string_view host;
    std::uint16_t port = 0;
    if (detail::split_host_port(s, host, port, ec))
      if (int why = a.set_ip(host, port)) ec = detail::bad_addr(why);
  }
  if (ec) return {};
  return a;
}

GORO_DECL std::vector<address> lookup_host(std::string_view name, std::error_code& ec) {
  ec.clear();
  // getaddrinfo reads a C string: "localhost\0evil.com" would resolve
  // localhost. No name has a NUL in it (Go: no such host).
  if (name.find('\0') != std::string_view::npos) return ec = errc::host_not_found, std::vector<address>{};
  if (address a = address::from_ip(name, 0)) return {a};
  std::string host(name);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;  // one entry per address, not one per socket type
  addrinfo* res = nullptr;
  int errno_copy = 0;
  goro::detail::os::net_startup();
  int r = goro::blocking(goro::long_call, [&] {  // the P is handed off at once: a resolver may take long
    detail::testing::lookup_seam();
    int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
    errno_copy = goro::detail::thread_errno();  // on this thread, before the goroutine can move (DESIGN §7)
    return rc;
  });
  std::vector<address> out;
  if (r != 0) {
    namespace os = goro::detail::os;
    if (r == os::gai_noname || r == os::gai_nodata || r == os::gai_addrfamily)
      ec = errc::host_not_found;
    else if (r == os::gai_again)
      ec = errc::try_again;
    else if (r == os::gai_system)
      ec = detail::errno_code(errno_copy ? errno_copy : EIO);
    else if (r == os::gai_memory)
      ec = std::make_error_code(std::errc::not_enough_memory);
    else
      ec = errc::lookup_failed;
    return out;
  }
  for (addrinfo* p = res; p; p = p->ai_next) {
    if (p->ai_family != AF_INET && p->ai_family != AF_INET6) continue;
    address a = address::from_native(p->ai_addr, p->ai_addrlen);
    bool dup = false;
    for (const auto& o : out) dup = dup || o == a;
    if (!dup) out.push_back(a);
  }
  ::freeaddrinfo(res);
  if (out.empty()) ec = errc::host_not_found;
  return out;
}

GORO_DECL std::uint16_t detail::lookup_port(std::string_view service, int type, std::error_code& ec) {
  ec.clear();
  const bool tcp = type == SOCK_STREAM;
  // A service name starts with a letter (RFC 6335), so "+80" or "-1" is
  // never a number getaddrinfo's strtoul reads; and getaddrinfo reads a C
  // string: a NUL would cut the name short.
  const bool letter =
      !service.empty() && ((service[0] >= 'a' && service[0] <= 'z') || (service[0] >= 'A' && service[0] <= 'Z'));
  if (!letter || service.find('\0') != std::string_view::npos) return ec = errc::unknown_port, 0;
  std::string name(service);
  for (char& c : name)  // Go looks names up in lower case
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = type;
  hints.ai_protocol = tcp ? IPPROTO_TCP : IPPROTO_UDP;
  addrinfo* res = nullptr;
  goro::detail::os::net_startup();
  int r = goro::blocking(goro::long_call, [&] {
    detail::testing::lookup_seam();
    return ::getaddrinfo(nullptr, name.c_str(), &hints, &res);
  });
  if (r == 0) {
    std::uint16_t port = 0;
    for (addrinfo* p = res; p && port == 0; p = p->ai_next)
      port = address::from_native(p->ai_addr, static_cast<goro::detail::os::sock_len>(p->ai_addrlen)).port();
    ::freeaddrinfo(res);
    if (port != 0) return port;
  }
  // Go's table for systems without the name (its lookupPortMap, golang.org/issue/18213).
  struct known {
    const char* name;
    std::uint16_t port;
  };
  static constexpr known tcp_ports[] = {{"ftp", 21},    {"ftps", 990},  {"gopher", 70}, {"http", 80},  {"https", 443},
                                        {"imap2", 143}, {"imap3", 220}, {"imaps", 993}, {"pop3", 110}, {"pop3s", 995},
                                        {"smtp", 25},   {"ssh", 22},    {"telnet", 23}};
  static constexpr known udp_ports[] = {{"domain", 53}};
  for (const known& k : tcp ? std::span<const known>(tcp_ports) : std::span<const known>(udp_ports))
    if (name == k.name) return k.port;
  return ec = errc::unknown_port, 0;
}

GORO_DECL std::vector<address> lookup_host(std::string_view name) {
  std::error_code ec;
  auto v = lookup_host(name, ec);
  if (ec) {
#if GORO_EXCEPTIONS
    throw std::system_error(ec, "goro: lookup " + std::string(name));
#else
    goro::detail::fatal(("goro: lookup " + std::string(name) + ": " + ec.message()).c_str());
#endif
  }
  return v;
}

}  // namespace goro::net
#endif  // GORO_COMPILE_RUNTIME
