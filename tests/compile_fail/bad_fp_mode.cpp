// expect-error: goro policy: fp_mode must be a goro::fp_control
// fp_mode is a goro::fp_control, not a flag.
#include <goro/goro.hpp>

struct bad_policy : goro::default_policy {
  static constexpr bool fp_mode = true;
};

int main() {
  goro::basic_runtime<bad_policy> rt;
  return 0;
}
