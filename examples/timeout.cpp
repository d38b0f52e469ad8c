// timeout: a request with a deadline (select + after) and a heartbeat
// (ticker). A slow "server" goroutine answers after 50 ms; the client
// gives up after 20 ms the first time, waits 200 ms the second. Meanwhile
// a ticker prints a heartbeat every 10 ms until stopped. Exits 0 when the
// first request timed out and the second got its answer.
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
bool ask_with_timeout(int n, std::chrono::milliseconds limit) {
  bool answered = false;
  goro::select(goro::on_recv(ask(n, 50ms),
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

    std::printf("request 1 (20 ms limit):\n");
    bool first = ask_with_timeout(7, 20ms);
    std::printf("request 2 (200 ms limit):\n");
    bool second = ask_with_timeout(8, 200ms);

    stop_beating.close();
    beats_done.wait();
    heartbeat.stop();
    std::printf("%d heartbeats meanwhile\n", beats);
    return !first && second && beats > 0 ? 0 : 1;
  });
}
