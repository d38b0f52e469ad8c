// Shared helpers for the goro benchmarks and their C++ peers (Boost.Fiber,
// oneTBB, Boost.Context): argument parsing, a monotonic clock, process and
// thread CPU time and resident memory (the one place with per-OS code: the
// goro workloads also build for Windows), the calibrated busy-spin of the
// imbalance workload, and the RESULT line.
//
// Every benchmark program prints one line per measurement:
//
//   RESULT workload=<w> impl=<i> procs=<n> <metric>=<value> [key=value...]
//
// benchmarks/run.py collects these lines; the first metric it knows for the
// workload (ns_per_op, efficiency_pct, cpu_pct) is the one it compares.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#if defined(_WIN32)
// <windows.h> the way goro's Windows layer includes it (Winsock 2 first,
// no min/max macros); only goro's workloads build for Windows.
#include <goro/os/windows/windows_h.hpp>
#include <psapi.h>  // GetProcessMemoryInfo: K32GetProcessMemoryInfo in kernel32
#else
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#endif

namespace bench {

// `--name N` or `--name=N`; the default when absent. Unknown arguments are
// ignored so that the runner can pass the same flags to every program.
// The last occurrence wins (as with Go's flag package), so a runner can
// append overrides.
inline const char* arg_str(int argc, char** argv, std::string_view name) {
  const char* found = nullptr;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == name && i + 1 < argc) found = argv[++i];
    else if (a.size() > name.size() && a.substr(0, name.size()) == name && a[name.size()] == '=')
      found = argv[i] + name.size() + 1;
  }
  return found;
}

inline std::uint64_t arg_u64(int argc, char** argv, std::string_view name, std::uint64_t def) {
  const char* v = arg_str(argc, argv, name);
  return v ? std::strtoull(v, nullptr, 10) : def;
}

inline double arg_f64(int argc, char** argv, std::string_view name, double def) {
  const char* v = arg_str(argc, argv, name);
  return v ? std::strtod(v, nullptr) : def;
}

inline bool arg_flag(int argc, char** argv, std::string_view name) {
  for (int i = 1; i < argc; ++i)
    if (argv[i] == name) return true;
  return false;
}

// Common flags: --procs N (threads / Ps), --reps R (measured repetitions,
// each printed), --warmup W (unreported repetitions before them).
struct common_args {
  unsigned procs;
  unsigned reps;
  unsigned warmup;
};

inline common_args parse_common(int argc, char** argv, unsigned def_reps = 3) {
  common_args c{};
  c.procs = static_cast<unsigned>(arg_u64(argc, argv, "--procs", 2));
  c.reps = static_cast<unsigned>(arg_u64(argc, argv, "--reps", def_reps));
  c.warmup = static_cast<unsigned>(arg_u64(argc, argv, "--warmup", 1));
  if (c.procs == 0) c.procs = 1;
  return c;
}

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

#if defined(_WIN32)
// Kernel + user time of a process or thread (GetProcessTimes and
// GetThreadTimes have one signature); FILETIME counts 100 ns units.
inline std::int64_t windows_cpu_ns(BOOL(WINAPI* times)(HANDLE, FILETIME*, FILETIME*, FILETIME*, FILETIME*),
                                   HANDLE h) {
  FILETIME created, exited, kernel, user;
  if (!times(h, &created, &exited, &kernel, &user)) return 0;
  auto ns = [](const FILETIME& t) { return ((std::int64_t(t.dwHighDateTime) << 32) | t.dwLowDateTime) * 100; };
  return ns(kernel) + ns(user);
}
#endif

