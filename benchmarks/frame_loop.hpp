// frame_loop, shared by goro and its peers: F frames (default 1,000); each
// frame starts J jobs (default 256) of a calibrated ~5 us busy spin, each
// writing its result into the frame's slot, and waits until all are back.
// Per repetition: the median and the 99th percentile of the frame times
// (frame start until the last job's result is back), in microseconds, as
// two metrics of one RESULT line: p50_us and p99_us.
//
//   frame_loop [--procs 2] [--frames 1000] [--jobs 256] [--job-iters N | --job-us 5] [--reps 3] [--warmup 1]
//
// --job-iters fixes the job's spin count (run.py passes 4,000: 5 us on the
// CI machine), so every process of a run does the same work; --job-us
// calibrates it per process instead, which a loaded machine skews (a
// calibration that shares its core counts fewer iterations per us).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace frame_loop {

struct config {
  bench::common_args c;
  std::uint64_t frames, jobs, iters;
};

inline config parse(int argc, char** argv) {
  config f{bench::parse_common(argc, argv), bench::arg_u64(argc, argv, "--frames", 1000),
           bench::arg_u64(argc, argv, "--jobs", 256), bench::arg_u64(argc, argv, "--job-iters", 0)};
  if (f.iters == 0) f.iters = bench::calibrate_spin(bench::arg_f64(argc, argv, "--job-us", 5.0));
  return f;
}

// One job: the spin, its result stored where the frame collects it.
inline void job(std::uint64_t iters, std::uint64_t* slot) { *slot = bench::spin(iters); }

// Runs the repetitions; frame(results) must start every job and return
// once all have stored their results.
template <class Frame>
void run(const char* impl, const config& f, Frame&& frame) {
  std::vector<std::uint64_t> results(f.jobs);
  std::vector<double> us(f.frames);
  for (unsigned rep = 0; rep < f.c.warmup + f.c.reps; ++rep) {
    for (std::uint64_t i = 0; i < f.frames; ++i) {
      const std::int64_t t0 = bench::now_ns();
      frame(results.data());
      us[i] = static_cast<double>(bench::now_ns() - t0) / 1000.0;
      for (auto r : results) bench::consume(r);
    }
    if (rep < f.c.warmup) continue;
    std::vector<double> sorted = us;
    std::sort(sorted.begin(), sorted.end());
    const double p50 = sorted[sorted.size() / 2];
    const double p99 = sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)];
    bench::result("frame_loop", impl, f.c.procs, "p50_us", p50,
                  bench::kv("p99_us", p99) + bench::kv("max_us", sorted.back()) + bench::kv("job_iters", double(f.iters)) +
                      bench::kv("frames", double(f.frames)) + bench::kv("jobs", double(f.jobs)));
  }
}

}  // namespace frame_loop
