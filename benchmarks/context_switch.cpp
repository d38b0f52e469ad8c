// context_switch: raw cost of goro's hand-written context switch, without
// the scheduler. The public API cannot reach the switch, so this calls the
// internal goro::detail::context_switch_bench(n): two contexts on private
// stacks switching to each other n times; it returns ns per switch.
// Peer: benchmarks/peers/boost_context/context_switch.cpp (jump_fcontext).
// --fp-shared 1: the switch of policy fp_control::shared, which leaves the
// FP control words alone (workload context_switch_fp_shared).
//
//   context_switch [--n 10000000] [--reps 5] [--warmup 1] [--fp-shared 0|1]
#include "bench_common.hpp"

#if __has_include(<goro/detail/context.hpp>)
#include <goro/detail/context.hpp>
#define GORO_BENCH_HAVE_CONTEXT 1
#endif

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv, 5);
  const std::uint64_t n = bench::arg_u64(argc, argv, "--n", 10'000'000);
  const bool fp_shared = bench::arg_u64(argc, argv, "--fp-shared", 0) != 0;
#ifdef GORO_BENCH_HAVE_CONTEXT
  for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
    double ns = static_cast<double>(goro::detail::context_switch_bench(static_cast<std::size_t>(n), fp_shared));
    if (rep >= c.warmup)
      bench::result(fp_shared ? "context_switch_fp_shared" : "context_switch", "goro", 1, "ns_per_op", ns,
                    bench::kv("n", double(n)));
  }
  return 0;
#else
  (void)c;
  (void)n;
  (void)fp_shared;
  std::fprintf(stderr, "context_switch: <goro/detail/context.hpp> not available; no result\n");
  return 0;
#endif
}
