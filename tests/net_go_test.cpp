// net_go: goro::net where it follows Go's net package in the details a
// Go programmer relies on: listener deadlines (TCPListener.SetDeadline),
// service names as ports ("localhost:http", LookupPort), an unconnected
// UDP socket's remote address (nil in Go: an empty address), addresses
// still known after close (Go's netFD caches them), and a zero-length
// write that still makes the system call (so a broken connection says so).
// Loopback only.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <system_error>
#include <thread>

#include "net_test_util.hpp"

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
namespace net = goro::net;

using goro_test::loopback;
using goro_test::wbytes;

// ---- 1. listener deadlines ------------------------------------------------

TEST_CASE("net_go: a listener deadline ends a blocked accept with a timeout", "[net]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto ln = net::listen_tcp("127.0.0.1:0");
    std::error_code ec;
    auto t0 = steady::now();
    ln.set_deadline(t0 + 50ms, ec);
    CHECK_FALSE(ec);
    auto c = ln.accept(ec);
    CHECK(ec == std::errc::timed_out);
    CHECK_FALSE(c);
    CHECK(steady::now() - t0 >= 50ms);
    CHECK_THROWS_AS(ln.accept(), goro::timeout_error);
    // Past the deadline, accept fails even with a connection waiting (Go's
    // prepareRead); cleared, it takes that connection.
    auto client = net::dial_tcp(loopback(ln));
    ln.accept(ec);
    CHECK(ec == std::errc::timed_out);
    ln.set_deadline({});
    auto server = ln.accept(ec);
    CHECK_FALSE(ec);
    CHECK(server.remote_address() == client.local_address());
    // A later deadline lets accept wait for the next connection.
    ln.set_deadline(steady::now() + 10s);
    goro::go([ln] { net::dial_tcp(loopback(ln)).close(); });
    CHECK(ln.accept(ec));
    CHECK_FALSE(ec);
    client.close();
    server.close();
    ln.close();
    ln.set_deadline({}, ec);
    CHECK(ec == net::errc::closed);
    CHECK_THROWS_AS(ln.set_deadline({}), goro::usage_error);
    net::listener none;
    none.set_deadline({}, ec);
    CHECK(ec == std::errc::invalid_argument);
  });
}

TEST_CASE("net_go: moving a listener's deadline earlier wakes the goroutine blocked in accept", "[net]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto ln = net::listen_tcp("127.0.0.1:0");
    ln.set_deadline(steady::now() + 30s);
    goro::chan<std::error_code> done(1);
    goro::go([ln, done]() mutable {
      std::error_code ec;
      ln.accept(ec);
      done.send(ec);
    });
    goro::sleep_for(30ms);
    auto t0 = steady::now();
    ln.set_deadline(t0 + 20ms);  // earlier: the timer is re-armed
    auto ec = done.recv().value();
    CHECK(ec == std::errc::timed_out);
    CHECK(steady::now() - t0 < 10s);
    // Into the past: the waiter wakes at once.
    ln.set_deadline(steady::now() + 30s);
    goro::go([ln, done]() mutable {
      std::error_code e;
      ln.accept(e);
      done.send(e);
    });
    goro::sleep_for(30ms);
    ln.set_deadline(steady::now() - 1s);
    CHECK(done.recv().value() == std::errc::timed_out);
    ln.close();
  });
}

TEST_CASE("net_go: a listener deadline from a plain thread, and on a Unix listener", "[net]") {
  auto ln = net::listen_tcp("127.0.0.1:0");
  ln.set_deadline(steady::now() + 30ms);
  std::error_code ec;
  ln.accept(ec);
  CHECK(ec == std::errc::timed_out);
  // Moved earlier while a thread waits: it notices within a poll slice.
  ln.set_deadline(steady::now() + 30s);
  std::atomic<bool> woke{false};
  std::thread t([&] {
    std::error_code e;
    ln.accept(e);
    woke = e == std::errc::timed_out;
  });
  std::this_thread::sleep_for(30ms);
  ln.set_deadline(steady::now());
  t.join();
  CHECK(woke.load());
  ln.close();
#if !defined(_WIN32)
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    auto un = net::listen_unix(goro_test::unix_sock_path("net-go", "dl"));
    un.set_deadline(steady::now() + 20ms);
    std::error_code e;
    un.accept(e);
    CHECK(e == std::errc::timed_out);
    un.close();
  });
