// Stress workloads for the chaos soak (docs/testing.md): spawn storms,
// channel fan-in/fan-out, select, timers, plain-thread feeders, gomaxprocs
// resizes, a net echo, sync contention, ping-pong. Each checks its result
// exactly; a lost wake-up shows as a stall (the stall monitor of chaos
// builds aborts with the scheduler's state; the round guard below aborts
// any build after 60 s).
//
// In the normal test run each workload runs one round. scripts/soak.sh runs
// this binary (built with -DGORO_CHAOS) with
//   GORO_SOAK_SECONDS=s  keep starting rounds for s seconds per workload
//   GORO_SOAK_ROUNDS=n   at least n rounds per workload (default 1)
//   GORO_CHAOS_SEED=x    the chaos seed; also varies procs and sizes here
#include <goro/goro.hpp>
#include <goro/net.hpp>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;

std::uint64_t env_u64(const char* name, std::uint64_t dflt) {
  const char* e = std::getenv(name);
  return e && *e ? std::strtoull(e, nullptr, 0) : dflt;
}

// Per-process workload randomness: procs and sizes vary with the seed.
struct soak_rng {
  std::uint64_t x;
  explicit soak_rng(std::uint64_t seed) : x(seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull) {}
  std::uint32_t below(std::uint32_t n) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return static_cast<std::uint32_t>((x >> 33) % n);
  }
};

// Aborts the process if one round runs longer than 60 s (a hang that the
// stall monitor cannot see, or a build without it).
struct round_guard {
  std::atomic<bool> done{false};
  std::thread t;
  explicit round_guard(const char* name, int round)
      : t([this, name, round] {
          auto until = std::chrono::steady_clock::now() + 60s;
          while (!done.load()) {
            if (std::chrono::steady_clock::now() > until) {
              std::fprintf(stderr, "soak: %s round %d still running after 60 s\n", name, round);
              std::abort();
            }
            std::this_thread::sleep_for(5ms);
          }
        }) {}
  ~round_guard() {
    done.store(true);
    t.join();
  }
};

// Runs body(rng, round) for GORO_SOAK_ROUNDS rounds, or until
// GORO_SOAK_SECONDS have passed, whichever is later.
template <class F>
void soak(const char* name, F&& body) {
  const std::uint64_t rounds = env_u64("GORO_SOAK_ROUNDS", 1);
  const auto seconds = std::chrono::seconds(env_u64("GORO_SOAK_SECONDS", 0));
  const std::uint64_t seed = env_u64("GORO_CHAOS_SEED", 1);
  soak_rng rng(seed ^ std::hash<std::string>{}(name));
  const auto start = std::chrono::steady_clock::now();
  int round = 0;
  for (; round < static_cast<int>(rounds) || std::chrono::steady_clock::now() - start < seconds; ++round) {
    round_guard guard(name, round);
    body(rng, round);
  }
  if (std::getenv("GORO_SOAK_VERBOSE")) std::fprintf(stderr, "soak: %s: %d rounds\n", name, round);
}

unsigned procs(soak_rng& rng) { return 1 + rng.below(4); }

}  // namespace

TEST_CASE("soak: spawn storm, nested spawns joined by a wait_group", "[soak]") {
  soak("spawn", [](soak_rng& rng, int) {
    const int fan = goro_test::scale(40, 10) + static_cast<int>(rng.below(20));
    std::atomic<long> sum{0};
    goro::runtime rt{goro::options{procs(rng)}};
    rt.run([&] {
      goro::wait_group wg;
      wg.add(fan);
      for (int i = 0; i < fan; ++i)
        goro::go([&, i] {
          goro::wait_group inner;
          inner.add(fan);
          for (int k = 0; k < fan; ++k)
            goro::go([&, i, k] {
              sum.fetch_add(i * fan + k, std::memory_order_relaxed);
              inner.done();
            });
          inner.wait();
          wg.done();
        });
      wg.wait();
    });
    const long n = static_cast<long>(fan) * fan;
    REQUIRE(sum.load() == n * (n - 1) / 2);
  });
}

