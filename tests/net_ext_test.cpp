// net_ext: goro::net beyond plain TCP — address parsing, lookup_host,
// dialing names, local / remote addresses, close_write, dial with a
// timeout or a context, wait_readable / wait_writable with a context, Unix
// sockets, UDP packet_conn, and the std::error_code& overloads (refused,
// reset, timed out, closed, empty handle, unknown host). Loopback only.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#if !defined(_WIN32)
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "net_test_util.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
namespace net = goro::net;

namespace {

using goro_test::loopback;
using goro_test::wbytes;

// Reads until end of stream.
std::string read_all(net::conn& c) {
  std::string out, buf(256, '\0');
  for (;;) {
    std::size_t n = c.read(wbytes(buf));
    if (n == 0) return out;
    out.append(buf.data(), n);
  }
}

// A loopback port nobody listens on (bound, noted, closed).
std::uint16_t dead_port() {
  auto ln = net::listen_tcp("127.0.0.1:0");
  std::uint16_t p = ln.port();
  ln.close();
  return p;
}

#if !defined(_WIN32)
// A unique socket path in the temp dir.
std::string sock_path(const char* tag) { return goro_test::unix_sock_path("net-ext", tag); }
#endif

// A listener whose accept queue is full (backlog 0, one connection queued,
// never accepted): a further connect's SYN is dropped, so the connect
// hangs until its deadline. Returns the fd (the caller closes it) and port.
net::native_socket full_listener(std::uint16_t& port, std::vector<net::conn>& fillers) {
  net::native_socket fd = ::socket(AF_INET, SOCK_STREAM, 0);
  auto a = net::address::parse("127.0.0.1:0");
  ::bind(fd, a.native(), a.native_size());
  ::listen(fd, 0);
  sockaddr_storage ss{};
  goro::detail::os::sock_len len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  port = net::address::from_native(reinterpret_cast<sockaddr*>(&ss), len).port();
  // Fill the queue: dials that complete at once.
  for (int i = 0; i < 4; ++i) {
    std::error_code ec;
    auto c = net::dial_tcp("127.0.0.1:" + std::to_string(port), 200ms, ec);
    if (ec) break;
    fillers.push_back(c);
  }
  return fd;
}

}  // namespace

TEST_CASE("net_ext: address parse, to_string, port, family", "[net]") {
  auto a = net::address::parse("127.0.0.1:8080");
  CHECK(a.is_ipv4());
  CHECK(a.port() == 8080);
  CHECK(a.to_string() == "127.0.0.1:8080");
  CHECK(a.host() == "127.0.0.1");
  CHECK(a.is_loopback());
  auto b = net::address::parse("[::1]:443");
  CHECK(b.is_ipv6());
  CHECK(b.port() == 443);
  CHECK(b.to_string() == "[::1]:443");
  CHECK(b.is_loopback());
  CHECK(b.with_port(1).to_string() == "[::1]:1");
  auto u = net::address::parse("/tmp/x.sock");
  CHECK(u.is_unix());
  CHECK(u.port() == 0);
  CHECK(u.to_string() == "/tmp/x.sock");
  CHECK(net::address::parse("@abstract").to_string() == "@abstract");
  CHECK(net::address::parse("127.0.0.1:80") == net::address::from_ip("127.0.0.1", 80));
  CHECK_FALSE(net::address::parse("127.0.0.1:80") == net::address::parse("127.0.0.1:81"));
  // An empty port is port 0, as in Go ("127.0.0.1:" listens on a free port).
  CHECK(net::address::parse("127.0.0.1:") == net::address::from_ip("127.0.0.1", 0));
  CHECK(net::address::parse("[::1]:") == net::address::from_ip("::1", 0));
  CHECK_FALSE(net::address());
  CHECK(net::address().to_string().empty());

  std::error_code ec;
  for (const char* bad : {"127.0.0.1", "host.example:80", "1.2.3.4:99999", "[::1:80", "::1:80", "1.2.3.4:x"}) {
    auto r = net::address::parse(bad, ec);
    CHECK(ec == std::errc::invalid_argument);
    CHECK_FALSE(r);
  }
  CHECK_THROWS_AS(net::address::parse("nope"), std::system_error);
  try {
    net::address::parse("127.0.0.1");
  } catch (const std::system_error& e) {
    CHECK(e.code().value() == EINVAL);
    CHECK(std::string(e.what()).find("missing port") != std::string::npos);
  }
}

TEST_CASE("net_ext: lookup_host resolves localhost, from a goroutine and a thread", "[net]") {
  auto has_loopback = [](const std::vector<net::address>& v) {
    for (const auto& a : v)
      if (a.is_loopback() && a.port() == 0) return true;
    return false;
  };
  goro::runtime rt{goro::options{1}};
  rt.run([&] {
    std::error_code ec;
    auto v = net::lookup_host("localhost", ec);
    CHECK_FALSE(ec);
    CHECK(has_loopback(v));
    CHECK(has_loopback(net::lookup_host("localhost")));
    auto n = net::lookup_host("::1", ec);  // numeric: no lookup
    REQUIRE(n.size() == 1);
    CHECK(n[0].to_string() == "[::1]:0");
  });
  CHECK(has_loopback(net::lookup_host("localhost")));  // a plain thread: the call just runs
}

