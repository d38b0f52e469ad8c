// udp_echo: round-trip latency over loopback UDP through goro::net. One
// echo server goroutine on one socket (read_from, write_to back to the
// sender) and --conns client goroutines, each with its own connected
// socket (dial_udp), each doing --n round trips: send a --size byte
// datagram (default 64), wait for its echo. Every round trip is timed on
// its own. A datagram lost (never, on loopback, at this load) is resent
// after a 1 s read deadline and counted. Metric: the median round trip in
// ns over all clients' round trips of one repetition; p99_ns, the round
// trips per second and the resends as extras.
//
//   udp_echo [--procs 2] [--conns 1] [--n 20000] [--size 64] [--reps 3] [--warmup 1]
#include <goro/goro.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <system_error>
#include <vector>

#include "bench_common.hpp"

namespace {

void serve(goro::net::packet_conn pc) {
  std::byte buf[2048];
  for (;;) {
    std::error_code ec;
    auto [n, from] = pc.read_from(buf, ec);
    if (ec == goro::net::errc::closed) return;
    if (ec) continue;
    pc.write_to(std::span<const std::byte>(buf, n), from, ec);
  }
}

// One client's round trips; latencies in ns go to out.
void client(const std::string& addr, std::uint64_t n, std::size_t size, std::int64_t* out,
            std::atomic<std::uint64_t>& resends) {
  goro::net::packet_conn c = goro::net::dial_udp(addr);
  std::vector<std::byte> msg(size, std::byte{'x'}), back(size + 1);
  for (std::uint64_t i = 0; i < n; ++i) {
    std::int64_t t0 = bench::now_ns();
    for (;;) {
      c.write(msg);
      c.set_read_deadline(std::chrono::steady_clock::now() + std::chrono::seconds(1));
      std::error_code ec;
      c.read(back, ec);
      if (!ec) break;
      if (ec != std::errc::timed_out) std::abort();
      resends.fetch_add(1, std::memory_order_relaxed);
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
    goro::net::packet_conn srv = goro::net::listen_udp("127.0.0.1:0");
    const std::string addr = srv.local_address().to_string();
    goro::go([srv] { serve(srv); });
    std::vector<std::int64_t> lat(conns * n);
    for (unsigned rep = 0; rep < c.warmup + c.reps; ++rep) {
      std::atomic<std::uint64_t> resends{0};
      goro::wait_group wg;
      wg.add(static_cast<int>(conns));
      std::int64_t t0 = bench::now_ns();
      for (std::uint64_t i = 0; i < conns; ++i)
        goro::go([&, i] {
          client(addr, n, size, lat.data() + i * n, resends);
          wg.done();
        });
      wg.wait();
      std::int64_t dt = bench::now_ns() - t0;
      if (rep < c.warmup) continue;
      std::int64_t p99 = percentile(lat, 0.99);
      std::int64_t med = percentile(lat, 0.5);
      bench::result("udp_echo", "goro", c.procs, "median_ns", double(med),
                    bench::kv("p99_ns", double(p99)) + bench::kv("conns", double(conns)) + bench::kv("n", double(n)) +
                        bench::kv("size", double(size)) +
                        bench::kv("round_trips_per_s", double(conns * n) * 1e9 / double(dt)) +
                        bench::kv("resends", double(resends.load())));
    }
    srv.close();
  });
}