TEST_CASE("soak: channel fan-out to workers and fan-in of results", "[soak]") {
  soak("fan", [](soak_rng& rng, int) {
    const int items = goro_test::scale(4000, 500), workers = 2 + static_cast<int>(rng.below(8));
    const std::size_t cap = rng.below(3) == 0 ? 0 : rng.below(16);
    long long sum = 0;
    goro::runtime rt{goro::options{procs(rng)}};
    rt.run([&] {
      goro::chan<int> jobs(cap), results(cap);
      goro::go([=]() mutable {
        for (int i = 0; i < items; ++i) jobs.send(i);
        jobs.close();
      });
      goro::wait_group wg;
      wg.add(workers);
      for (int w = 0; w < workers; ++w)
        goro::go([=, &wg]() mutable {
          for (int v : jobs) results.send(v * 2);
          wg.done();
        });
      goro::go([=, &wg]() mutable {
        wg.wait();
        results.close();
      });
      for (int v : results) sum += v;
    });
    REQUIRE(sum == static_cast<long long>(items) * (items - 1));
  });
}

TEST_CASE("soak: select over several channels with timeouts and defaults", "[soak]") {
  soak("select", [](soak_rng& rng, int) {
    const int n = goro_test::scale(3000, 400);
    std::atomic<long> got{0}, sent{0};
    goro::runtime rt{goro::options{procs(rng)}};
    rt.run([&] {
      goro::chan<int> a, b(4), quit;
      goro::wait_group wg;
      wg.add(2);
      for (int s = 0; s < 2; ++s)
        goro::go([&, s]() mutable {
          for (int i = 0; i < n; ++i) {
            bool done = false;
            while (!done) {
              goro::select(goro::on_send(s ? a : b, i, [&] { done = true; }),
                           goro::on_recv(quit, [](std::optional<int>) {}), goro::on_default([] { goro::yield(); }));
            }
            sent.fetch_add(i);
          }
          wg.done();
        });
      goro::go([&]() mutable {
        wg.wait();
        quit.close();
      });
      bool open = true;
      while (open) {
        goro::select(goro::on_recv(a, [&](std::optional<int> v) { got.fetch_add(*v); }),
                     goro::on_recv(b, [&](std::optional<int> v) { got.fetch_add(*v); }),
                     goro::on_recv(quit, [&](std::optional<int>) { open = false; }),
                     goro::on_recv(goro::after(50ms), [](auto) {}));
      }
      // Values still buffered in b after quit closed.
      while (auto v = b.try_recv()) got.fetch_add(*v);
    });
    REQUIRE(got.load() == sent.load());
    REQUIRE(sent.load() == 2L * n * (n - 1) / 2);
  });
}

TEST_CASE("soak: timers, sleeps and tickers on many goroutines", "[soak]") {
  soak("timers", [](soak_rng& rng, int) {
    const int n = goro_test::scale(300, 60);
    std::atomic<int> fired{0}, ticks{0};
    goro::runtime rt{goro::options{procs(rng)}};
    rt.run([&] {
      goro::wait_group wg;
      wg.add(n);
      for (int i = 0; i < n; ++i)
        goro::go([&, i] {
          const auto d = std::chrono::microseconds(50 + (i * 37) % 3000);
          switch (i % 3) {
            case 0:
              goro::sleep_for(d);
              break;
            case 1:
              (void)goro::after(d).recv();
              break;
            default: {
              goro::timer t(d);
              if (i % 2 && t.stop()) t.reset(d);
              (void)t.c().recv();
            }
          }
          fired.fetch_add(1);
          wg.done();
        });
      goro::ticker tk(1ms);
      for (int k = 0; k < 5; ++k) {
        (void)tk.c().recv();
        ticks.fetch_add(1);
      }
      tk.stop();
      wg.wait();
    });
    REQUIRE(fired.load() == n);
    REQUIRE(ticks.load() == 5);
  });
}