TEST_CASE("net_ext: an unknown host is an error, not an address", "[net]") {
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    std::error_code ec;
    auto v = net::lookup_host("no-such-host.invalid", ec);
    CHECK(v.empty());
    CHECK(ec);  // host_not_found (or try_again where no resolver answers)
    CHECK(ec.category() == net::net_category());
    CHECK_THROWS_AS(net::lookup_host("no-such-host.invalid"), std::system_error);
    auto c = net::dial_tcp("no-such-host.invalid:80", ec);
    CHECK(ec);
    CHECK_FALSE(c);
    CHECK_THROWS_AS(net::dial_tcp("no-such-host.invalid:80"), std::system_error);
  });
}

TEST_CASE("net_ext: dial_tcp resolves localhost; local and remote addresses match", "[net]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto ln = net::listen_tcp("127.0.0.1:0");
    CHECK(ln.local_address().to_string() == loopback(ln));
    auto client = net::dial_tcp("localhost:" + std::to_string(ln.port()));
    auto server = ln.accept();
    CHECK(client.remote_address().to_string() == loopback(ln));
    CHECK(client.local_address() == server.remote_address());
    CHECK(server.local_address() == client.remote_address());
    CHECK(server.remote_address().is_loopback());
    std::error_code ec;
    CHECK(client.local_address(ec).port() != 0);
    CHECK_FALSE(ec);
    client.write("hi");
    std::string buf(2, '\0');
    CHECK(server.read(wbytes(buf)) == 2);
    CHECK(buf == "hi");
    // Both addresses stay known after close (Go's netFD keeps them).
    net::address peer = client.remote_address(), local = client.local_address();
    client.close();
    CHECK(client.remote_address() == peer);
    CHECK(client.local_address(ec) == local);
    CHECK_FALSE(ec);
    server.close();
    ln.close();
  });
}

TEST_CASE("net_ext: close_write gives the peer end of stream, and it can still answer", "[net]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto ln = net::listen_tcp("127.0.0.1:0");
    goro::go([ln]() mutable {
      auto c = ln.accept();
      std::string got = read_all(c);  // until the client's close_write
      c.write("got " + got);
      c.close();
    });
    auto c = net::dial_tcp(loopback(ln));
    c.write("hello");
    std::error_code ec;
    c.close_write(ec);
    CHECK_FALSE(ec);
    CHECK(read_all(c) == "got hello");
    c.write("more", ec);  // the sending side is shut
    CHECK(ec == std::errc::broken_pipe);
    c.close();
    c.close_write(ec);
    CHECK(ec == net::errc::closed);
    CHECK_THROWS_AS(c.close_write(), goro::usage_error);
    ln.close();
  });
}

TEST_CASE("net_ext: a refused dial through error_code and exceptions", "[net]") {
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    std::string target = "127.0.0.1:" + std::to_string(dead_port());
    std::error_code ec;
    auto c = net::dial_tcp(target, ec);
    CHECK(ec == std::errc::connection_refused);
    CHECK_FALSE(c);
    net::dial_tcp(target, 1s, ec);
    CHECK(ec == std::errc::connection_refused);
    net::dial_tcp(target, goro::background(), ec);
    CHECK(ec == std::errc::connection_refused);
    try {
      net::dial_tcp(target);
      FAIL("no error");
    } catch (const std::system_error& e) {
      CHECK(e.code() == std::errc::connection_refused);
      CHECK(std::string(e.what()).find("dial tcp " + target) != std::string::npos);
    }
    // localhost: every address refused, the first error reported.
    net::dial_tcp("localhost:" + target.substr(target.find(':') + 1), ec);
    CHECK(ec == std::errc::connection_refused);
    net::dial_tcp("127.0.0.1", ec);
    CHECK(ec == std::errc::invalid_argument);
  });
}

// The read parks before the peer's RST and resumes on another M: it must
// read that thread's errno (detail::thread_errno). Reading errno directly,
// clang -O2 kept &errno from before the park and saw the old thread's
// EAGAIN (parking for good) or ETIMEDOUT: 5-8 runs in 60 failed.
TEST_CASE("net_ext: a reset peer is ECONNRESET through error_code", "[net]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto ln = net::listen_tcp("127.0.0.1:0");
    auto client = net::dial_tcp(loopback(ln));
    auto server = ln.accept();
    goro_test::linger_reset(server.native_handle());  // close sends RST
    goro::go([server]() mutable {
      goro::sleep_for(20ms);
      server.close();
    });
    std::string buf(16, '\0');
    std::error_code ec;
    std::size_t n = client.read(wbytes(buf), ec);
    CHECK(n == 0);
#if defined(_WIN32)
    // Wine 8 closes a SO_LINGER {1, 0} socket gracefully: a plain Winsock
    // program's blocking recv gets 0 there too, not WSAECONNRESET. What
    // is left to check: the parked read ends (at end of stream).
    CHECK((ec == std::errc::connection_reset || !ec));
#else
    CHECK(ec == std::errc::connection_reset);
#endif
    client.close();
    ln.close();
  });
}

