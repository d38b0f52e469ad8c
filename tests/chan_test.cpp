// chan: Go's channel semantics (ported from src/runtime/chan_test.go where
// it applies): blocking, FIFO, close, non-blocking operations, plain
// threads, move-only and non-default-constructible values, misuse errors.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"

using goro_test::settle;

using goro_test::scale;

TEST_CASE("chan: blocking, non-blocking, close and FIFO at every capacity", "[chan]") {
  goro::runtime rt{goro::options{4}};
  rt.run([] {
    for (std::size_t cap : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{100}}) {
      INFO("capacity " << cap);
      {
        // Receive from an empty channel blocks; try_recv does not.
        goro::chan<int> c(cap);
        std::atomic<bool> recv1{false}, recv2{false};
        goro::wait_group wg;
        wg.add(2);
        goro::go([&] {
          c.recv();
          recv1 = true;
          wg.done();
        });
        goro::go([&] {
          c.recv();
          recv2 = true;
          wg.done();
        });
        settle();
        CHECK_FALSE(recv1.load());
        CHECK_FALSE(recv2.load());
        CHECK_FALSE(c.try_recv().has_value());
        c.send(0);
        c.send(0);
        wg.wait();
        CHECK((recv1.load() && recv2.load()));
      }
      {
        // Send to a full channel blocks; try_send does not and keeps its value.
        goro::chan<int> c(cap);
        for (std::size_t i = 0; i < cap; ++i) c.send(static_cast<int>(i));
        CHECK(c.size() == cap);
        CHECK(c.capacity() == cap);
        std::atomic<bool> sent{false};
        goro::wait_group wg;
        wg.add(1);
        goro::go([&] {
          c.send(-1);
          sent = true;
          wg.done();
        });
        settle();
        CHECK_FALSE(sent.load());
        int v = 42;
        CHECK_FALSE(c.try_send(v));
        CHECK(v == 42);
        CHECK(c.recv() == (cap ? 0 : -1));
        wg.wait();
        CHECK(sent.load());
      }
      {
        // A closed channel still yields its buffered values, then nullopt.
        goro::chan<int> c(cap);
        for (std::size_t i = 0; i < cap; ++i) c.send(static_cast<int>(i));
        c.close();
        for (std::size_t i = 0; i < cap; ++i) CHECK(c.recv() == static_cast<int>(i));
        CHECK_FALSE(c.recv().has_value());
        CHECK_FALSE(c.recv().has_value());
        CHECK_FALSE(c.try_recv().has_value());
      }
      {
        // Close unblocks a receiver.
        goro::chan<int> c(cap);
        goro::chan<bool> done;
        goro::go([&] { done.send(!c.recv().has_value()); });
        settle();
        c.close();
        CHECK(done.recv() == true);
      }
      {
        // 100 values arrive uncorrupted, in order.
        goro::chan<int> c(cap);
        goro::go([c]() mutable {
          for (int i = 0; i < 100; ++i) c.send(i);
        });
        for (int i = 0; i < 100; ++i) REQUIRE(c.recv() == i);
        // 4 senders x L values, 4 receivers: each value arrives 4 times.
        const int P = 4, L = scale(1000, 400);
        for (int p = 0; p < P; ++p)
          goro::go([c]() mutable {
            for (int i = 0; i < L; ++i) c.send(i);
          });
        goro::chan<std::map<int, int>> results;
        for (int p = 0; p < P; ++p)
          goro::go([c, results]() mutable {
            std::map<int, int> got;
            for (int i = 0; i < L; ++i) ++got[*c.recv()];
            results.send(std::move(got));
          });
        std::map<int, int> total;
        for (int p = 0; p < P; ++p) {
          std::optional<std::map<int, int>> got = results.recv();
          REQUIRE(got.has_value());
          for (auto [k, n] : *got) total[k] += n;
        }
        REQUIRE(total.size() == static_cast<std::size_t>(L));
        for (auto [k, n] : total) REQUIRE(n == P);
      }
    }
  });
}

