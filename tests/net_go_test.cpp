// net_go: goro::net where it follows Go's net package in the details a
// Go programmer relies on: listener deadlines (TCPListener.SetDeadline),
// service names as ports ("localhost:http", LookupPort), an unconnected
// UDP socket's remote address (nil in Go: an empty address), addresses
// still known after close (Go's netFD caches them), and a zero-length
// write that still makes the system call (so a broken connection says so).
// Loopback only.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#if !defined(_WIN32)
#include <unistd.h>
#endif

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

namespace {

std::string loopback(const net::listener& ln) { return "127.0.0.1:" + std::to_string(ln.port()); }

#if !defined(_WIN32)
std::string sock_path(const char* tag) {
  return "/tmp/goro-net-go-" + std::to_string(::getpid()) + "-" + tag + ".sock";
}
#endif

}  // namespace

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
    auto un = net::listen_unix(sock_path("dl"));
    un.set_deadline(steady::now() + 20ms);
    std::error_code e;
    un.accept(e);
    CHECK(e == std::errc::timed_out);
    un.close();
  });
#endif
}