TEST_CASE("soak: plain threads feed goroutines through channels and go()", "[soak]") {
  soak("feeders", [](soak_rng& rng, int) {
    const int per = goro_test::scale(1500, 200), threads = 1 + static_cast<int>(rng.below(3));
    const std::size_t cap = rng.below(2) ? 0 : 8;
    std::atomic<long> spawned{0};
    long sum = 0;
    goro::runtime rt{goro::options{.maxprocs = procs(rng), .detect_deadlock = false}};  // fed from outside
    goro::chan<int> c(cap);
    goro::wait_group wg;
    wg.add(threads * per / 4);
    std::vector<std::thread> feeders;
    for (int t = 0; t < threads; ++t)
      feeders.emplace_back([&, c, t]() mutable {
        std::uint32_t x = 0x9e3779b9u * static_cast<std::uint32_t>(t + 1);
        for (int i = 0; i < per; ++i) {
          x ^= x << 13, x ^= x >> 17, x ^= x << 5;
          if (x % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(x % 100));
          c.send(i);
          if (i % 4 == 0)
            rt.go([&] {
              spawned.fetch_add(1);
              wg.done();
            });
        }
      });
    rt.run([&] {
      for (int i = 0; i < threads * per; ++i) sum += *c.recv();
      wg.wait();
    });
    for (auto& t : feeders) t.join();
    REQUIRE(sum == static_cast<long>(threads) * per * (per - 1) / 2);
    REQUIRE(spawned.load() == threads * per / 4);
  });
}

TEST_CASE("soak: gomaxprocs resized while goroutines spawn, block and yield", "[soak]") {
  soak("gomaxprocs", [](soak_rng& rng, int) {
    const int n = goro_test::scale(2000, 300);
    std::atomic<long> sum{0};
    goro::runtime rt{goro::options{procs(rng)}};
    rt.run([&] {
      goro::chan<int> c(rng.below(2) ? 0 : 4);
      std::atomic<bool> stop{false};
      goro::wait_group resizer;
      resizer.add(1);
      goro::go([&, seed = rng.below(1000)] {
        soak_rng r(seed);
        while (!stop.load()) {
          goro::gomaxprocs(1 + r.below(5));
          goro::sleep_for(std::chrono::microseconds(200 + r.below(800)));
        }
        resizer.done();
      });
      goro::wait_group wg;
      wg.add(4);
      for (int w = 0; w < 4; ++w)
        goro::go([&, c]() mutable {
          for (auto v : c) {
            sum.fetch_add(v);
            if (v % 16 == 0) goro::yield();
          }
          wg.done();
        });
      for (int i = 0; i < n; ++i) {
        if (i % 64 == 0) goro::go([] { goro::yield(); });
        c.send(i);
      }
      c.close();
      wg.wait();
      stop.store(true);
      resizer.wait();
    });
    REQUIRE(sum.load() == static_cast<long>(n) * (n - 1) / 2);
  });
}

TEST_CASE("soak: net echo, clients and handlers on goroutines", "[soak][net]") {
  soak("net", [](soak_rng& rng, int) {
    const int clients = goro_test::scale(16, 4), messages = goro_test::scale(100, 20);
    std::atomic<int> ok{0};
    goro::runtime rt{goro::options{procs(rng)}};
    rt.run([&] {
      auto ln = goro::net::listen_tcp("127.0.0.1:0");
      goro::go([ln, n = clients]() mutable {
        for (int i = 0; i < n; ++i) {
          auto c = ln.accept();
          goro::go([c]() mutable {
            std::string buf(512, '\0');
            for (;;) {
              std::size_t n = c.read(std::as_writable_bytes(std::span<char>(buf.data(), buf.size())));
              if (n == 0) break;
              c.write(std::string_view(buf.data(), n));
            }
          });
        }
      });
      const std::string target = "127.0.0.1:" + std::to_string(ln.port());
      goro::wait_group wg;
      wg.add(clients);
      for (int i = 0; i < clients; ++i)
        goro::go([&, i] {
          auto c = goro::net::dial_tcp(target);
          bool good = true;
          for (int m = 0; m < messages; ++m) {
            std::string msg = std::to_string(i) + ":" + std::to_string(m) + ";";
            c.write(msg);
            std::string back(msg.size(), '\0');
            std::size_t got = 0;
            while (got < back.size()) {
              std::size_t k = c.read(std::as_writable_bytes(std::span<char>(back.data() + got, back.size() - got)));
              if (k == 0) break;
              got += k;
            }
            if (back != msg) good = false;
          }
          c.close();
          if (good) ok.fetch_add(1);
          wg.done();
        });
      wg.wait();
      ln.close();
    });
    REQUIRE(ok.load() == clients);
  });
}