#endif
}

// ---- 2. service names as ports ---------------------------------------------

TEST_CASE("net_go: a service name is a port where Go takes one; an unknown one names itself", "[net]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    std::error_code ec;
    // dial_udp sends nothing: the connected socket shows the port. "domain"
    // is 53/udp (/etc/services, and Go's own table).
    auto u = net::dial_udp("127.0.0.1:domain", ec);
    REQUIRE_FALSE(ec);
    CHECK(u.remote_address().port() == 53);
    u.close();
    CHECK(net::dial_udp("[::1]:DOMAIN").remote_address().port() == 53);  // any case, as Go
    // TCP: port 80 on loopback (refused unless something serves it); the
    // address is not malformed.
    auto c = net::dial_tcp("127.0.0.1:http", 2s, ec);
    CHECK(ec != std::errc::invalid_argument);
    if (!ec) CHECK(c.remote_address().port() == 80);
    // Unknown: goro::net::errc::unknown_port, the message naming it.
    net::dial_tcp("127.0.0.1:no-such-service", ec);
    CHECK(ec == net::errc::unknown_port);
    CHECK(ec.message() == "unknown port");
    net::listen_tcp("127.0.0.1:no-such-service", ec);
    CHECK(ec == net::errc::unknown_port);
    net::listen_udp("127.0.0.1:no-such-service", ec);
    CHECK(ec == net::errc::unknown_port);
    net::dial_udp("127.0.0.1:no-such-service", ec);
    CHECK(ec == net::errc::unknown_port);
    try {
      net::dial_tcp("localhost:no-such-service");
      FAIL("no exception");
    } catch (const std::system_error& e) {
      CHECK(e.code() == net::errc::unknown_port);
      CHECK(std::string(e.what()) ==
            "goro: dial tcp localhost:no-such-service: lookup tcp/no-such-service: unknown port");
    }
    try {
      net::listen_udp(":no-such-service");
      FAIL("no exception");
    } catch (const std::system_error& e) {
      CHECK(std::string(e.what()) == "goro: listen udp :no-such-service: lookup udp/no-such-service: unknown port");
    }
    // Numbers stay numbers (no lookup), and out of range is still malformed.
    net::dial_tcp("127.0.0.1:99999", ec);
    CHECK(ec == std::errc::invalid_argument);
    // A service name starts with a letter: a sign is no number here.
    net::dial_udp("127.0.0.1:-1", ec);
    CHECK(ec == net::errc::unknown_port);
    // A NUL never cuts a service name short.
    net::dial_udp(std::string_view("127.0.0.1:domain\0x", 18), ec);
    CHECK(ec == net::errc::unknown_port);
    // address::parse is numeric only (Go's netip.ParseAddrPort).
    net::address::parse("127.0.0.1:http", ec);
    CHECK(ec == std::errc::invalid_argument);
  });
}

TEST_CASE("net_go: listen_tcp on a service name binds its port", "[net]") {
  // A service above 1023 that the machine may have free: http-alt (8080)
  // is in /etc/services. In use: EADDRINUSE, still not a malformed address.
  std::error_code ec;
  auto ln = net::listen_tcp("127.0.0.1:http-alt", ec);
  if (!ec) {
    CHECK(ln.port() == 8080);
    ln.close();
  } else {
    CHECK((ec == std::errc::address_in_use || ec == net::errc::unknown_port));
  }
}

// ---- 3. remote_address of an unconnected UDP socket -------------------------

