// expect-error: goro policy: stack_size
// A stack smaller than 2 KiB cannot hold the initial frame: rejected at compile time.
#include <goro/goro.hpp>

int main() {
  goro::basic_runtime<goro::policy<goro::stack<1024>>> rt;
  return 0;
}
