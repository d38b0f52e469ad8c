// expect-abort: goro: send on closed channel
// Without exceptions, a send on a closed channel prints Go's message and
// aborts. Before that, channels and select work without exceptions.
#include <goro/goro.hpp>

#include <cstdio>

int main() {
  int sum = goro::run([] {
    goro::chan<int> c(4), done;
    goro::go([c, done]() mutable {
      int s = 0;
      for (int v : c) s += v;
      done.send(s);
    });
    for (int i = 1; i <= 10; ++i) c.send(i);
    c.close();
    int got = 0;
    goro::select(goro::on_recv(done, [&](std::optional<int> v) { got = *v; }));
    return got;
  });
  if (sum != 55) {
    std::fprintf(stderr, "noexcept chan: expected 55, got %d\n", sum);
    return 1;
  }
  goro::chan<int> c(1);
  c.close();
  c.send(1);  // aborts
  return 0;
}