TEST_CASE("net_ext: deadlines, closed sockets and empty handles through error_code", "[net]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto ln = net::listen_tcp("127.0.0.1:0");
    auto client = net::dial_tcp(loopback(ln));
    auto server = ln.accept();
    std::string buf(16, '\0');
    std::error_code ec;
    auto t0 = steady::now();  // before the deadline is set: it counts from t0
    server.set_read_deadline(t0 + 20ms, ec);
    CHECK_FALSE(ec);
    CHECK(server.read(wbytes(buf), ec) == 0);
    CHECK(ec == std::errc::timed_out);
    CHECK(ec == std::make_error_code(std::errc::timed_out));
    CHECK(steady::now() - t0 >= 20ms);
    CHECK_THROWS_AS(server.read(wbytes(buf)), goro::timeout_error);
    server.set_deadline({}, ec);
    client.write("x", ec);
    CHECK_FALSE(ec);
    CHECK(server.read(wbytes(buf), ec) == 1);
    CHECK_FALSE(ec);
    // A write deadline: the peer never reads. 300 ms: the first write
    // must start before it passes (sent > 0), which a TSan build on a
    // loaded machine missed at 50 ms.
    client.set_write_deadline(steady::now() + 300ms);
    std::string big(1 << 20, 'z');
    std::size_t sent = 0;
    for (int i = 0; i < 64 && !ec; ++i) sent += client.write(big, ec);
    CHECK(ec == std::errc::timed_out);
    CHECK(sent > 0);
    // close wakes a blocked reader with errc::closed (the client: the
    // server has data waiting).
    goro::go([client]() mutable {
      goro::sleep_for(20ms);
      client.close();
    });
    client.read(wbytes(buf), ec);
    CHECK(ec == net::errc::closed);
    CHECK(ec.message() == "use of closed network connection");
    client.write("x", ec);
    CHECK(ec == net::errc::closed);
    client.set_deadline({}, ec);
    CHECK(ec == net::errc::closed);
    // Accept on a closed listener.
    ln.close();
    ln.accept(ec);
    CHECK(ec == net::errc::closed);
    CHECK_THROWS_AS(ln.accept(), goro::usage_error);
    // Empty handles: invalid_argument (Go's EINVAL on a nil conn), never a throw.
    net::conn none;
    none.read(wbytes(buf), ec);
    CHECK(ec == std::errc::invalid_argument);
    none.write("x", ec);
    CHECK(ec == std::errc::invalid_argument);
    none.close(ec);
    CHECK(ec == std::errc::invalid_argument);
    none.remote_address(ec);
    CHECK(ec == std::errc::invalid_argument);
    net::listener nl;
    nl.accept(ec);
    CHECK(ec == std::errc::invalid_argument);
    CHECK_THROWS_AS(none.local_address(), goro::usage_error);
    server.close();
  });
}

TEST_CASE("net_ext: close is idempotent: a twice-closed conn stays closed and never reaches a reused fd", "[net]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto ln = net::listen_tcp("127.0.0.1:0");
    for (int closes = 2; closes <= 4; ++closes) {
      auto stale = net::dial_tcp(loopback(ln));
      auto stale_peer = ln.accept();
      const net::address stale_local = stale.local_address();
      for (int i = 0; i < closes; ++i) stale.close();
      // A new connection, most likely on the fd number the stale one had.
      auto c = net::dial_tcp(loopback(ln));
      auto peer = ln.accept();
      std::error_code ec;
      stale.close_write(ec);
      CHECK(ec == net::errc::closed);
      // Its own address, noted when it connected: not the new one's.
      CHECK(stale.local_address(ec) == stale_local);
      CHECK_FALSE(ec);
      CHECK(c.local_address() != stale_local);
      CHECK_THROWS_AS(stale.close_write(), goro::usage_error);
      std::string buf(16, '\0');
      CHECK(stale.read(wbytes(buf), ec) == 0);
      CHECK(ec == net::errc::closed);
      CHECK(stale.write("x", ec) == 0);
      CHECK(ec == net::errc::closed);
      // The new connection is untouched: no end of stream, no "closed".
      c.write("ok", ec);
      CHECK_FALSE(ec);
      CHECK(peer.read(wbytes(buf), ec) == 2);
      CHECK_FALSE(ec);
      peer.write("ok", ec);
      CHECK_FALSE(ec);
      CHECK(c.read(wbytes(buf), ec) == 2);
      CHECK_FALSE(ec);
    }
    ln.close();
    ln.close();
    std::error_code ec;
    ln.accept(ec);
    CHECK(ec == net::errc::closed);
  });
}

