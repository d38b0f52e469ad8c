// expect-error: member named .close.
// after() returns a receive-only channel: its timer is the only sender, so
// closing it (which would end the timer's send) does not compile.
#include <goro/goro.hpp>

int main() {
  auto c = goro::after(std::chrono::milliseconds(1));
  c.close();
  return 0;
}
