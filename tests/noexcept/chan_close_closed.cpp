// expect-abort: goro: close of closed channel
// Without exceptions, closing a closed channel prints Go's message and aborts.
#include <goro/goro.hpp>

int main() {
  goro::chan<int> c;
  c.close();
  c.close();  // aborts
  return 0;
}