// CPU time of the whole process, user + system, all threads.
inline std::int64_t process_cpu_ns() {
#if defined(_WIN32)
  return windows_cpu_ns(&GetProcessTimes, GetCurrentProcess());
#else
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto tv = [](const timeval& t) { return std::int64_t(t.tv_sec) * 1'000'000'000 + t.tv_usec * 1000; };
  return tv(ru.ru_utime) + tv(ru.ru_stime);
#endif
}

// CPU time of the calling thread. Windows charges it by clock tick (up to
// 15.6 ms), so there only sums over many calls on one thread mean much.
inline std::int64_t thread_cpu_ns() {
#if defined(_WIN32)
  return windows_cpu_ns(&GetThreadTimes, GetCurrentThread());
#else
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
#endif
}

// Resident memory of the process: /proc/self/statm on Linux, the working
// set on Windows (0 where neither can be read).
inline std::int64_t resident_bytes() {
#if defined(_WIN32)
  PROCESS_MEMORY_COUNTERS pmc{};
  if (!GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc)) return 0;
  return static_cast<std::int64_t>(pmc.WorkingSetSize);
#else
  long pages = 0, resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<std::int64_t>(resident) * sysconf(_SC_PAGESIZE);
#endif
}

// The RESULT line; `extra` is appended verbatim (" key=value ...").
inline void result(const char* workload, const char* impl, unsigned procs, const char* metric,
                   double value, const std::string& extra = {}) {
  std::printf("RESULT workload=%s impl=%s procs=%u %s=%.3f%s\n", workload, impl, procs, metric,
              value, extra.c_str());
  std::fflush(stdout);
}

inline std::string kv(const char* key, double value) {
  char buf[96];
  if (value == static_cast<double>(static_cast<long long>(value)))
    std::snprintf(buf, sizeof buf, " %s=%lld", key, static_cast<long long>(value));
  else
    std::snprintf(buf, sizeof buf, " %s=%.3f", key, value);
  return buf;
}

// ---------------------------------------------------------------------------
// Busy spin for the imbalance workload: a dependent multiply-add chain the
// compiler cannot drop or vectorise (the asm barrier makes each step's
// result observable). Same recurrence as the Go peer's spin().
inline std::uint64_t spin(std::uint64_t iters) {
  std::uint64_t x = 88172645463325252ull;
  for (std::uint64_t i = 0; i < iters; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    asm volatile("" : "+r"(x));
  }
  return x;
}

// Sink so that spin results are used; safe to call from any thread.
inline void consume(std::uint64_t v) {
  static std::atomic<std::uint64_t> sink{0};
  sink.fetch_add(v, std::memory_order_relaxed);
}

// Iterations that take about `us` microseconds on this thread: doubles
// until a batch takes >= 20 ms, then scales; best of 3 to skip hiccups.
inline std::uint64_t calibrate_spin(double us) {
  double best_ns_per_iter = 1e30;
  for (int round = 0; round < 3; ++round) {
    std::uint64_t n = 1024;
    for (;;) {
      std::int64_t t0 = now_ns();
      consume(spin(n));
      std::int64_t dt = now_ns() - t0;
      if (dt >= 20'000'000) {
        double per = static_cast<double>(dt) / static_cast<double>(n);
        if (per < best_ns_per_iter) best_ns_per_iter = per;
        break;
      }
      n *= 2;
    }
  }
  auto iters = static_cast<std::uint64_t>(us * 1000.0 / best_ns_per_iter);
  return iters ? iters : 1;
}

// Mean wall time of one spin(iters), measured serially on this thread over
// `count` back-to-back runs: the single-task time of the efficiency formula.
inline double measure_task_ns(std::uint64_t iters, unsigned count) {
  std::int64_t t0 = now_ns();
  for (unsigned i = 0; i < count; ++i) consume(spin(iters));
  return static_cast<double>(now_ns() - t0) / count;
}

// fib(n) spawn tree: the number of tasks spawned when every call with
// n >= 2 spawns one task for fib(n-1) and computes fib(n-2) inline.
inline std::uint64_t fib_spawns(unsigned n) {
  std::uint64_t a = 0, b = 0;  // spawns(k-2), spawns(k-1)
  if (n < 2) return 0;
  // spawns(0) = spawns(1) = 0; spawns(k) = 1 + spawns(k-1) + spawns(k-2)
  for (unsigned k = 2; k <= n; ++k) {
    std::uint64_t c = 1 + b + a;
    a = b;
    b = c;
  }
  return b;
}

inline std::uint64_t fib_serial(unsigned n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

}  // namespace bench
