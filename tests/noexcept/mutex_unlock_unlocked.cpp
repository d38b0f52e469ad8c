// expect-abort: goro: unlock of unlocked mutex
// Without exceptions, unlocking an unlocked goro::mutex prints the usage
// error's message and aborts.
#include <goro/goro.hpp>

int main() {
  goro::mutex m;
  m.lock();
  m.unlock();
  m.unlock();  // must abort, never return
  return 0;
}
