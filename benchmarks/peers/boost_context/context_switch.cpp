// context_switch peer: Boost.Context's jump_fcontext (the raw assembly switch
// under Boost.Context/Boost.Fiber). Two contexts ping-pong: each
// jump_fcontext is one switch; n switches = n/2 round trips.
// Metric: ns per switch.
//
// The exception flags (MXCSR bits 0-5) are cleared before the context is
// made and before every timed loop. jump_fcontext restores the whole MXCSR,
// flags included, and make_fcontext copies the creator's: once the harness's
// own floating-point arithmetic between repetitions sets the precision flag
// on the main side only, the two sides' flags differ, and every
// jump_fcontext costs ~60 ns instead of ~4 here (the next stmxcsr after an
// ldmxcsr that changed the flags is slow). Clearing them measures the
// peer's fast case.
//
//   context_switch [--n 10000000] [--reps 5] [--warmup 1]
#include <boost/context/detail/fcontext.hpp>

#include <cfenv>
#include <cstdlib>

#include "../../bench_common.hpp"

namespace ctx = boost::context::detail;

static void bounce(ctx::transfer_t t) {
  for (;;) t = ctx::jump_fcontext(t.fctx, nullptr);
}

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv, 5);
  const std::uint64_t n = bench::arg_u64(argc, argv, "--n", 10'000'000);
  const std::size_t stack_size = 64 * 1024;
  void* stack = std::malloc(stack_size);
  std::feclearexcept(FE_ALL_EXCEPT);
  ctx::fcontext_t other = ctx::make_fcontext(static_cast<char*>(stack) + stack_size, stack_size, bounce);
  ctx::transfer_t t = ctx::jump_fcontext(other, nullptr);  // enter bounce once
  for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
    const std::uint64_t round_trips = n / 2;
    std::feclearexcept(FE_ALL_EXCEPT);
    std::int64_t t0 = bench::now_ns();
    for (std::uint64_t i = 0; i < round_trips; ++i) t = ctx::jump_fcontext(t.fctx, nullptr);
    std::int64_t dt = bench::now_ns() - t0;
    if (rep >= c.warmup)
      bench::result("context_switch", "boost_context", 1, "ns_per_op", double(dt) / double(2 * round_trips),
                    bench::kv("n", double(2 * round_trips)));
  }
  // `bounce` never returns; its stack is abandoned with the process.
  std::free(stack);
  return 0;
}
