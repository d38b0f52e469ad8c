// net_misuse: goro::net used the wrong way, as a demanding new user would:
// names and addresses with odd bytes, calls after close, deadlines far in
// the past or the future, zero-length buffers, addresses at the edges of
// what parses. Each must give a clear error, never a crash, a hang or a
// wrong answer. Loopback only.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>

#include "test_util.hpp"

using namespace std::chrono_literals;
namespace net = goro::net;

namespace net_misuse {

std::string port_of(const net::listener& ln) { return std::to_string(ln.port()); }

}  // namespace net_misuse

using namespace net_misuse;

TEST_CASE("net_misuse: a host with a NUL in it is no such host, never the name before the NUL", "[net]") {
  // getaddrinfo and inet_pton read C strings: "localhost\0evil.com"
  // resolved (and dialed) localhost, "127.0.0.1\0x" parsed as 127.0.0.1.
  using namespace std::string_view_literals;
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto ln = net::listen_tcp("127.0.0.1:0");
    std::error_code ec;
    for (std::string_view name : {"localhost\0evil.com"sv, "127.0.0.1\0x"sv, "::1\0"sv, "\0"sv}) {
      auto v = net::lookup_host(name, ec);
      CHECK(ec == net::errc::host_not_found);
      CHECK(v.empty());
      CHECK_THROWS_AS(net::lookup_host(name), std::system_error);
      ec.clear();
    }
    try {
      net::lookup_host("localhost\0evil.com"sv);
    } catch (const std::system_error& e) {
      CHECK(e.code() == net::errc::host_not_found);
    }
    for (std::string host : {"localhost", "127.0.0.1"}) {
      std::string hp = host + std::string("\0evil.com:", 10) + port_of(ln);
      auto c = net::dial_tcp(hp, ec);
      CHECK(ec == net::errc::host_not_found);
      CHECK_FALSE(c);
      CHECK_THROWS_AS(net::dial_tcp(hp), std::system_error);
      ec.clear();
      auto u = net::dial_udp(hp, ec);
      CHECK(ec == net::errc::host_not_found);
      CHECK_FALSE(u);
      ec.clear();
      std::string lp = host + std::string("\0x:0", 4);
      auto l = net::listen_tcp(lp, ec);
      CHECK(ec == net::errc::host_not_found);
      CHECK_FALSE(l);
      ec.clear();
      auto lu = net::listen_udp(lp, ec);
      CHECK(ec == net::errc::host_not_found);
      CHECK_FALSE(lu);
      ec.clear();
    }
    // Numeric forms: malformed.
    auto a = net::address::parse("127.0.0.1\0x:80"sv, ec);
    CHECK(ec == std::errc::invalid_argument);
    CHECK_FALSE(a);
    CHECK_THROWS_AS(net::address::parse("[::1\0x]:80"sv), std::system_error);
    CHECK_FALSE(net::address::from_ip("127.0.0.1\0x"sv, 80));
    CHECK(net::address::from_ip("127.0.0.1", 80));
    ln.close();
  });
}
