// select: Go's select semantics (ported from src/runtime/chan_test.go and
// select tests where they apply): fairness, default, close, duplicated
// channels, self-select, plain threads, misuse.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <array>
#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"

using goro_test::settle;

using goro_test::scale;

TEST_CASE("select: default runs when nothing is ready, and only then", "[select]") {
  goro::chan<int> a, b(1);
  int ran = -1;
  std::size_t i =
      goro::select(goro::on_recv(a, [&](std::optional<int>) { ran = 0; }),
                   goro::on_recv(b, [&](std::optional<int>) { ran = 1; }), goro::on_default([&] { ran = 2; }));
  CHECK(i == 2);
  CHECK(ran == 2);
  // The default's position in the argument list does not matter.
  b.send(5);
  std::optional<int> got;
  i = goro::select(goro::on_default([&] { ran = 0; }), goro::on_recv(a, [&](std::optional<int>) { ran = 1; }),
                   goro::on_recv(b, [&](std::optional<int> v) {
                     ran = 2;
                     got = v;
                   }));
  CHECK(i == 2);
  CHECK(ran == 2);
  CHECK(got == 5);
  // A full buffer: the send case is not ready.
  b.send(6);
  i = goro::select(goro::on_send(b, 7, [] {}), goro::on_default([] {}));
  CHECK(i == 1);
  CHECK(b.recv() == 6);
  i = goro::select(goro::on_send(b, 7, [] {}), goro::on_default([] {}));
  CHECK(i == 0);
  CHECK(b.recv() == 7);
  // Only a default.
  CHECK(goro::select(goro::on_default([] {})) == 0);
}

TEST_CASE("select: a closed channel is ready for receiving (nullopt)", "[select]") {
  goro::chan<int> a, b;
  b.close();
  bool closed_seen = false;
  std::size_t i = goro::select(goro::on_recv(a, [](std::optional<int>) {}),
                               goro::on_recv(b, [&](std::optional<int> v) { closed_seen = !v; }));
  CHECK(i == 1);
  CHECK(closed_seen);
}

TEST_CASE("select: send on a closed channel raises channel_closed", "[select][errors]") {
  goro::chan<int> a(1);
  a.close();
  bool ran = false;
  CHECK_THROWS_WITH(goro::select(goro::on_send(a, 1, [&] { ran = true; })), "goro: send on closed channel");
  CHECK_THROWS_AS(goro::select(goro::on_send(a, 1, [&] { ran = true; }), goro::on_default([] {})),
                  goro::channel_closed);
  CHECK_FALSE(ran);
  // A select blocked in a send wakes with the error when the channel closes.
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> c;
    goro::chan<std::string> result(1);
    goro::go([c, result]() mutable {
      try {
        goro::chan<int> never;
        goro::select(goro::on_send(c, 1, [] {}), goro::on_recv(never, [](std::optional<int>) {}));
        result.send("no error");
      } catch (const goro::channel_closed &e) {
        result.send(e.what());
      }
    });
    settle();
    c.close();
    CHECK(result.recv() == "goro: send on closed channel");
  });
}

TEST_CASE("select: uniform among ready cases", "[select]") {
  // Two channels always ready, two never ready: 10,000 selects should
  // split evenly between the ready ones (binomial: sigma = sqrt(n)/2).
  goro::chan<int> ready1(1), ready2(1), never1, never2(1);
  never2.send(0);  // full: a send there never proceeds
  const int trials = 10000;
  std::array<int, 4> counts{};
  ready1.send(1);
  ready2.send(2);
  for (int t = 0; t < trials; ++t) {
    std::size_t i = goro::select(goro::on_recv(ready1, [&](std::optional<int> v) { ready1.send(*v); }),
                                 goro::on_recv(never1, [](std::optional<int>) {}),
                                 goro::on_recv(ready2, [&](std::optional<int> v) { ready2.send(*v); }),
                                 goro::on_send(never2, 3, [] {}));
    ++counts[i];
  }
  CHECK(counts[1] == 0);
  CHECK(counts[3] == 0);
  const double sigma = std::sqrt(trials) / 2;
  INFO("counts " << counts[0] << " / " << counts[2]);
  CHECK(std::abs(counts[0] - trials / 2) < 10 * sigma);
  CHECK(std::abs(counts[2] - trials / 2) < 10 * sigma);
  CHECK(counts[0] + counts[2] == trials);
}