TEST_CASE("chan: blocked receivers are served in FIFO order", "[chan]") {
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    goro::chan<int> c;
    goro::chan<int> order(10);
    for (int i = 0; i < 5; ++i) {
      goro::go([c, order, i]() mutable {
        c.recv();
        order.send(i);
      });
      settle(5);  // receiver i queues before receiver i+1
    }
    for (int i = 0; i < 5; ++i) {
      c.send(0);
      CHECK(order.recv() == i);
    }
  });
}

TEST_CASE("chan: close wakes every waiter", "[chan]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    for (std::size_t cap : {std::size_t{0}, std::size_t{3}}) {
      goro::chan<int> r(cap), s(cap);
      for (std::size_t i = 0; i < cap; ++i) s.send(1);  // full: senders block
      std::atomic<int> got_nullopt{0}, got_closed{0};
      goro::wait_group wg;
      const int n = 10;
      wg.add(2 * n);
      for (int i = 0; i < n; ++i) {
        goro::go([&] {
          if (!r.recv()) got_nullopt.fetch_add(1);
          wg.done();
        });
        goro::go([&] {
          try {
            s.send(2);
          } catch (const goro::channel_closed& e) {
            if (std::string(e.what()) == "goro: send on closed channel") got_closed.fetch_add(1);
          }
          wg.done();
        });
      }
      settle();
      r.close();
      s.close();
      wg.wait();
      CHECK(got_nullopt.load() == n);
      CHECK(got_closed.load() == n);
      // The buffered values survive the close; the blocked senders' do not.
      for (std::size_t i = 0; i < cap; ++i) CHECK(s.recv() == 1);
      CHECK_FALSE(s.recv().has_value());
    }
  });
}

TEST_CASE("chan: non-blocking operations", "[chan]") {
  // Outside any runtime: try_* never block.
  goro::chan<std::unique_ptr<int>> u;
  auto p = std::make_unique<int>(5);
  CHECK_FALSE(u.try_send(p));
  REQUIRE(p);  // left intact
  CHECK(*p == 5);
  CHECK_FALSE(u.try_recv().has_value());

  goro::chan<std::unique_ptr<int>> b(1);
  CHECK(b.try_send(p));
  CHECK_FALSE(p);  // moved into the channel
  auto q = std::make_unique<int>(6);
  CHECK_FALSE(b.try_send(q));
  CHECK(q);
  auto got = b.try_recv();
  REQUIRE(got.has_value());
  CHECK(**got == 5);
  CHECK_FALSE(b.try_recv().has_value());
  CHECK(b.try_send(std::make_unique<int>(7)));
  b.close();
  CHECK(**b.try_recv() == 7);
  CHECK_FALSE(b.try_recv().has_value());

  // try_send hands straight to a parked receiver; try_recv takes from a parked sender.
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    goro::chan<int> c;
    goro::chan<int> out(1);
    goro::go([c, out]() mutable { out.send(*c.recv()); });
    settle(5);
    int v = 9;
    CHECK(c.try_send(v));
    CHECK(out.recv() == 9);
    goro::go([c]() mutable { c.send(11); });
    settle(5);
    CHECK(c.try_recv() == 11);
  });
}

TEST_CASE("chan: misuse raises channel_closed with Go's messages", "[chan][errors]") {
  goro::chan<int> c(1);
  c.close();
  CHECK_THROWS_AS(c.send(1), goro::channel_closed);
  CHECK_THROWS_WITH(c.send(1), "goro: send on closed channel");
  int v = 1;
  CHECK_THROWS_WITH(c.try_send(v), "goro: send on closed channel");
  CHECK_THROWS_WITH(c.close(), "goro: close of closed channel");
  CHECK_THROWS_AS(c.close(), goro::error);
  goro::chan<int> d;
  d.close();
  goro::run([d]() mutable { CHECK_THROWS_WITH(d.send(1), "goro: send on closed channel"); });
}

