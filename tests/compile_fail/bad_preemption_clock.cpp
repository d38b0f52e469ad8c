// expect-error: goro policy: preemption_clock
// The preemption clock must model goro::clock_like (rep, period, duration,
// time_point, is_steady, static now()).
#include <goro/goro.hpp>

struct not_a_clock {
  static int now() { return 0; }
};

int main() {
  goro::basic_runtime<goro::policy<goro::preempt_clock<not_a_clock>>> rt;
  return 0;
}
