// echo_latency: round-trip latency over loopback TCP through goro::net.
// An echo server (a goroutine per connection: read, write back what was
// read) and --conns client goroutines, each on its own connection, each
// doing --n round trips: write a --size byte message (default 64), read
// until all of it came back. Every round trip is timed on its own.
// Metric: the median round trip in ns over all connections' round trips
// of one repetition; p99_ns and the round trips per second as extras.
//
//   echo_latency [--procs 2] [--conns 1] [--n 20000] [--size 64] [--reps 3] [--warmup 1]
#include <goro/goro.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

void echo(goro::net::conn c) {
  std::byte buf[4096];
  for (;;) {
    std::size_t n = c.read(buf);
    if (n == 0) break;  // the client closed its side
    c.write(std::span<const std::byte>(buf, n));
  }
  c.close();
}

// One client connection's round trips; latencies in ns go to out.
void client(const std::string& addr, std::uint64_t n, std::size_t size, std::int64_t* out) {
  goro::net::conn c = goro::net::dial_tcp(addr);
  std::vector<std::byte> msg(size, std::byte{'x'}), back(size);
  for (std::uint64_t i = 0; i < n; ++i) {
    std::int64_t t0 = bench::now_ns();
    c.write(msg);
    std::size_t got = 0;
    while (got < size) {
      std::size_t k = c.read(std::span<std::byte>(back.data() + got, size - got));
      if (k == 0) std::abort();  // the server went away: never
      got += k;
    }
    out[i] = bench::now_ns() - t0;
  }
  c.close();
}

std::int64_t percentile(std::vector<std::int64_t>& v, double q) {
  auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

int main(int argc, char** argv) {
  auto c = bench::parse_common(argc, argv);
  const std::uint64_t conns = std::max<std::uint64_t>(1, bench::arg_u64(argc, argv, "--conns", 1));
  const std::uint64_t n = bench::arg_u64(argc, argv, "--n", 20'000);
  const std::size_t size = bench::arg_u64(argc, argv, "--size", 64);

  goro::runtime rt{goro::options{.maxprocs = c.procs}};
  rt.run([&] {
    goro::net::listener ln = goro::net::listen_tcp("127.0.0.1:0");
    const std::string addr = "127.0.0.1:" + std::to_string(ln.port());
    std::vector<std::int64_t> lat(conns * n);
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      goro::wait_group wg;
      wg.add(static_cast<int>(conns));
      goro::go([&] {  // accepts this repetition's connections
        for (std::uint64_t i = 0; i < conns; ++i) {
          goro::net::conn s = ln.accept();
          goro::go([s] { echo(s); });
        }
      });
      std::int64_t t0 = bench::now_ns();
      for (std::uint64_t i = 0; i < conns; ++i)
        goro::go([&, i] {
          client(addr, n, size, lat.data() + i * n);
          wg.done();
        });
      wg.wait();
      std::int64_t dt = bench::now_ns() - t0;
      if (rep < c.warmup) continue;
      std::int64_t p99 = percentile(lat, 0.99);
      std::int64_t med = percentile(lat, 0.5);
      bench::result("echo_latency", "goro", c.procs, "median_ns", double(med),
                    bench::kv("p99_ns", double(p99)) + bench::kv("conns", double(conns)) + bench::kv("n", double(n)) +
                        bench::kv("size", double(size)) +
                        bench::kv("round_trips_per_s", double(conns * n) * 1e9 / double(dt)));
    }
    ln.close();
  });
}
