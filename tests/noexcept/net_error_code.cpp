// Built with -fno-exceptions -fno-rtti (preset noexcept): a server that
// uses goro::net through the std::error_code& overloads only handles a
// refused dial, a passed deadline (an accept's too), a reset peer, a
// closed socket, an unknown host, a Unix socket and UDP without aborting.
// Exit 0 on success.
#include <goro/goro.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <system_error>
#include <vector>

using namespace std::chrono_literals;
namespace net = goro::net;

namespace {

int failures = 0;

void expect(bool ok, const char* what, const std::error_code& ec = {}) {
  if (ok) return;
  std::fprintf(stderr, "noexcept net: %s (ec: %s)\n", what, ec.message().c_str());
  ++failures;
}

std::span<std::byte> wbytes(std::string& s) { return std::as_writable_bytes(std::span<char>(s.data(), s.size())); }

}  // namespace

int main() {
  goro::run([] {
    std::error_code ec;
    std::string buf(64, '\0');

    // A refused dial: a port nobody listens on.
    auto dead = net::listen_tcp("127.0.0.1:0", ec);
    expect(!ec, "listen_tcp", ec);
    std::string dead_addr = "127.0.0.1:" + std::to_string(dead.port(ec));
    dead.close(ec);
    net::dial_tcp(dead_addr, ec);
    expect(ec == std::errc::connection_refused, "refused dial", ec);
    net::dial_tcp(dead_addr, 1s, ec);
    expect(ec == std::errc::connection_refused, "refused dial with a timeout", ec);
    net::dial_tcp("127.0.0.1", ec);
    expect(ec == std::errc::invalid_argument, "malformed address", ec);
    net::lookup_host("no-such-host.invalid", ec);
    expect(static_cast<bool>(ec), "unknown host", ec);
    net::dial_tcp("127.0.0.1:no-such-service", ec);
    expect(ec == goro::net::errc::unknown_port, "unknown service", ec);

    // A connection: echo, a read deadline, close_write, a reset.
    auto ln = net::listen_tcp("localhost:0", ec);
    expect(!ec, "listen_tcp localhost", ec);
    std::string target = "localhost:" + std::to_string(ln.port(ec));
    auto client = net::dial_tcp(target, ec);
    expect(!ec, "dial_tcp localhost", ec);
    auto server = ln.accept(ec);
    expect(!ec, "accept", ec);
    expect(client.local_address(ec) == server.remote_address(ec), "addresses");
    server.set_read_deadline(std::chrono::steady_clock::now() + 10ms, ec);
    server.read(wbytes(buf), ec);
    expect(ec == std::errc::timed_out, "read deadline", ec);
    server.set_read_deadline({}, ec);
    client.write("ping", ec);
    client.close_write(ec);
    std::size_t n = server.read(wbytes(buf), ec);
    expect(!ec && std::string(buf.data(), n) == "ping", "read", ec);
    n = server.read(wbytes(buf), ec);
    expect(!ec && n == 0, "end of stream after close_write", ec);
    linger lg{1, 0};
    ::setsockopt(server.native_handle(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    server.close(ec);
    client.read(wbytes(buf), ec);
    expect(ec == std::errc::connection_reset, "reset peer", ec);
    client.close(ec);
    client.read(wbytes(buf), ec);
    expect(ec == goro::net::errc::closed, "closed conn", ec);
    net::conn empty;
    empty.write("x", ec);
    expect(ec == std::errc::invalid_argument, "empty conn", ec);
    ln.set_deadline(std::chrono::steady_clock::now() + 10ms, ec);
    expect(!ec, "listener set_deadline", ec);
    ln.accept(ec);
    expect(ec == std::errc::timed_out, "accept deadline", ec);
    ln.close(ec);
    ln.accept(ec);
    expect(ec == goro::net::errc::closed, "closed listener", ec);
    ln.set_deadline({}, ec);
    expect(ec == goro::net::errc::closed, "set_deadline on a closed listener", ec);

    // A Unix socket.
    std::string path = "/tmp/goro-noexcept-net-" + std::to_string(::getpid()) + ".sock";
    ::unlink(path.c_str());
    auto uln = net::listen_unix(path, ec);
    expect(!ec, "listen_unix", ec);
    auto uc = net::dial_unix(path, ec);
    expect(!ec, "dial_unix", ec);
    auto us = uln.accept(ec);
    uc.write("unix", ec);
    n = us.read(wbytes(buf), ec);
    expect(!ec && std::string(buf.data(), n) == "unix", "unix round trip", ec);
    uc.close(ec);
    us.close(ec);
    uln.close(ec);
    net::dial_unix(path, ec);
    expect(ec == std::errc::no_such_file_or_directory, "dial_unix after close", ec);

    // UDP.
    auto pc = net::listen_udp("127.0.0.1:0", ec);
    expect(!ec, "listen_udp", ec);
    auto dc = net::dial_udp("127.0.0.1:" + std::to_string(pc.port(ec)), ec);
    expect(!ec, "dial_udp", ec);
    dc.write("datagram", ec);
    auto [m, from] = pc.read_from(wbytes(buf), ec);
    expect(!ec && std::string(buf.data(), m) == "datagram", "read_from", ec);
    expect(from == dc.local_address(ec), "read_from address");
    pc.set_read_deadline(std::chrono::steady_clock::now() + 10ms, ec);
    pc.read_from(wbytes(buf), ec);
    expect(ec == std::errc::timed_out, "udp read deadline", ec);
    pc.close(ec);
    dc.close(ec);
  });
  // No fd left when a runtime creates its poller (epoll, eventfd) at its
  // first wait: reported as EMFILE (it was raised: an abort here).
  {
    std::error_code ec;
    auto ln = net::listen_tcp("127.0.0.1:0", ec);
    auto c = net::dial_tcp("127.0.0.1:" + std::to_string(ln.port(ec)), ec);  // a plain thread: no poller
    expect(!ec, "dial before the runtime", ec);
    goro::runtime rt;
    rt.run([&] {
      auto s = ln.accept(ec);  // queued already: no wait
      rlimit old{};
      ::getrlimit(RLIMIT_NOFILE, &old);
      rlimit low = old;
      if (low.rlim_cur > 512) low.rlim_cur = 512;
      ::setrlimit(RLIMIT_NOFILE, &low);
      std::vector<int> hog;
      for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) hog.push_back(fd);
      std::string b(1, '\0');
      c.set_read_deadline(std::chrono::steady_clock::now() + 10ms, ec);
      c.read(wbytes(b), ec);
      for (int fd : hog) ::close(fd);
      ::setrlimit(RLIMIT_NOFILE, &old);
      expect(ec == std::errc::too_many_files_open, "no fd for the poller", ec);
    });
  }
  if (failures) return 1;
  std::puts("noexcept net: ok");
  return 0;
}
