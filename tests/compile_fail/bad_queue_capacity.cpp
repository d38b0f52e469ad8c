// expect-error: goro policy: local_queue_capacity
// A local run queue capacity must be a power of two: 100 is rejected at compile time.
#include <goro/goro.hpp>

int main() {
  goro::basic_runtime<goro::policy<goro::queue_capacity<100>>> rt;
  return 0;
}
