// Link test (ctest link.single_header, link.single_header_lto): the
// single-header amalgamation is included by main.cpp, a.cpp and b.cpp (one
// executable) and by lib.cpp (a shared library). Each TU emits goro's
// context switch; the build must link and every runtime must work.
#include <goro.hpp>

#include <cstdio>

#include "link.hpp"

namespace {
int failures = 0;

void expect(const char* what, int got, int want) {
  if (got != want) {
    std::fprintf(stderr, "link test: %s returned %d, expected %d\n", what, got, want);
    ++failures;
  }
}
}  // namespace

int main() {
  expect("link_a", link_a(), 10 * 11 / 2);
  expect("link_b", link_b(), 20 * 100 + 20 * 21 / 2);
  expect("link_lib", link_lib(), 30 * 1000 + 30 * 31 / 2);
  // And once more from a goroutine of this TU's own runtime.
  int nested = goro::run([] {
    int r = 0;
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      r = 42;
      wg.done();
    });
    wg.wait();
    return r;
  });
  expect("main", nested, 42);
  return failures == 0 ? 0 : 1;
}
