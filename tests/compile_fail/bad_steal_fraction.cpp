// expect-error: goro policy: steal_fraction
// The steal fraction must lie in (0, 1]: 3/2 is rejected at compile time.
#include <goro/goro.hpp>

int main() {
  goro::basic_runtime<goro::policy<goro::steal<3, 2>>> rt;
  return 0;
}