TEST_CASE("net_ext: a deadline that has passed fails read and write even when they would not block", "[net]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto ln = net::listen_tcp("127.0.0.1:0");
    auto c = net::dial_tcp(loopback(ln));
    auto peer = ln.accept();
    peer.write("data");
    std::string buf(16, '\0');
    std::error_code ec;
    goro::sleep_for(10ms);  // the data is there: a read would not block
    c.set_deadline(steady::now() - 1s);
    CHECK(c.read(wbytes(buf), ec) == 0);
    CHECK(ec == std::errc::timed_out);
    CHECK_THROWS_AS(c.read(wbytes(buf)), goro::timeout_error);
    CHECK(c.write("x", ec) == 0);  // the socket buffer has room
    CHECK(ec == std::errc::timed_out);
    CHECK_THROWS_AS(c.write("x"), goro::timeout_error);
    // A later deadline (or none) lets the same calls proceed.
    c.set_deadline(steady::now() + 5s);
    CHECK(c.read(wbytes(buf), ec) == 4);
    CHECK_FALSE(ec);
    CHECK(c.write("x", ec) == 1);
    CHECK_FALSE(ec);
    // UDP: a datagram waiting, room to send.
    auto u = net::listen_udp("127.0.0.1:0");
    auto v = net::dial_udp("127.0.0.1:" + std::to_string(u.port()));
    v.write("dgram");
    goro::sleep_for(10ms);
    u.set_deadline(steady::now() - 1s);
    u.read_from(wbytes(buf), ec);
    CHECK(ec == std::errc::timed_out);
    u.write_to("x", v.local_address(), ec);
    CHECK(ec == std::errc::timed_out);
    u.set_deadline(steady::now() + 5s);
    CHECK(u.read_from(wbytes(buf), ec).first == 5);
    CHECK_FALSE(ec);
  });
}

TEST_CASE("net_ext: dial_tcp with a timeout gives up on a connect that hangs", "[net]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    std::uint16_t port = 0;
    std::vector<net::conn> fillers;
    net::native_socket fd = full_listener(port, fillers);
    std::string target = "127.0.0.1:" + std::to_string(port);
    std::error_code ec;
    bool timed_out = false;
    auto t0 = steady::now();
    std::vector<net::conn> more;
    for (int i = 0; i < 8 && !timed_out; ++i) {
      auto c = net::dial_tcp(target, 50ms, ec);
      if (ec == std::errc::timed_out)
        timed_out = true;
      else if (!ec)
        more.push_back(c);
    }
    CHECK(timed_out);
    CHECK(steady::now() - t0 < 5s);
    CHECK_THROWS_AS(net::dial_tcp(target, 30ms), goro::timeout_error);
    // A negative timeout has passed already; zero is none.
    net::dial_tcp(target, -1ms, ec);
    CHECK(ec == std::errc::timed_out);
    goro_test::close_native(fd);
  });
}

TEST_CASE("net_ext: dial_tcp with a context: cancelled, past its deadline, cancelled while connecting", "[net]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto ln = net::listen_tcp("127.0.0.1:0");
    std::error_code ec;
    {
      auto [ctx, cancel] = goro::with_cancel(goro::background());
      auto c = net::dial_tcp(loopback(ln), ctx, ec);  // a live context: connects
      CHECK_FALSE(ec);
      auto s = ln.accept();
      cancel();  // after the dial: the conn is unaffected (the watcher is gone)
      c.write("ok");
      std::string buf(2, '\0');
      CHECK(s.read(wbytes(buf)) == 2);
      c.write("ok", ec);
      CHECK_FALSE(ec);
      net::dial_tcp(loopback(ln), ctx, ec);
      CHECK(ec == std::errc::operation_canceled);
      CHECK_THROWS_AS(net::dial_tcp(loopback(ln), ctx), std::system_error);
    }
    {
      auto [ctx, cancel] = goro::with_timeout(goro::background(), -1ms);
      net::dial_tcp(loopback(ln), ctx, ec);
      CHECK(ec == std::errc::timed_out);
      CHECK_THROWS_AS(net::dial_tcp(loopback(ln), ctx), goro::timeout_error);
      cancel();
    }
    std::uint16_t port = 0;
    std::vector<net::conn> fillers;
    net::native_socket fd = full_listener(port, fillers);
    std::string target = "127.0.0.1:" + std::to_string(port);
    {
      auto [ctx, cancel] = goro::with_cancel(goro::background());
      goro::go([cancel = cancel] {
        goro::sleep_for(30ms);
        cancel();
      });
      auto t0 = steady::now();
      std::vector<net::conn> more;
      for (int i = 0; i < 8; ++i) {
        auto c = net::dial_tcp(target, ctx, ec);
        if (ec) break;
        more.push_back(c);
      }
      CHECK(ec == std::errc::operation_canceled);
      CHECK(steady::now() - t0 < 5s);
    }
    {
      auto [ctx, cancel] = goro::with_timeout(goro::background(), 30ms);
      for (int i = 0; i < 8; ++i) {
        net::dial_tcp(target, ctx, ec);
        if (ec) break;
      }
      CHECK(ec == std::errc::timed_out);
      cancel();
    }
    goro_test::close_native(fd);
    ln.close();
  });
}