TEST_CASE("chan: range-for receives until closed (multi-consumer)", "[chan]") {
  goro::runtime rt{goro::options{4}};
  const int nwork = 23;
  const int niter = scale(271828, 20000);
  const int pn[] = {2, 3, 7, 11, 13, 17, 19, 23, 27, 31};
  long long expect = 0;
  auto [n, s] = rt.run([&] {
    goro::chan<int> q(nwork * 3), r(nwork * 3);
    auto wg = std::make_shared<goro::wait_group>();
    for (int i = 0; i < nwork; ++i) {
      wg->add(1);
      goro::go([=]() mutable {
        for (int v : q) {
          if (pn[i % 10] == v) goro::yield();  // disturb the FIFO-ish order
          r.send(v);
        }
        wg->done();
      });
    }
    goro::go([&, q, r, wg]() mutable {
      for (int i = 0; i < niter; ++i) {
        int v = pn[i % 10];
        expect += v;
        q.send(v);
      }
      q.close();
      wg->wait();
      r.close();
    });
    long long count = 0, sum = 0;
    for (int v : r) {
      ++count;
      sum += v;
    }
    return std::pair{count, sum};
  });
  CHECK(n == niter);
  CHECK(s == expect);
}

TEST_CASE("chan: values are never lost or duplicated when send races with close", "[chan]") {
  goro::runtime rt{goro::options{4}};
  const int rounds = scale(200, 60);
  for (int round = 0; round < rounds; ++round) {
    std::size_t cap = static_cast<std::size_t>(round % 3 == 0 ? 0 : round % 5);
    auto [sent, received, dup] = rt.run([cap, round] {
      goro::chan<int> c(cap);
      std::atomic<long long> sent{0};
      goro::wait_group wg;
      const int senders = 4;
      wg.add(senders + 1);
      std::vector<int> seen(senders * 100000, 0);
      long long received = 0;
      bool dup = false;
      for (int k = 0; k < senders; ++k)
        goro::go([&, k]() mutable {
          for (int i = 0; i < 100000; ++i) {
            try {
              if (i % 3 == 0) {
                int v = k * 100000 + i;
                if (!c.try_send(v)) continue;
              } else {
                c.send(k * 100000 + i);
              }
            } catch (const goro::channel_closed&) {
              break;
            }
            sent.fetch_add(1);
          }
          wg.done();
        });
      goro::go([&] {
        for (int v : c) {
          if (seen[static_cast<std::size_t>(v)]++) dup = true;
          ++received;
          if (received % 64 == 0) goro::yield();
        }
        wg.done();
      });
      for (int i = 0; i < 5 + round % 7; ++i) goro::yield();
      c.close();
      wg.wait();
      return std::tuple{sent.load(), received, dup};
    });
    REQUIRE(sent == received);
    REQUIRE_FALSE(dup);
  }
}

TEST_CASE("chan: a receive racing with close takes the buffered value exactly once", "[chan]") {
  // After Go's TestNonblockRecvRace: the buffered value survives a
  // concurrent close and goes to exactly one of the two receivers.
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    const int n = scale(10000, 2000);
    int failures = 0;
    for (int i = 0; i < n; ++i) {
      goro::chan<int> c(1);
      c.send(1);
      goro::wait_group wg;
      wg.add(1);
      bool theirs = false;
      goro::go([&] {
        theirs = c.try_recv().has_value();
        wg.done();
      });
      if (i % 2) goro::yield();
      c.close();
      bool mine = c.recv().has_value();
      wg.wait();
      if (mine == theirs) ++failures;
    }
    CHECK(failures == 0);
  });
}

