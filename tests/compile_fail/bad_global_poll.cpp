// expect-error: goro policy: global_poll_interval
// The global run queue poll interval must be >= 1: 0 is rejected at compile time.
#include <goro/goro.hpp>

int main() {
  goro::basic_runtime<goro::policy<goro::global_poll<0>>> rt;
  return 0;
}