TEST_CASE("net_go: an unconnected packet_conn's remote address is empty, not an error", "[net]") {
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    auto u = net::listen_udp("127.0.0.1:0");
    net::address a;
    CHECK_NOTHROW(a = u.remote_address());
    CHECK_FALSE(a);
    CHECK(a.to_string().empty());
    CHECK(a.port() == 0);
    std::error_code ec = std::make_error_code(std::errc::io_error);
    a = u.remote_address(ec);
    CHECK_FALSE(ec);
    CHECK_FALSE(a);
    // Connected: the peer.
    auto c = net::dial_udp(u.local_address().to_string());
    CHECK(c.remote_address() == u.local_address());
    u.close();
    CHECK_FALSE(u.remote_address());
    c.close();
  });
}

// ---- 4. local_address after close -------------------------------------------

TEST_CASE("net_go: local_address and port still answer after close", "[net]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto ln = net::listen_tcp("127.0.0.1:0");
    const net::address la = ln.local_address();
    auto client = net::dial_tcp(loopback(ln));
    auto server = ln.accept();
    const net::address cl = client.local_address(), sl = server.local_address();
    CHECK(cl == server.remote_address());
    CHECK(sl == la);
    ln.close();
    client.close();
    server.close();
    std::error_code ec;
    CHECK(ln.local_address() == la);
    CHECK(ln.local_address(ec) == la);
    CHECK_FALSE(ec);
    CHECK(ln.port() == la.port());
    CHECK(client.local_address() == cl);
    CHECK(server.local_address(ec) == sl);
    CHECK_FALSE(ec);
    CHECK(client.remote_address() == sl);
    auto u = net::listen_udp("127.0.0.1:0");
    const net::address ul = u.local_address();
    CHECK(ul.port() != 0);
    auto d = net::dial_udp(ul.to_string());
    const net::address dl = d.local_address();
    u.close();
    d.close();
    CHECK(u.local_address() == ul);
    CHECK(u.port(ec) == ul.port());
    CHECK_FALSE(ec);
    CHECK(d.local_address() == dl);
    CHECK(d.remote_address() == ul);
    // Still an error on an empty handle.
    net::conn none;
    CHECK_THROWS_AS(none.local_address(), goro::usage_error);
#if !defined(_WIN32)
    std::string path = goro_test::unix_sock_path("net-go", "la");
    auto un = net::listen_unix(path);
    un.close();
    CHECK(un.local_address().to_string() == path);
#endif
  });
}

// ---- 5. zero-length writes ---------------------------------------------------

TEST_CASE("net_go: a zero-length write makes the system call: a broken connection reports it", "[net]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto ln = net::listen_tcp("127.0.0.1:0");
    auto client = net::dial_tcp(loopback(ln));
    auto server = ln.accept();
    std::error_code ec;
    // Healthy: nothing sent, no error.
    CHECK(client.write(std::span<const std::byte>(), ec) == 0);
    CHECK_FALSE(ec);
    CHECK_NOTHROW(client.write(std::string_view()));
    // Our sending side shut: the write fails (EPIPE, Go's "broken pipe"),
    // though it had no bytes to send.
    client.close_write();
    client.write(std::string_view(), ec);
    CHECK(ec);
    CHECK(ec == std::errc::broken_pipe);  // on Windows too (WSAESHUTDOWN, os/windows/socket.hpp)
    CHECK_THROWS_AS(client.write(std::string_view()), std::system_error);
#if !defined(_WIN32)
    // A peer that reset the connection (Wine closes gracefully instead:
    // net_ext's reset case).
    auto c2 = net::dial_tcp(loopback(ln));
    auto s2 = ln.accept();
    goro_test::linger_reset(s2.native_handle());
    s2.close();
    std::string buf(8, '\0');
    c2.read(wbytes(buf), ec);
    CHECK(ec == std::errc::connection_reset);
    c2.write(std::string_view(), ec);
    CHECK(ec == std::errc::broken_pipe);
    c2.close();
#endif
    // Closed: the usual error.
    client.close();
    client.write(std::string_view(), ec);
    CHECK(ec == net::errc::closed);
    CHECK_THROWS_WITH(client.write(std::string_view()), "goro: use of closed network connection");
    server.close();
    ln.close();
  });
}