TEST_CASE("select: pseudo-random choice among ready sends", "[select]") {
  // Go's TestPseudoRandomSend.
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    const int n = 100;
    for (std::size_t cap : {std::size_t{0}, std::size_t{100}}) {
      goro::chan<int> c(cap);
      std::vector<int> l(n);
      goro::wait_group wg;
      wg.add(1);
      goro::go([&] {
        for (int i = 0; i < n; ++i) {
          goro::yield();
          l[static_cast<std::size_t>(i)] = *c.recv();
        }
        wg.done();
      });
      for (int i = 0; i < n; ++i) goro::select(goro::on_send(c, 1, [] {}), goro::on_send(c, 0, [] {}));
      wg.wait();
      int n0 = 0, n1 = 0;
      for (int v : l) {
        n0 += (v + 1) % 2;
        n1 += v;
      }
      INFO("cap " << cap << ": " << n0 << " zeros, " << n1 << " ones");
      CHECK(n0 > n / 10);
      CHECK(n1 > n / 10);
    }
  });
}

TEST_CASE("select: a blocked select is woken by the first ready case", "[select]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> a, b, c(1);
    goro::chan<std::size_t> which(1);
    std::optional<int> got;
    c.send(1);  // c is full: the select's send case blocks
    goro::go([&] {
      which.send(goro::select(goro::on_recv(a, [&](std::optional<int> v) { got = v; }),
                              goro::on_recv(b, [&](std::optional<int> v) { got = v; }), goro::on_send(c, 99, [] {})));
    });
    settle();
    CHECK(which.try_recv() == std::nullopt);
    b.send(42);
    CHECK(which.recv() == 1u);
    CHECK(got == 42);
    CHECK(c.recv() == 1);
    CHECK_FALSE(c.try_recv().has_value());  // the losing send never happened
    // Every waiter was taken off the other channels: they still work.
    goro::go([a]() mutable { a.send(7); });
    CHECK(a.recv() == 7);
    goro::go([c]() mutable { c.send(8); });
    CHECK(c.recv() == 8);
    // Close wakes a blocked select with nullopt.
    goro::go([&] {
      which.send(goro::select(goro::on_recv(a, [&](std::optional<int> v) { got = v; }),
                              goro::on_recv(b, [&](std::optional<int> v) { got = v; })));
    });
    settle();
    a.close();
    CHECK(which.recv() == 0u);
    CHECK_FALSE(got.has_value());
  });
}

TEST_CASE("select: the same channel in several cases", "[select]") {
  // Go's TestSelectDuplicateChannel: A waits on c twice and on d; B waits on
  // c. Waking A through d must leave c's queue intact for B.
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    goro::chan<int> c, d, e;
    goro::go([c, d, e]() mutable {
      goro::select(goro::on_recv(c, [](std::optional<int>) {}), goro::on_recv(c, [](std::optional<int>) {}),
                   goro::on_recv(d, [](std::optional<int>) {}));
      e.send(9);
    });
    settle(5);
    goro::chan<int> b_got(1);
    goro::go([c, b_got]() mutable { b_got.send(*c.recv()); });
    settle(5);
    d.send(7);
    CHECK(e.recv() == 9);
    c.send(8);
    CHECK(b_got.recv() == 8);
  });
  // Both duplicated cases ready: either may run.
  goro::chan<int> c(2);
  c.send(1);
  c.send(2);
  int sum = 0;
  for (int k = 0; k < 2; ++k)
    goro::select(goro::on_recv(c, [&](std::optional<int> v) { sum += *v; }),
                 goro::on_recv(c, [&](std::optional<int> v) { sum += *v; }));
  CHECK(sum == 3);
}

