// expect-error: goro policy: time_slice
// A time slice must be positive.
#include <goro/goro.hpp>

int main() {
  goro::basic_runtime<goro::policy<goro::slice_us<0>>> rt;
  return 0;
}
