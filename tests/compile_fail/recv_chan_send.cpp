// expect-error: member named .send.
// A recv_chan cannot send.
#include <goro/goro.hpp>

int main() {
  goro::chan<int> c(1);
  goro::recv_chan<int> r = c;
  r.send(1);
  return 0;
}