TEST_CASE("select: self-select never matches a send with its own receive", "[select]") {
  // Go's TestSelfSelect.
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    for (std::size_t cap : {std::size_t{0}, std::size_t{10}}) {
      goro::chan<int> c(cap);
      goro::wait_group wg;
      std::atomic<int> self_receives{0};
      wg.add(2);
      const int n = scale(1000, 1000);
      for (int p = 0; p < 2; ++p)
        goro::go([&, p] {
          for (int i = 0; i < n; ++i) {
            auto on_v = [&](std::optional<int> v) {
              if (cap == 0 && v && *v == p) self_receives.fetch_add(1);
            };
            if (p == 0 || i % 2 == 0)
              goro::select(goro::on_send(c, p, [] {}), goro::on_recv(c, on_v));
            else
              goro::select(goro::on_recv(c, on_v), goro::on_send(c, p, [] {}));
          }
          wg.done();
        });
      wg.wait();
      CHECK(self_receives.load() == 0);
    }
  });
}

TEST_CASE("select: a non-blocking select sees a consistent moment", "[select]") {
  // Go's TestNonblockSelectRace and ...Race2: one of c1, c2 is always
  // ready, so the default case must never run.
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    const int n = scale(20000, 2000);
    goro::chan<bool> done(1);
    int defaults = 0;
    for (int variant = 0; variant < 2; ++variant)
      for (int i = 0; i < n; ++i) {
        goro::chan<int> c1(1), c2(variant == 0 ? 1 : 0);
        c1.send(1);
        goro::go([c1, c2, done]() mutable {
          bool ok = true;
          goro::select(goro::on_recv(c1, [](std::optional<int>) {}), goro::on_recv(c2, [](std::optional<int>) {}),
                       goro::on_default([&] { ok = false; }));
          done.send(ok);
        });
        if (variant == 0)
          c2.send(1);
        else
          c2.close();
        goro::select(goro::on_recv(c1, [](std::optional<int>) {}), goro::on_default([] {}));
        if (!*done.recv()) ++defaults;
      }
    CHECK(defaults == 0);
  });
}

TEST_CASE("select: a non-blocking receive racing with close is never 'not ready'", "[select]") {
  // Go's TestNonblockRecvRace.
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    const int n = scale(10000, 2000);
    std::atomic<int> defaults{0};
    for (int i = 0; i < n; ++i) {
      goro::chan<int> c(1);
      c.send(1);
      goro::wait_group wg;
      wg.add(1);
      goro::go([&] {
        goro::select(goro::on_recv(c, [](std::optional<int>) {}), goro::on_default([&] { defaults.fetch_add(1); }));
        wg.done();
      });
      c.close();
      c.recv();
      wg.wait();
    }
    CHECK(defaults.load() == 0);
  });
}

TEST_CASE("select: stress with plain operations and selects on the same channels", "[select]") {
  // After Go's TestSelectStress: senders, receivers, a sending select and a
  // receiving select interleave on two unbuffered and two buffered channels.
  goro::runtime rt{goro::options{4}};
  const int N = scale(20000, 4000);
  auto [sent, received] = rt.run([&] {
    std::array<goro::chan<int>, 4> c{goro::chan<int>(0), goro::chan<int>(0), goro::chan<int>(2), goro::chan<int>(3)};
    std::atomic<long long> received{0};
    goro::wait_group senders, receivers;
    senders.add(5);
    receivers.add(5);
    for (int k = 0; k < 4; ++k) {
      goro::go([&, k] {
        for (int i = 0; i < N; ++i) c[k].send(1);
        senders.done();
      });
      goro::go([&, k] {
        long long n = 0;
        for (int v : c[k]) n += v;
        received.fetch_add(n);
        receivers.done();
      });
    }
    goro::go([&] {
      for (int i = 0; i < 4 * N; ++i)
        goro::select(goro::on_send(c[3], 1, [] {}), goro::on_send(c[2], 1, [] {}), goro::on_send(c[0], 1, [] {}),
                     goro::on_send(c[1], 1, [] {}));
      senders.done();
    });
    goro::go([&] {
      long long n = 0;
      for (bool open = true; open;)
        goro::select(goro::on_recv(c[0], [&](std::optional<int> v) { v ? n += *v : open = false; }),
                     goro::on_recv(c[1], [&](std::optional<int> v) { v ? n += *v : open = false; }),
                     goro::on_recv(c[2], [&](std::optional<int> v) { v ? n += *v : open = false; }),
                     goro::on_recv(c[3], [&](std::optional<int> v) { v ? n += *v : open = false; }));
      received.fetch_add(n);
      receivers.done();
    });
    senders.wait();
    for (auto &ch : c) ch.close();
    receivers.wait();
    return std::pair{8LL * N, received.load()};
  });
  CHECK(sent == received);
}

