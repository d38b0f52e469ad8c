// expect-abort: goro: all goroutines are asleep - deadlock!
// Without exceptions, run()'s deadlock_error prints its message and aborts.
#include <goro/goro.hpp>

int main() {
  goro::run([] {
    goro::chan<int> never;
    (void)never.recv();  // nobody sends: every goroutine is asleep
  });
  return 0;
}