TEST_CASE("chan: move-only and non-default-constructible values", "[chan]") {
  struct no_default {
    explicit no_default(int x) : v(x) {}
    no_default(no_default&&) = default;
    no_default& operator=(no_default&&) = delete;
    int v;
  };
  static std::atomic<int> live{0};
  struct counted {
    explicit counted(int x) : v(std::make_unique<int>(x)) { live.fetch_add(1); }
    counted(counted&& o) noexcept : v(std::move(o.v)) { live.fetch_add(1); }
    ~counted() { live.fetch_sub(1); }
    std::unique_ptr<int> v;
  };
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    for (std::size_t cap : {std::size_t{0}, std::size_t{2}}) {
      goro::chan<no_default> c(cap);
      goro::go([c]() mutable {
        for (int i = 0; i < 50; ++i) c.send(no_default(i));
        c.close();
      });
      int expect = 0;
      for (no_default v : c) CHECK(v.v == expect++);
      CHECK(expect == 50);

      goro::chan<std::unique_ptr<std::string>> u(cap);
      goro::go([u]() mutable {
        for (int i = 0; i < 50; ++i) u.send(std::make_unique<std::string>(std::to_string(i)));
        u.close();
      });
      expect = 0;
      for (auto&& p : u) CHECK(*p == std::to_string(expect++));
    }
    {
      // Values left in a buffer are destroyed with the channel.
      goro::chan<counted> c(4);
      c.send(counted(1));
      c.send(counted(2));
      CHECK(live.load() == 2);
      CHECK(*c.recv()->v == 1);
      CHECK(live.load() == 1);
    }
    CHECK(live.load() == 0);
  });
}

TEST_CASE("chan: a plain thread feeds goroutines and reads their results", "[chan]") {
  goro::runtime rt{goro::options{.maxprocs = 2, .detect_deadlock = false}};  // fed by plain threads
  goro::chan<int> in, out(4);
  const int n = scale(20000, 5000);
  std::thread feeder([&] {
    for (int i = 1; i <= n; ++i) in.send(i);  // blocks the thread until a goroutine takes it
    in.close();
  });
  long long total = 0;
  std::thread reader([&] {
    for (int v : out) total += v;  // plain-thread receive
  });
  rt.run([&] {
    goro::wait_group wg;
    for (int w = 0; w < 3; ++w) {
      wg.add(1);
      goro::go([&] {
        for (int v : in) out.send(v);
        wg.done();
      });
    }
    wg.wait();
    out.close();
  });
  feeder.join();
  reader.join();
  CHECK(total == static_cast<long long>(n) * (n + 1) / 2);
}

namespace {

void skynet(goro::chan<long long> c, long long num, long long size, long long div) {
  if (size == 1) {
    c.send(num);
    return;
  }
  goro::chan<long long> rc(static_cast<std::size_t>(div));
  long long sub = size / div;
  for (long long i = 0; i < div; ++i) goro::go(skynet, rc, num + i * sub, sub, div);
  long long sum = 0;
  for (long long i = 0; i < div; ++i) sum += *rc.recv();
  c.send(sum);
}

}  // namespace

TEST_CASE("chan: skynet sums its leaves", "[chan]") {
  const long long leaves = scale(100000, 1000);
  goro::runtime rt{goro::options{2}};
  long long sum = rt.run([leaves] {
    goro::chan<long long> c;
    goro::go(skynet, c, 0, leaves, 10);
    return *c.recv();
  });
  CHECK(sum == leaves * (leaves - 1) / 2);
}

TEST_CASE("chan: a waiter close() popped is not taken off again by the runtime's unlink", "[chan]") {
  // close() links the waiters it popped through `next` until it has woken
  // them. The runtime ending a goroutine (main_return) unlinks a parked one
  // through queued_waiter::unlink, which used waitq::remove(): for such a
  // record it relinked the queue to another popped record and said "taken",
  // so the ending runtime and close() both readied the goroutine (a crash
  // in run_goroutine). Here the records are plain-thread ones: close()'s
  // wake only sets their futex words.
  goro::detail::hchan<int> c(0);
  goro::detail::chan_waiter w1, w2;
  c.lock.lock();
  c.recvq.push_back(&w1);
  c.recvq.push_back(&w2);
  c.lock.unlock();
  c.close();  // pops w1, then w2, linked w2 -> w1 (still so: a real close may not have woken them yet)
  goro::detail::queued_waiter at{&c, &c.recvq, &w2};
  CHECK(!goro::detail::queued_waiter::unlink(&at));  // close() owns its wake-up
  CHECK(c.recvq.empty());                            // and the queue was left alone
  CHECK(w1.woken.load() == 1);
  CHECK(w2.woken.load() == 1);
}