TEST_CASE("net_ext: wait_readable / wait_writable with a context", "[net]") {
  goro_test::test_pipe p;
  goro::runtime rt{goro::options{2}};
  rt.run([&] {
    std::error_code ec;
    CHECK(net::wait_writable(p.w(), goro::background()));
    {
      auto [ctx, cancel] = goro::with_cancel(goro::background());
      goro::go([cancel = cancel] {
        goro::sleep_for(20ms);
        cancel();
      });
      CHECK_FALSE(net::wait_readable(p.r(), ctx, ec));  // nobody writes: the cancel ends it
      CHECK_FALSE(ec);
      CHECK_FALSE(net::wait_readable(p.r(), ctx));  // done already
    }
    {
      auto [ctx, cancel] = goro::with_timeout(goro::background(), 20ms);
      auto t0 = steady::now();
      CHECK_FALSE(net::wait_readable(p.r(), ctx));
      CHECK(steady::now() - t0 >= 15ms);
      cancel();
    }
    {
      auto [ctx, cancel] = goro::with_cancel(goro::background());
      std::atomic<bool> wrote{false};  // Catch's CHECK is not thread-safe: only main checks
      goro::go([&] {
        goro::sleep_for(10ms);
        wrote = p.put('x');
      });
      CHECK(net::wait_readable(p.r(), ctx, ec));
      CHECK(goro_test::eventually([&] { return wrote.load(); }));
      CHECK(p.get() == 'x');
      cancel();
    }
    // The deadline form through error_code.
    CHECK_FALSE(net::wait_readable(p.r(), steady::now() + 10ms, ec));
    CHECK(ec == std::errc::timed_out);
    CHECK(net::wait_writable(p.w(), ec));
    CHECK_FALSE(ec);
  });
  // From a plain thread: the context is polled.
  auto [ctx, cancel] = goro::with_timeout(goro::background(), 30ms);
  CHECK_FALSE(net::wait_readable(p.r(), ctx));
  cancel();
}

#if !defined(_WIN32)
TEST_CASE("net_ext: Unix sockets: round trip, addresses, the file removed on close", "[net]") {
  std::string path = sock_path("rt");
  ::unlink(path.c_str());
  goro::runtime rt{goro::options{2}};
  rt.run([&] {
    auto ln = net::listen_unix(path);
    CHECK(ln.port() == 0);
    CHECK(ln.local_address().to_string() == path);
    struct stat st {};
    CHECK(::stat(path.c_str(), &st) == 0);
    std::error_code ec;
    net::listen_unix(path, ec);  // in use
    CHECK(ec == std::errc::address_in_use);
    goro::go([ln]() mutable {
      auto c = ln.accept();
      std::string buf(64, '\0');
      for (;;) {
        std::size_t n = c.read(wbytes(buf));
        if (n == 0) break;
        c.write(std::string_view(buf.data(), n));
      }
      c.close();
    });
    auto c = net::dial_unix(path);
    CHECK(c.remote_address().to_string() == path);
    CHECK(c.remote_address().is_unix());
    c.write("over unix");
    c.close_write();
    CHECK(read_all(c) == "over unix");
    c.close();
    ln.close();
    CHECK(::stat(path.c_str(), &st) != 0);  // removed
    net::dial_unix(path, ec);
    CHECK(ec == std::errc::no_such_file_or_directory);
    CHECK_THROWS_AS(net::dial_unix(path), std::system_error);
    // The abstract namespace: no file.
    std::string abs = "@goro-net-ext-" + std::to_string(::getpid());
    auto aln = net::listen_unix(abs);
    goro::go([aln]() mutable { aln.accept().write("abstract"); });
    auto ac = net::dial_unix(abs);
    CHECK(read_all(ac) == "abstract");
    aln.close();
  });
}