TEST_CASE("select: from a plain thread, woken by a goroutine", "[select]") {
  goro::runtime rt{goro::options{.maxprocs = 2, .detect_deadlock = false}};  // fed by plain threads
  goro::chan<int> a, b;
  std::optional<int> got;
  std::size_t which = 99;
  std::thread t([&] {
    which = goro::select(goro::on_recv(a, [&](std::optional<int> v) { got = v; }),
                         goro::on_recv(b, [&](std::optional<int> v) { got = v; }));
  });
  rt.run([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    b.send(5);
  });
  t.join();
  CHECK(which == 1);
  CHECK(got == 5);
  // A goroutine blocked in select, woken by a plain thread's send.
  rt.run([&] {
    goro::chan<int> done(1);
    goro::go([&, done]() mutable {
      goro::select(goro::on_recv(a, [&](std::optional<int> v) { got = v; }), goro::on_send(b, 3, [&] { got = -1; }));
      done.send(1);
    });
    std::thread feeder([&] { a.send(11); });
    done.recv();
    feeder.join();
    CHECK(got == 11);
  });
}

TEST_CASE("select: move-only values; a losing send keeps its value out of the channel", "[select]") {
  goro::chan<std::unique_ptr<int>> a(1), b;
  std::unique_ptr<int> got;
  std::size_t i = goro::select(goro::on_send(a, std::make_unique<int>(4), [] {}),
                               goro::on_recv(b, [&](std::optional<std::unique_ptr<int>> v) { got = std::move(*v); }));
  CHECK(i == 0);
  auto v = a.recv();
  REQUIRE(v.has_value());
  CHECK(**v == 4);
  a.send(std::make_unique<int>(5));
  i = goro::select(goro::on_send(b, std::make_unique<int>(6), [] {}),
                   goro::on_recv(a, [&](std::optional<std::unique_ptr<int>> v) { got = std::move(*v); }));
  CHECK(i == 1);
  REQUIRE(got);
  CHECK(*got == 5);
  CHECK_FALSE(b.try_recv().has_value());
}

namespace {
// Counts the live allocations of the channels that use it (each: its ring
// and its shared record).
std::atomic<int> case_chan_live{0};
template <class T>
struct live_alloc {
  using value_type = T;
  live_alloc() noexcept = default;
  template <class U>
  live_alloc(const live_alloc<U> &) noexcept {}
  T *allocate(std::size_t n) {
    case_chan_live.fetch_add(1);
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T *p, std::size_t n) noexcept {
    case_chan_live.fetch_sub(1);
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const live_alloc<U> &) const noexcept {
    return true;
  }
};
}  // namespace

