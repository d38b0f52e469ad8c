// timeout: a request with a deadline (select + after) and a heartbeat
// (ticker). The first "server" goroutine answers after 300 ms and the
// client gives up after 20 ms; the second answers after 20 ms and the
// client would wait 5 s (wide margins: the example also runs as a test on
// loaded machines). Meanwhile a ticker counts heartbeats every 10 ms until
// stopped. Exits 0 when the first request timed out and the second got its
// answer.
#include <goro/goro.hpp>

#include <chrono>
#include <cstdio>

using namespace std::chrono_literals;

namespace {

// Starts request n; the reply (n squared) arrives on the returned channel
// after `delay`.
goro::chan<int> ask(int n, std::chrono::milliseconds delay) {
  goro::chan<int> reply(1);  // buffered: the server never blocks on an abandoned reply
  goro::go([=]() mutable {
    goro::sleep_for(delay);
    reply.send(n * n);
  });
  return reply;
}

// Waits for a reply for at most `limit`; returns whether it came in time.
bool ask_with_timeout(int n, std::chrono::milliseconds reply_after, std::chrono::milliseconds limit) {
  bool answered = false;
  goro::select(goro::on_recv(ask(n, reply_after),
                             [&](std::optional<int> r) {
                               std::printf("  got %d\n", *r);
                               answered = true;
                             }),
               goro::on_recv(goro::after(limit), [&](std::optional<std::chrono::steady_clock::time_point>) {
                 std::printf("  timed out after %lld ms\n", static_cast<long long>(limit.count()));
               }));
  return answered;
}

}  // namespace

int main() {
  return goro::run([] {
    goro::ticker heartbeat(10ms);
    goro::chan<bool> stop_beating;
    goro::wait_group beats_done;
    beats_done.add(1);
    int beats = 0;
    goro::go([&] {
      for (bool stop = false; !stop;)
        goro::select(goro::on_recv(heartbeat.c(), [&](auto) { ++beats; }),
                     goro::on_recv(stop_beating, [&](std::optional<bool>) { stop = true; }));
      beats_done.done();
    });

    std::printf("request 1 (reply in 300 ms, 20 ms limit):\n");
    bool first = ask_with_timeout(7, 300ms, 20ms);
    std::printf("request 2 (reply in 20 ms, 5 s limit):\n");
    bool second = ask_with_timeout(8, 20ms, 5000ms);

    stop_beating.close();
    beats_done.wait();
    heartbeat.stop();
    std::printf("%d heartbeats meanwhile\n", beats);
    return !first && second ? 0 : 1;  // the heartbeat count depends on the machine's load
  });
}