TEST_CASE("net_ext: a Unix listener's file is gone when close returns, though an accept still holds the socket",
          "[net]") {
  // close() left the unlink to the socket's destruction, which waits for
  // the operations in progress: with a goroutine (or a thread) blocked in
  // accept, the file stayed until it had run, so listening on the path
  // again right after close() failed with EADDRINUSE (Go unlinks in Close).
  // The unlink is done once: the late destruction must not remove the
  // file of the listener that took the path since.
  std::string path = sock_path("relisten");
  ::unlink(path.c_str());
  goro::runtime rt{goro::options{1}};  // the woken accept runs only when main parks
  rt.run([&] {
    struct stat st {};
    for (bool thread : {false, true}) {
      INFO((thread ? "a thread" : "a goroutine") << " blocked in accept");
      auto ln = net::listen_unix(path);
      goro::chan<std::error_code> woke(1);
      std::thread th;
      auto accept = [ln, woke]() mutable {
        std::error_code ec;
        ln.accept(ec);
        woke.send(ec);
      };
      if (thread)
        th = std::thread(accept);
      else
        goro::go(accept);
      goro::sleep_for(20ms);  // blocked in accept
      ln.close();
      CHECK(::stat(path.c_str(), &st) != 0);  // removed at once
      std::error_code ec;
      auto again = net::listen_unix(path, ec);
      CHECK_FALSE(ec);
      CHECK(woke.recv().value_or(std::error_code{}) == net::errc::closed);
      if (th.joinable()) th.join();
      ln = net::listener{};                   // the last handle: the first socket is destroyed
      CHECK(::stat(path.c_str(), &st) == 0);  // the new listener's file stays
      if (again) {
        goro::go([again]() mutable { again.accept().write("again"); });
        auto c = net::dial_unix(path);
        CHECK(read_all(c) == "again");
        again.close();
      }
    }
  });
  ::unlink(path.c_str());
}
#else
// Wine 8's Winsock has no AF_UNIX (WSAEAFNOSUPPORT), so goro does not
// offer Unix sockets on Windows: they fail cleanly (os/windows/socket.hpp).
TEST_CASE("net_ext: Unix sockets are not offered on Windows", "[net]") {
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    std::error_code ec;
    CHECK_FALSE(net::listen_unix("goro-test.sock", ec));
    CHECK(ec == std::errc::address_family_not_supported);
    CHECK_FALSE(net::dial_unix("goro-test.sock", ec));
    CHECK(ec == std::errc::address_family_not_supported);
    CHECK_THROWS_AS(net::listen_unix("goro-test.sock"), std::system_error);
    CHECK_THROWS_AS(net::dial_unix("goro-test.sock"), std::system_error);
  });
}
#endif

TEST_CASE("net_ext: UDP round trip, read_from gives the sender, connected read / write", "[net]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto srv = net::listen_udp("127.0.0.1:0");
    CHECK(srv.port() != 0);
    CHECK(srv.local_address().to_string() == "127.0.0.1:" + std::to_string(srv.port()));
    goro::go([srv]() mutable {  // echo, upper-cased
      std::string buf(1500, '\0');
      for (;;) {
        std::error_code ec;
        auto [n, from] = srv.read_from(wbytes(buf), ec);
        if (ec) return;  // closed
        for (std::size_t i = 0; i < n; ++i) buf[i] = static_cast<char>(std::toupper(buf[i]));
        srv.write_to(std::string_view(buf.data(), n), from);
      }
    });
    auto c = net::dial_udp("localhost:" + std::to_string(srv.port()));
    CHECK(c.remote_address() == srv.local_address());
    std::string buf(64, '\0');
    for (int i = 0; i < 5; ++i) {
      std::string msg = "ping " + std::to_string(i);
      CHECK(c.write(msg) == msg.size());
      std::size_t n = c.read(wbytes(buf));
      CHECK(std::string(buf.data(), n) == "PING " + std::to_string(i));
    }
    // An unconnected socket: write_to / read_from, and the sender's address.
    auto u = net::listen_udp("127.0.0.1:0");
    std::error_code ec;
    u.write_to("hello", srv.local_address(), ec);
    CHECK_FALSE(ec);
    auto [n, from] = u.read_from(wbytes(buf), ec);
    CHECK_FALSE(ec);
    CHECK(std::string(buf.data(), n) == "HELLO");
    CHECK(from == srv.local_address());
    srv.close();
    u.close();
    c.close();
  });
}

