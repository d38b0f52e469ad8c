// expect-abort: goro: non-positive interval for ticker
// Without exceptions, sleep / after / timer / ticker work, and a ticker with
// a non-positive interval prints the usage error and aborts.
#include <goro/goro.hpp>

#include <chrono>
#include <cstdio>

using namespace std::chrono_literals;

int main() {
  bool ok = goro::run([] {
    auto t0 = std::chrono::steady_clock::now();
    goro::sleep_for(5ms);
    bool slept = std::chrono::steady_clock::now() - t0 >= 5ms;
    bool fired = goro::after(1ms).recv().has_value();
    goro::timer t(1h);
    bool stopped = t.stop();
    goro::ticker tk(1ms);
    bool ticked = tk.c().recv().has_value();
    tk.stop();
    return slept && fired && stopped && ticked;
  });
  std::printf("time works without exceptions: %s\n", ok ? "yes" : "no");
  std::fflush(stdout);
  if (!ok) return 0;      // exit 0 fails the expect-abort check
  goro::ticker bad(0ms);  // must abort, never return
  return 0;
}
