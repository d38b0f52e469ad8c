// udp_echo: a UDP echo server on goro::net — one goroutine reads
// datagrams with read_from and answers each to its sender with write_to.
// In-process clients (dial_udp: connected sockets) send numbered pings
// and wait for each echo with a read deadline, resending on a timeout
// (UDP may drop datagrams); the error_code overloads report the timeout
// without an exception. Exits 0 when every ping came back.
// `--serve PORT` serves 127.0.0.1:PORT forever instead.
#include <goro/goro.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>

using namespace std::chrono_literals;
namespace net = goro::net;

namespace {

void serve(net::packet_conn pc) {
  char buf[2048];
  for (;;) {
    std::error_code ec;
    auto [n, from] = pc.read_from(std::as_writable_bytes(std::span<char>(buf)), ec);
    if (ec == net::errc::closed) return;  // the socket was closed: stop
    if (ec) continue;                     // e.g. an ICMP error from an earlier reply
    pc.write_to(std::string_view(buf, n), from, ec);
  }
}

// Sends `pings` numbered pings, each until its echo arrives.
bool client(const std::string& addr, int id, int pings) {
  net::packet_conn c = net::dial_udp(addr);
  char buf[2048];
  for (int i = 0; i < pings; ++i) {
    std::string msg = "client " + std::to_string(id) + " ping " + std::to_string(i);
    for (int attempt = 0;; ++attempt) {
      if (attempt == 10) return false;
      c.write(msg);
      c.set_read_deadline(std::chrono::steady_clock::now() + 200ms);
      std::error_code ec;
      std::size_t n = c.read(std::as_writable_bytes(std::span<char>(buf)), ec);
      if (ec == std::errc::timed_out) continue;  // lost: send again
      if (ec) return false;
      if (std::string_view(buf, n) == msg) break;  // (a stale echo of a resend is skipped)
    }
  }
  c.close();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--serve") == 0) {
    goro::run([&] { serve(net::listen_udp(std::string("127.0.0.1:") + argv[2])); });
    return 0;
  }
  constexpr int clients = 8, pings = 100;
  int ok = goro::run([] {
    net::packet_conn server = net::listen_udp("127.0.0.1:0");  // port 0: the kernel picks one
    std::string addr = server.local_address().to_string();
    goro::go([server] { serve(server); });
    goro::chan<bool> results(clients);
    for (int i = 0; i < clients; ++i) goro::go([=]() mutable { results.send(client(addr, i, pings)); });
    int good = 0;
    for (int i = 0; i < clients; ++i) good += *results.recv() ? 1 : 0;
    server.close();  // wakes the server goroutine: it returns
    return good;
  });
  std::printf("udp_echo: %d/%d clients got every echo\n", ok, clients);
  return ok == clients ? 0 : 1;
}