TEST_CASE("net_ext: UDP deadlines, refused peers, close and empty handles", "[net]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    auto u = net::listen_udp("127.0.0.1:0");
    std::string buf(64, '\0');
    std::error_code ec;
    u.set_read_deadline(steady::now() + 20ms);
    u.read_from(wbytes(buf), ec);
    CHECK(ec == std::errc::timed_out);
    CHECK_THROWS_AS(u.read_from(wbytes(buf)), goro::timeout_error);
    u.set_deadline({});
    // Connected to a port nobody has: the ICMP error shows on a later call.
    auto dead = net::listen_udp("127.0.0.1:0");
    std::uint16_t port = dead.port();
    dead.close();
    auto c = net::dial_udp("127.0.0.1:" + std::to_string(port));
    c.set_read_deadline(steady::now() + 2s);
    c.write("anyone?", ec);
    CHECK_FALSE(ec);
    c.read(wbytes(buf), ec);
#if defined(_WIN32)
    // Wine 8 reports no ICMP error on a connected UDP socket (a plain
    // Winsock program's recv times out too): the deadline ends the read.
    CHECK((ec == std::errc::connection_refused || ec == std::errc::timed_out));
#else
    CHECK(ec == std::errc::connection_refused);
#endif
    // close wakes a blocked reader.
    goro::go([u]() mutable {
      goro::sleep_for(20ms);
      u.close();
    });
    u.read_from(wbytes(buf), ec);
    CHECK(ec == net::errc::closed);
    CHECK_THROWS_AS(u.read_from(wbytes(buf)), goro::usage_error);
    net::packet_conn none;
    none.read(wbytes(buf), ec);
    CHECK(ec == std::errc::invalid_argument);
    CHECK_THROWS_AS(none.port(), goro::usage_error);
    net::listen_udp("127.0.0.1", ec);
    CHECK(ec == std::errc::invalid_argument);
    c.close();
  });
}

TEST_CASE("net_ext: a goroutine whose reads never park is still preempted at them", "[net][preempt]") {
  // At 1 P, main reads and writes a socket for 300 ms without ever
  // parking (it reads only what is there, writes only into an empty
  // buffer): only the preemption request sysmon posts after a time slice
  // lets the goroutine queued behind it run. Every goro call that can
  // switch honours a pending request (net calls did not).
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    net::listener l = net::listen_tcp("127.0.0.1:0");
    net::conn client = net::dial_tcp("127.0.0.1:" + std::to_string(l.port()));
    net::conn server = l.accept();
    const std::string chunk(4096, 'x');
    std::atomic<bool> other_ran{false};
    goro::go([&] { other_ran = true; });
    const auto t0 = steady::now();
    std::size_t calls = 0;
    std::byte b[1];
    while (!other_ran.load() && steady::now() - t0 < 300ms) {
      long avail = goro_test::bytes_available(server.native_handle());
      if (avail < 0) FAIL("FIONREAD failed");
      if (avail == 0)
        client.write(chunk);  // the buffers are empty: no park
      else
        (void)server.read(b);  // data is there: no park
      ++calls;
    }
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t0).count();
    INFO(calls << " net calls in " << took << " ms");
    CHECK(other_ran.load());
  });
}

TEST_CASE("net_ext: a deadline set in a runtime since destroyed still ends a wait in another runtime", "[net]") {
  // The deadline's timer was queued on runtime a's heaps, which a's end
  // cleared; a goroutine of b parked past the deadline then waited until
  // the watchdog's close (errc::closed, 10 s), not the deadline.
  net::listener ln;
  net::conn c, peer;
  {
    goro::runtime a{goro::options{2}};
    a.run([&] {
      ln = net::listen_tcp("127.0.0.1:0");
      c = net::dial_tcp(loopback(ln));
      peer = ln.accept();
      c.set_deadline(steady::now() + 100ms);
    });
  }
  goro::runtime b{goro::options{2}};
  b.run([&] {
    goro::go([c]() mutable {
      goro::sleep_for(10s);
      c.close();
    });
    std::string buf(16, '\0');
    std::error_code ec;
    c.read(wbytes(buf), ec);
    CHECK(ec == std::errc::timed_out);
    // The write side's timer was dropped too: fill the socket buffer.
    std::string big(1 << 20, 'z');
    ec.clear();
    for (int i = 0; i < 64 && !ec; ++i) c.write(big, ec);
    CHECK(ec == std::errc::timed_out);
    c.close();
  });
}

namespace {
// A connected pair made in a runtime that then goes idle (run() returned,
// the runtime alive): c's descriptor stays registered with that runtime's
// poller, whose Ms all sleep on their notes.
struct idle_owner_pair {
  goro::runtime owner{goro::options{2}};
  net::listener ln;
  net::conn c, peer;
  idle_owner_pair() {
    owner.run([this] {
      ln = net::listen_tcp("127.0.0.1:0");
      c = net::dial_tcp(loopback(ln));
      peer = ln.accept();
      peer.write("a");
      std::string buf(1, '\0');
      c.read(wbytes(buf));  // waits on c: registers it with owner's poller
    });
    // Let the owner settle: for a while after run() returns one of its Ms
    // may still poll (the bug below then showed 2 runs in 5, not 5 in 5).
    std::this_thread::sleep_for(300ms);
  }
};
}  // namespace

TEST_CASE("net_ext: a goroutine waits on a socket registered with an idle runtime's poller", "[net]") {
  // No M of the owner watched its poller (none of its goroutines waited on
  // I/O): b's reader was never woken by the data, only by the watchdog's
  // close (errc::closed, 5 s).
  idle_owner_pair p;
  std::thread writer([&p] {
    std::this_thread::sleep_for(200ms);
    p.peer.write("b");
  });
  goro::runtime b{goro::options{2}};
  b.run([&p] {
    goro::go([c = p.c]() mutable {
      goro::sleep_for(5s);
      c.close();
    });
    std::string buf(1, '\0');
    std::error_code ec;
    CHECK(p.c.read(wbytes(buf), ec) == 1);
    CHECK_FALSE(ec);
    p.c.close();
  });
  writer.join();
}

