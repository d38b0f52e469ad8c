// echo_server: a TCP echo server on goro::net — a goroutine per
// connection, each blocked in read() parks while its M serves the others.
// Serves 8 in-process clients (each sends 100 lines and checks the echo),
// then exits 0. `--serve PORT` serves 127.0.0.1:PORT forever instead.
#include <goro/goro.hpp>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

void echo(goro::net::conn c) {
  char buf[4096];
  for (;;) {
    std::size_t n = c.read(std::as_writable_bytes(std::span<char>(buf)));
    if (n == 0) return;  // the client closed its side
    c.write(std::string_view(buf, n));
  }
}

void serve(goro::net::listener ln, int connections) {  // connections < 0: forever
  for (int i = 0; connections < 0 || i < connections; ++i) {
    goro::net::conn c = ln.accept();
    goro::go([c] { echo(c); });
  }
}

bool client(const std::string& addr, int id) {
  goro::net::conn c = goro::net::dial_tcp(addr);
  for (int i = 0; i < 100; ++i) {
    std::string line = "client " + std::to_string(id) + " line " + std::to_string(i) + "\n";
    c.write(line);
    std::string back(line.size(), '\0');
    std::size_t got = 0;
    while (got < back.size()) {
      std::size_t n = c.read(std::as_writable_bytes(std::span<char>(back.data() + got, back.size() - got)));
      if (n == 0) return false;
      got += n;
    }
    if (back != line) return false;
  }
  c.close();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--serve") == 0) {
    goro::run([&] { serve(goro::net::listen_tcp(std::string("127.0.0.1:") + argv[2]), -1); });
    return 0;
  }
  constexpr int clients = 8;
  int ok = goro::run([] {
    goro::net::listener ln = goro::net::listen_tcp("127.0.0.1:0");  // port 0: the kernel picks one
    std::string addr = "127.0.0.1:" + std::to_string(ln.port());
    goro::go([ln] { serve(ln, clients); });
    goro::chan<bool> results(clients);
    for (int i = 0; i < clients; ++i) goro::go([=]() mutable { results.send(client(addr, i)); });
    int good = 0;
    for (int i = 0; i < clients; ++i) good += *results.recv() ? 1 : 0;
    return good;
  });
  std::printf("echo_server: %d/%d clients echoed correctly\n", ok, clients);
  return ok == clients ? 0 : 1;
}
