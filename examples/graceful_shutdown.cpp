// graceful_shutdown: stop a service cleanly on SIGINT or SIGTERM, the way
// Go programs do with signal.Notify and a context. Workers run until the
// context is cancelled; main waits for a signal, cancels, waits for the
// workers, and stops relaying (the signals act as before again).
//
//   goro_example_graceful_shutdown          sends itself SIGTERM after 50 ms
//   goro_example_graceful_shutdown --wait   waits for Ctrl-C (SIGINT)
#include <goro/goro.hpp>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  const bool wait_for_user = argc > 1 && std::strcmp(argv[1], "--wait") == 0;
  std::atomic<int> jobs{0}, stopped{0};
  int got = 0;
  goro::run([&] {
    goro::chan<int> sigs(1);  // room for one pending signal: none is missed while main is busy
    goro::signal::notify(sigs, {SIGINT, SIGTERM});

    auto [ctx, cancel] = goro::with_cancel(goro::background());
    goro::wait_group workers;
    for (int i = 0; i < 4; ++i) {
      workers.add(1);
      goro::go([&, ctx = ctx] {
        goro::ticker tick(5ms);
        for (bool running = true; running;) {
          goro::select(goro::on_recv(tick.c(), [&](auto) { jobs.fetch_add(1); }),
                       goro::on_recv(ctx.done(), [&](auto) { running = false; }));
        }
        stopped.fetch_add(1);
        workers.done();
      });
    }

    if (wait_for_user) {
      std::printf("running; press Ctrl-C to stop\n");
    } else {
      std::thread([] {  // stands in for `kill <pid>` from a service manager
        std::this_thread::sleep_for(50ms);
        ::raise(SIGTERM);  // on this thread; the relay sends it to sigs all the same
      }).detach();
    }
    got = *sigs.recv();
    std::printf("got %s: shutting down\n", got == SIGINT ? "SIGINT" : "SIGTERM");
    cancel();
    workers.wait();
    goro::signal::stop(sigs);
  });
  std::printf("%d jobs done, %d workers stopped\n", jobs.load(), stopped.load());
  return (got == SIGINT || got == SIGTERM) && stopped.load() == 4 ? 0 : 1;
}