TEST_CASE("select: a select_case keeps its channel alive, made from a handle that is gone", "[select]") {
  // As Go's reflect.SelectCase holds its Chan. A case kept a bare pointer:
  // one made from a temporary handle -- recv_case(goro::after(d), f) kept
  // in a vector, the usual timeout case -- had its channel freed under it
  // (after()'s, once the timer fired), and the select locked freed memory.
  {
    std::vector<goro::select_case> cases;
    cases.push_back(goro::recv_case(goro::chan<int, live_alloc<int>>(1), [](std::optional<int>) {}));
    cases.push_back(goro::send_case(goro::chan<int, live_alloc<int>>(1), 7, [] {}));
    REQUIRE(case_chan_live.load() > 0);  // the channels are still there
    CHECK(goro::select(cases) == 1);     // the send has room, the receive nothing
  }
  CHECK(case_chan_live.load() == 0);  // and go with their cases
  goro::run([] {
    goro::chan<int> in;
    bool timed_out = false;
    std::vector<goro::select_case> cases;
    cases.push_back(goro::recv_case(in, [](std::optional<int>) {}));
    cases.push_back(goro::recv_case(goro::after(std::chrono::milliseconds(5)), [&](auto) { timed_out = true; }));
    CHECK(goro::select(cases) == 1);
    CHECK(timed_out);
  });
}

TEST_CASE("select: an arm kept in a variable keeps a channel it was made from a temporary handle of", "[select]") {
  // auto timeout = goro::on_recv(goro::after(d), f): the arm kept a bare
  // pointer, the temporary handle went at the end of the statement, and
  // after()'s channel was freed once its timer fired -- with the select's
  // waiter still queued on it (ASan: heap-use-after-free in lock_all).
  {
    auto r = goro::on_recv(goro::chan<int, live_alloc<int>>(1), [](std::optional<int>) {});
    auto s = goro::on_send(goro::chan<int, live_alloc<int>>(1), 7, [] {});
    REQUIRE(case_chan_live.load() > 0);  // the channels are still there
    CHECK(goro::select(r, s) == 1);      // the send has room, the receive nothing
  }
  CHECK(case_chan_live.load() == 0);  // and go with their arms
  goro::run([] {
    goro::chan<int> in;
    bool timed_out = false;
    auto timeout = goro::on_recv(goro::after(std::chrono::milliseconds(5)), [&](auto) { timed_out = true; });
    CHECK(goro::select(goro::on_recv(in, [](std::optional<int>) {}), timeout) == 1);
    CHECK(timed_out);
  });
}

TEST_CASE("select: an arm kept in a variable can be selected again and again", "[select]") {
  // As Go re-evaluates a select's cases each time it runs: a receive arm
  // used again gets that select's result (nullopt once its channel is
  // closed, not the value of the select before), and a send arm sends its
  // value again (a copy; a move-only value once, then the arm is off).
  goro::run([] {
    goro::chan<int> c(4);
    c.send(7);
    c.close();
    std::optional<int> got;
    auto arm = goro::on_recv(c, [&](std::optional<int> v) { got = v; });
    CHECK(goro::select(arm) == 0);
    CHECK(got == 7);
    CHECK(goro::select(arm) == 0);
    CHECK(got == std::nullopt);  // closed and drained

    goro::chan<int> u;  // the same through a blocked select
    auto blocked = goro::on_recv(u, [&](std::optional<int> v) { got = v; });
    goro::go([u]() mutable { u.send(5); });
    goro::select(blocked);
    CHECK(got == 5);
    goro::go([u]() mutable {
      goro::sleep_for(std::chrono::milliseconds(2));
      u.close();
    });
    goro::select(blocked);
    CHECK(got == std::nullopt);  // woken by close

    goro::chan<std::string> s(4);
    int sent = 0;
    auto send = goro::on_send(s, std::string("hello"), [&] { ++sent; });
    goro::select(send, goro::on_recv(goro::chan<int>(nullptr), [](std::optional<int>) {}));
    goro::select(send);
    CHECK(sent == 2);
    CHECK(s.recv() == std::string("hello"));
    CHECK(s.recv() == std::string("hello"));  // not a moved-from string

    goro::chan<std::unique_ptr<int>> m(4);
    auto once = goro::on_send(m, std::make_unique<int>(3), [] {});
    CHECK(goro::select(once, goro::on_default([] {})) == 0);
    CHECK(goro::select(once, goro::on_default([] {})) == 1);  // spent: off, as on a nil channel
    CHECK(m.size() == 1);
    CHECK(**m.recv() == 3);
  });
}
