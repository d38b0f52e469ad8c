// expect-abort: goro: yield\(\) called outside a goroutine
// Without exceptions, a usage error prints its message and aborts.
#include <goro/goro.hpp>

int main() {
  goro::yield();  // not inside a goroutine: must abort, never return
  return 0;
}
