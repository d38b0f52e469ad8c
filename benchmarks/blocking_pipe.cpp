// blocking_pipe: P pairs of goroutines (default 4) ping-pong one byte
// through two pipes with goro::blocking(read/write), so every read blocks
// in the kernel until the partner writes: throughput of the blocking-call
// path (entersyscall / exitsyscall, sysmon's P hand-off, parking and
// waking Ms). Metric: ns per round trip = wall / (pairs * rounds).
//
//   blocking_pipe [--procs 2] [--pairs 4] [--rounds 20000] [--reps 3] [--warmup 1]
#include <goro/goro.hpp>

#if defined(_WIN32)
#include <fcntl.h>
#include <io.h>
#else
#include <unistd.h>
#endif

#include <vector>

#include "bench_common.hpp"

// Windows: the CRT's descriptors over anonymous pipes, whose reads block in
// the kernel as a POSIX pipe's do.
namespace {
#if defined(_WIN32)
int open_pipe(int fds[2]) { return _pipe(fds, 4096, _O_BINARY); }
int fd_read(int fd, char* b) { return _read(fd, b, 1); }
int fd_write(int fd, const char* b) { return _write(fd, b, 1); }
void fd_close(int fd) { _close(fd); }
#else
int open_pipe(int fds[2]) { return pipe(fds); }
ssize_t fd_read(int fd, char* b) { return ::read(fd, b, 1); }
ssize_t fd_write(int fd, const char* b) { return ::write(fd, b, 1); }
void fd_close(int fd) { close(fd); }
#endif
}  // namespace

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::uint64_t pairs = bench::arg_u64(argc, argv, "--pairs", 4);
  const std::uint64_t rounds = bench::arg_u64(argc, argv, "--rounds", 20'000);

  goro::runtime rt{goro::options{.maxprocs = c.procs}};
  rt.run([&] {
    std::vector<int> fds(pairs * 4);
    for (std::uint64_t i = 0; i < pairs; ++i)
      if (open_pipe(&fds[i * 4]) != 0 || open_pipe(&fds[i * 4 + 2]) != 0) std::abort();
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      goro::wait_group wg;
      wg.add(static_cast<int>(2 * pairs));
      std::uint64_t h0 = rt.stats().syscall_handoffs;
      std::int64_t t0 = bench::now_ns();
      for (std::uint64_t i = 0; i < pairs; ++i) {
        int* f = &fds[i * 4];  // f[0], f[1]: ping; f[2], f[3]: pong
        goro::go([&wg, f, rounds] {
          char b = 1;
          for (std::uint64_t k = 0; k < rounds; ++k) {
            if (goro::blocking([&] { return fd_write(f[1], &b); }) != 1) std::abort();
            if (goro::blocking([&] { return fd_read(f[2], &b); }) != 1) std::abort();
          }
          wg.done();
        });
        goro::go([&wg, f, rounds] {
          char b = 0;
          for (std::uint64_t k = 0; k < rounds; ++k) {
            if (goro::blocking([&] { return fd_read(f[0], &b); }) != 1) std::abort();
            if (goro::blocking([&] { return fd_write(f[3], &b); }) != 1) std::abort();
          }
          wg.done();
        });
      }
      wg.wait();
      std::int64_t dt = bench::now_ns() - t0;
      if (rep >= c.warmup)
        bench::result("blocking_pipe", "goro", c.procs, "ns_per_op", double(dt) / double(pairs * rounds),
                      bench::kv("pairs", double(pairs)) + bench::kv("rounds", double(rounds)) +
                          bench::kv("handoffs", double(rt.stats().syscall_handoffs - h0)));
    }
    for (int fd : fds) fd_close(fd);
  });
}