TEST_CASE("net_ext: a goroutine waiting on another runtime's socket is not a deadlock", "[net]") {
  // b's only goroutine waits on a descriptor registered with p.owner's
  // poller: it was counted there, not in b, whose deadlock check then
  // threw (grace period 250 ms) before the data came.
  idle_owner_pair p;
  std::thread writer([&p] {
    std::this_thread::sleep_for(600ms);
    p.peer.write("b");
  });
  goro::runtime b{goro::options{2}};
  std::size_t n = 0;
  std::error_code ec;
  CHECK_NOTHROW(b.run([&] {
    std::string buf(1, '\0');
    n = p.c.read(wbytes(buf), ec);
  }));
  writer.join();
  CHECK(n == 1);
  CHECK_FALSE(ec);
}

#if !defined(_WIN32)
TEST_CASE("net_ext: wait_readable on a negative fd is EBADF from a plain thread too", "[net]") {
  // poll(2) ignores a negative fd: a plain thread's wait saw no event and
  // waited out its deadline (timed_out; with none it hung for good),
  // where a goroutine's reports EBADF at once.
  std::error_code ec;
  goro::runtime rt{goro::options{2}};
  rt.run([&] { CHECK_FALSE(net::wait_readable(-1, steady::now() + 200ms, ec)); });
  CHECK(ec == std::errc::bad_file_descriptor);
  ec.clear();
  CHECK_FALSE(net::wait_readable(-1, steady::now() + 200ms, ec));
  CHECK(ec == std::errc::bad_file_descriptor);
  ec.clear();
  CHECK_FALSE(net::wait_writable(-1, steady::now() + 200ms, ec));
  CHECK(ec == std::errc::bad_file_descriptor);
  auto [ctx, cancel] = goro::with_timeout(goro::background(), 200ms);
  ec.clear();
  CHECK_FALSE(net::wait_readable(-1, ctx, ec));
  CHECK(ec == std::errc::bad_file_descriptor);
  cancel();
}
#endif

TEST_CASE("net_ext: destroying the runtime whose poller a socket is registered with wakes another's waiter", "[net]") {
  // b's reader waits on c, registered with the owner's poller; the owner
  // is destroyed meanwhile. Its poller's end left the descriptor
  // registered nowhere, and the reader never saw the data that came
  // after: only the watchdog's close (errc::closed, 5 s) ended its read.
  auto p = std::make_unique<idle_owner_pair>();
  net::conn c = p->c, peer = p->peer;
  std::size_t n = 0;
  std::error_code ec;
  std::thread tb([&] {
    goro::runtime b{goro::options{2}};
    b.run([&] {
      goro::go([c]() mutable {
        goro::sleep_for(5s);
        c.close();
      });
      std::string buf(1, '\0');
      n = c.read(wbytes(buf), ec);
      c.close();
    });
  });
  const auto io_waiters = [] {
    int k = 0;
    for (const auto& gi : goro::goroutines()) k += gi.wait_reason == "IO wait";
    return k;
  };
  CHECK(goro_test::eventually_sleeping([&] { return io_waiters() == 1; }));
  p.reset();  // the owner runtime (and its poller) goes; c and peer stay
  peer.write("b");
  tb.join();
  CHECK(n == 1);
  CHECK_FALSE(ec);
}

TEST_CASE("net_ext: a thread_lane goroutine of an idle runtime is woken by the network", "[net]") {
  // No run() active: the lane's goroutine parked on c, but no M of the
  // runtime went to the poll for it (one goes when it runs out of work
  // while someone waits, and none ran since), so the data never woke it.
  idle_owner_pair p;
  goro::thread_lane lane;
  std::atomic<bool> done{false};
  std::size_t n = 0;
  std::error_code ec;
  lane.go(p.owner, [&] {
    std::string buf(1, '\0');
    n = p.c.read(wbytes(buf), ec);
    done = true;
  });
  std::thread writer([&p] {
    std::this_thread::sleep_for(50ms);
    p.peer.write("b");
  });
  const auto pump_until = [&](std::chrono::milliseconds limit) {
    const auto t0 = steady::now();
    while (!done.load() && steady::now() - t0 < limit) {
      lane.run_for(1ms);
      std::this_thread::sleep_for(1ms);
    }
  };
  pump_until(5s);
  const bool woken = done.load();
  writer.join();
  if (!woken) {
    p.c.close();  // end the lane goroutine before the lane goes
    pump_until(5s);
  }
  CHECK(woken);
  CHECK(n == 1);
  CHECK_FALSE(ec);
}