TEST_CASE("soak: mutex, cond and wait_group contention", "[soak]") {
  soak("sync", [](soak_rng& rng, int) {
    const int workers = 4 + static_cast<int>(rng.below(8)), per = goro_test::scale(500, 100);
    long counter = 0;
    int turn = 0;
    goro::runtime rt{goro::options{procs(rng)}};
    rt.run([&] {
      goro::mutex mu;
      goro::cond cv;
      goro::wait_group wg;
      wg.add(workers);
      for (int w = 0; w < workers; ++w)
        goro::go([&] {
          for (int i = 0; i < per; ++i) {
            std::lock_guard<goro::mutex> lk(mu);
            ++counter;
          }
          wg.done();
        });
      // Two goroutines alternate strictly through a cond.
      goro::wait_group pair;
      pair.add(2);
      for (int me = 0; me < 2; ++me)
        goro::go([&, me] {
          for (int i = 0; i < per / 4; ++i) {
            std::unique_lock<goro::mutex> lk(mu);
            while (turn % 2 != me) cv.wait(lk);
            ++turn;
            cv.notify_all();
          }
          pair.done();
        });
      wg.wait();
      pair.wait();
    });
    REQUIRE(counter == static_cast<long>(workers) * per);
    REQUIRE(turn == 2 * (per / 4));
  });
}

TEST_CASE("soak: ping-pong pairs over unbuffered channels beside a spawner", "[soak]") {
  soak("pingpong", [](soak_rng& rng, int) {
    const int pairs = 1 + static_cast<int>(rng.below(4)), n = goro_test::scale(3000, 300);
    std::atomic<long> total{0};
    goro::runtime rt{goro::options{procs(rng)}};
    rt.run([&] {
      goro::wait_group wg;
      wg.add(pairs + 1);  // + 1: done at once below
      for (int p = 0; p < pairs; ++p) {
        goro::chan<int> ping, pong;
        goro::go([=]() mutable {
          for (int i = 0; i < n; ++i) pong.send(*ping.recv() + 1);
        });
        goro::go([=, &total, &wg]() mutable {
          long s = 0;
          for (int i = 0; i < n; ++i) {
            ping.send(i);
            s += *pong.recv();
          }
          total.fetch_add(s);
          wg.done();
        });
      }
      wg.done();  // (no spawner: see the spawn-then-spin test)
      wg.wait();
    });
    REQUIRE(total.load() == static_cast<long>(pairs) * (static_cast<long>(n) * (n - 1) / 2 + n));
  });
}

// Issue 12 item 2's pattern: a goroutine spawns another and spins (no goro
// call) until it ran. At 2+ procs an idle P must be woken for it; a lost
// wake-up leaves it in the spinner's runnext for good: the spin gives up
// after 5 s and counts it late (the stall monitor of chaos builds aborts
// after 100 ms when no M spins). 5 s, not 500 ms: a spinning M that has
// the job is on its way, but under chaos on a loaded 2-core machine (load
// 6-9) it took 150-500 ms to reach the victim -- the seeds that were late
// had the thief's `runqsteal` point among their hot ones (6 of 7, against
// 1 in 8 by chance), each visit a sched_yield or a sleep -- and the stall
// monitor, with its spinning check off, showed the spinner still holding
// its P and its role, and the goroutine ran in the end (docs/testing.md).
TEST_CASE("soak: spawn then spin until the spawned goroutine ran", "[soak]") {
  soak("spawnspin", [](soak_rng& rng, int) {
    const unsigned np = 2 + rng.below(3);
    const int n = goro_test::scale(400, 50);
    int late = 0;
    goro::runtime rt{goro::options{np}};
    rt.run([&] {
      for (int i = 0; i < n; ++i) {
        std::atomic<bool> ran{false};
        goro::go([&] { ran.store(true, std::memory_order_release); });
        const auto until = std::chrono::steady_clock::now() + 5s;
        while (!ran.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until) {
        }
        if (!ran.load()) ++late;
        while (!ran.load()) goro::yield();
        if (i % 8 == 0) goro::sleep_for(std::chrono::microseconds(rng.below(100)));  // let the other Ms park
      }
    });
    REQUIRE(late == 0);
  });
}
