// goroutine_manager: the seeds' GoroutineManager -- a set of long-running
// workers that all stop when one context is cancelled, and a manager that
// waits for them (context + wait_group). Each worker ticks until
// ctx.done() is closed; main lets them run for a while, cancels, and
// checks that every worker saw the cancellation and returned. Exits 0 then.
#include <goro/goro.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

using namespace std::chrono_literals;

namespace {

class goroutine_manager {
 public:
  explicit goroutine_manager(goro::context parent) {
    auto [ctx, cancel] = goro::with_cancel(std::move(parent));
    ctx_ = std::move(ctx);
    cancel_ = std::move(cancel);
  }

  // Starts f(ctx) in a goroutine the manager waits for.
  void start(std::function<void(goro::context)> f) {
    wg_.add(1);
    goro::go([this, f = std::move(f)] {
      f(ctx_);
      wg_.done();
    });
  }

  // Cancels every worker and waits for them to return.
  void shutdown() {
    cancel_();
    wg_.wait();
  }

 private:
  goro::context ctx_;
  goro::cancel_func cancel_;
  goro::wait_group wg_;
};

}  // namespace

int main() {
  std::atomic<int> ticks{0}, stopped{0};
  goro::run([&] {
    goroutine_manager mgr(goro::background());
    for (int i = 0; i < 4; ++i) {
      mgr.start([&, i](goro::context ctx) {
        goro::ticker tick(5ms);
        for (bool running = true; running;) {
          goro::select(goro::on_recv(tick.c(), [&](auto) { ticks.fetch_add(1); }),
                       goro::on_recv(ctx.done(), [&](auto) { running = false; }));
        }
        std::printf("worker %d: stopped (%s)\n", i, ctx.err() == goro::cancel_reason::canceled ? "canceled" : "?");
        stopped.fetch_add(1);
      });
    }
    goro::sleep_for(50ms);
    mgr.shutdown();
  });
  std::printf("%d ticks, %d workers stopped\n", ticks.load(), stopped.load());
  return stopped.load() == 4 && ticks.load() > 0 ? 0 : 1;
}
