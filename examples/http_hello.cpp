// http_hello: a minimal HTTP/1.1 "hello" responder on goro::net (keep-alive,
// a hand-written request parser: no library). Answers 20 requests from an
// in-process client over 2 connections, then exits 0. `--serve PORT`
// serves 127.0.0.1:PORT forever (the benchmark, benchmarks/http.sh).
#include <goro/goro.hpp>

#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace {

constexpr std::string_view response =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";

// Serves one connection: answers every complete request (headers up to a
// blank line; bodies are not supported) until the client closes.
void serve_conn(goro::net::conn c) {
  std::string buf;
  char chunk[4096];
  std::string out;
  for (;;) {
    std::size_t n = c.read(std::as_writable_bytes(std::span<char>(chunk)));
    if (n == 0) return;
    buf.append(chunk, n);
    std::size_t start = 0, end;
    while ((end = buf.find("\r\n\r\n", start)) != std::string::npos) {
      out += response;  // pipelined requests get one write
      start = end + 4;
    }
    buf.erase(0, start);
    if (buf.size() > 64 * 1024) return;  // a header that never ends
    if (!out.empty()) {
      c.write(out);
      out.clear();
    }
  }
}

void serve(goro::net::listener ln, int connections) {
  for (int i = 0; connections < 0 || i < connections; ++i) {
    goro::net::conn c = ln.accept();
    goro::go([c] {
#if __cpp_exceptions
      try {
        serve_conn(c);
      } catch (const std::system_error&) {
        // reset by the peer: drop the connection
      }
#else
      serve_conn(c);  // without exceptions an error aborts
#endif
    });
  }
}

int client(const std::string& addr, int requests) {
  goro::net::conn c = goro::net::dial_tcp(addr);
  int good = 0;
  std::string got;
  char chunk[4096];
  for (int i = 0; i < requests; ++i) {
    c.write(std::string_view("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    while (got.size() < response.size()) {
      std::size_t n = c.read(std::as_writable_bytes(std::span<char>(chunk)));
      if (n == 0) return good;
      got.append(chunk, n);
    }
    if (got.compare(0, response.size(), response) == 0) ++good;
    got.erase(0, response.size());
  }
  c.close();
  return good;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--serve") == 0) {
    goro::run([&] { serve(goro::net::listen_tcp(std::string("127.0.0.1:") + argv[2]), -1); });
    return 0;
  }
  int good = goro::run([] {
    goro::net::listener ln = goro::net::listen_tcp("127.0.0.1:0");
    std::string addr = "127.0.0.1:" + std::to_string(ln.port());
    goro::go([ln] { serve(ln, 2); });
    goro::chan<int> done(2);
    for (int k = 0; k < 2; ++k) goro::go([=]() mutable { done.send(client(addr, 10)); });
    return *done.recv() + *done.recv();
  });
  std::printf("http_hello: %d/20 responses\n", good);
  return good == 20 ? 0 : 1;
}
