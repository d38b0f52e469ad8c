// chat_server: a line-based TCP chat room on goro::net — one goroutine per
// client reads its lines, and one broadcaster goroutine owns the set of
// clients and writes each message to every other client (the shape of
// The Go Programming Language's chat server, §8.10). Everything travels to
// the broadcaster over one channel, so it sees a client's arrival, words
// and departure in order. A client too slow to take a message within its
// write deadline is dropped, so one stuck client cannot stall the room.
//
// The run: three in-process clients (alice, bob, carol) join, each says
// hello, each sees the others' greetings, then each leaves (close_write:
// the server reads end of stream) and the others see it go. Exits 0 when
// every client saw what it should. `--serve PORT` serves 127.0.0.1:PORT
// forever instead (try it with `nc 127.0.0.1 PORT`: the first line is
// your name).
#include <goro/goro.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <vector>

using namespace std::chrono_literals;
namespace net = goro::net;

namespace {

// What reaches the broadcaster: a client joins (with its conn), says a
// line, or leaves.
struct event {
  enum kind_t { join, say, leave } kind;
  std::uint64_t id;
  std::string text;  // join / leave: the name; say: "name: line"
  net::conn c;       // join only
};

// Reads one line (without its '\n'); false at end of stream or on an error.
bool read_line(net::conn& c, std::string& pending, std::string& line) {
  for (;;) {
    if (auto nl = pending.find('\n'); nl != std::string::npos) {
      line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      return true;
    }
    char buf[512];
    std::error_code ec;
    std::size_t n = c.read(std::as_writable_bytes(std::span<char>(buf)), ec);
    if (ec || n == 0) return false;
    pending.append(buf, n);
  }
}

// Owns the clients: fans every line out to everybody but its sender.
void broadcaster(goro::chan<event> events) {
  std::map<std::uint64_t, net::conn> clients;
  auto send_all = [&](std::uint64_t from, const std::string& line) {
    for (auto it = clients.begin(); it != clients.end();) {
      if (it->first == from) {
        ++it;
        continue;
      }
      std::error_code ec;
      it->second.set_write_deadline(std::chrono::steady_clock::now() + 1s, ec);
      it->second.write(line + "\n", ec);
      if (ec) {  // gone or too slow: drop it (its reader sees the close)
        it->second.close(ec);
        it = clients.erase(it);
      } else {
        ++it;
      }
    }
  };
  for (event e : events) {  // until the channel is closed
    switch (e.kind) {
      case event::join:
        clients[e.id] = e.c;
        send_all(e.id, e.text + " has arrived");
        break;
      case event::say:
        send_all(e.id, e.text);
        break;
      case event::leave:
        if (auto it = clients.find(e.id); it != clients.end()) {
          it->second.close();
          clients.erase(it);
        }
        send_all(e.id, e.text + " has left");
        break;
    }
  }
  for (auto& [id, c] : clients) c.close();
}

// One client's goroutine: its first line is its name, then every line is
// said to the room, until it closes its side.
void handle_conn(net::conn c, std::uint64_t id, goro::chan<event> events) {
  std::string pending, name, line;
  if (!read_line(c, pending, name)) {
    c.close();
    return;
  }
  // Join first, then welcome: once a client reads "welcome", its arrival is
  // queued ahead of any later client's (the channel is FIFO), so the
  // broadcaster has it in `clients` before it announces the next one.
  events.send({event::join, id, name, c});
  c.write("welcome, " + name + "\n");
  while (read_line(c, pending, line)) events.send({event::say, id, name + ": " + line, {}});
  events.send({event::leave, id, name, {}});
}

void serve(net::listener ln, goro::chan<event> events) {
  for (std::uint64_t id = 1;; ++id) {
    std::error_code ec;
    net::conn c = ln.accept(ec);
    if (ec) return;  // the listener was closed
    goro::go([c, id, events] { handle_conn(c, id, events); });
  }
}

// A scripted chat client.
struct chat_client {
  net::conn c;
  std::string pending;
  std::string expect_line() {
    std::string line;
    if (!read_line(c, pending, line)) return "<end of stream>";
    return line;
  }
};

chat_client join(const std::string& addr, const std::string& name) {
  chat_client cl{net::dial_tcp(addr), {}};
  cl.c.write(name + "\n");
  cl.expect_line();  // "welcome, <name>": the server has read our name and queued our arrival
  return cl;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--serve") == 0) {
    goro::run([&] {
      goro::chan<event> events(16);
      goro::go([events] { broadcaster(events); });
      serve(net::listen_tcp(std::string("127.0.0.1:") + argv[2]), events);
    });
    return 0;
  }
  int failures = goro::run([] {
    net::listener ln = net::listen_tcp("127.0.0.1:0");
    goro::chan<event> events(16);
    goro::go([events] { broadcaster(events); });
    goro::go([ln, events] { serve(ln, events); });
    std::string addr = ln.local_address().to_string();

    std::atomic<int> bad{0};  // checked from several goroutines
    auto check = [&bad](const std::string& got, const std::string& want) {
      if (got == want) return;
      std::printf("chat_server: got \"%s\", want \"%s\"\n", got.c_str(), want.c_str());
      ++bad;
    };
    // Join one by one; each earlier client sees each arrival.
    std::vector<std::string> names{"alice", "bob", "carol"};
    std::vector<chat_client> cl;
    for (const auto& n : names) {
      cl.push_back(join(addr, n));
      for (std::size_t i = 0; i + 1 < cl.size(); ++i) check(cl[i].expect_line(), n + " has arrived");
    }
    // Everybody speaks at once; everybody hears the other two.
    goro::wait_group wg;
    wg.add(static_cast<int>(cl.size()));
    for (std::size_t i = 0; i < cl.size(); ++i) {
      goro::go([&, i] {
        cl[i].c.write("hello from " + names[i] + "\n");
        std::set<std::string> heard;
        for (std::size_t k = 0; k + 1 < cl.size(); ++k) heard.insert(cl[i].expect_line());
        for (std::size_t j = 0; j < cl.size(); ++j)
          if (j != i && !heard.count(names[j] + ": hello from " + names[j])) {
            std::printf("chat_server: %s did not hear %s\n", names[i].c_str(), names[j].c_str());
            ++bad;
          }
        wg.done();
      });
    }
    wg.wait();
    // Leave one by one: the rest see it; the leaver's connection ends.
    for (std::size_t i = 0; i < cl.size(); ++i) {
      cl[i].c.close_write();
      check(cl[i].expect_line(), "<end of stream>");
      for (std::size_t j = i + 1; j < cl.size(); ++j) check(cl[j].expect_line(), names[i] + " has left");
      cl[i].c.close();
    }
    ln.close();      // serve() returns
    events.close();  // the broadcaster returns
    return bad.load();
  });
  std::printf("chat_server: %s\n", failures == 0 ? "every client heard everything" : "FAILED");
  return failures == 0 ? 0 : 1;
}