// ---- 5. a dial's deadline and context bound its name lookups -----------------

namespace {
// Every getaddrinfo of lookup_host / lookup_port sleeps first (the
// GORO_TESTING seam), as a resolver waiting on a slow server would.
constexpr auto slow_lookup = 400ms;
struct slow_lookups {
  slow_lookups() {
    net::detail::testing::lookup_seam.store([] { std::this_thread::sleep_for(slow_lookup); });
  }
  ~slow_lookups() {
    net::detail::testing::lookup_seam.store(nullptr);
    std::this_thread::sleep_for(slow_lookup + 100ms);  // abandoned lookups finish before the next case
  }
};
}  // namespace

TEST_CASE("net_go: a dial's timeout and context bound its name lookup (Go: the timeout includes resolution)", "[net]") {
  goro::runtime rt{goro::options{2}};
  auto ln = net::listen_tcp("127.0.0.1:0");
  const std::string by_name = "localhost:" + std::to_string(ln.port());
  slow_lookups slow;
  rt.run([&] {
    std::error_code ec;
    // A timeout shorter than the lookup: timed out at the timeout.
    auto t0 = steady::now();
    net::dial_tcp(by_name, 50ms, ec);
    auto took = steady::now() - t0;
    CHECK(ec == std::errc::timed_out);
    CHECK(took < slow_lookup - 100ms);
    CHECK_THROWS_AS(net::dial_tcp(by_name, 50ms), goro::timeout_error);
    // A service name's lookup too.
    t0 = steady::now();
    net::dial_tcp("127.0.0.1:http", 50ms, ec);
    CHECK(ec == std::errc::timed_out);
    CHECK(steady::now() - t0 < slow_lookup - 100ms);
    // A context cancelled during the lookup: operation_canceled at once.
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    goro::go([cancel = cancel] {
      goro::sleep_for(50ms);
      cancel();
    });
    t0 = steady::now();
    net::dial_tcp(by_name, ctx, ec);
    CHECK(ec == std::errc::operation_canceled);
    CHECK(steady::now() - t0 < slow_lookup - 100ms);
    // A context's deadline: timed out.
    auto [tctx, tcancel] = goro::with_timeout(goro::background(), 50ms);
    net::dial_tcp(by_name, tctx, ec);
    CHECK(ec == std::errc::timed_out);
    tcancel();
    // A timeout longer than the lookup: the dial goes through.
    auto c = net::dial_tcp(by_name, 5s, ec);
    REQUIRE_FALSE(ec);
    auto s = ln.accept();
    CHECK(c.remote_address().port() == ln.port());
  });
  // A context with no deadline, cancelled by nobody, while the lookup runs
  // past the deadlock check's grace period: no deadlock (the lookup can
  // still wake the dialer), and the dial goes through.
  rt.run([&] {
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    auto c = net::dial_tcp(by_name, ctx);
    auto s = ln.accept();
    CHECK(c.remote_address().port() == ln.port());
    cancel();
  });
  // main returning right after a dial gave up does not wait for the
  // abandoned lookup (Go exits; a goroutine in getaddrinfo would hold an M
  // that the runtime's end joins).
  auto t1 = steady::now();
  rt.run([&] {
    std::error_code ec;
    net::dial_tcp(by_name, 20ms, ec);
    CHECK(ec == std::errc::timed_out);
  });
  CHECK(steady::now() - t1 < slow_lookup - 100ms);
  // From a plain thread (the lookup on a thread of its own).
  std::error_code ec;
  auto t0 = steady::now();
  net::dial_tcp(by_name, 50ms, ec);
  CHECK(ec == std::errc::timed_out);
  CHECK(steady::now() - t0 < slow_lookup - 100ms);
  auto [ctx, cancel] = goro::with_timeout(goro::background(), 50ms);
  t0 = steady::now();
  net::dial_tcp(by_name, ctx, ec);
  CHECK(ec == std::errc::timed_out);
  CHECK(steady::now() - t0 < slow_lookup - 100ms);
}
