// chan handles: the receive-only recv_chan, a moved-from chan as a nil
// channel, and element types whose move may throw (never under the lock).
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

using namespace std::chrono_literals;

TEST_CASE("chan handles: recv_chan receives, ranges, selects; made from a chan", "[chan][recv_chan]") {
  using tp = std::chrono::steady_clock::time_point;
  static_assert(std::is_same_v<decltype(goro::after(1ms)), goro::recv_chan<tp>>);
  static_assert(std::is_same_v<decltype(std::declval<goro::timer&>().c()), goro::recv_chan<tp>>);
  static_assert(std::is_same_v<decltype(std::declval<goro::ticker&>().c()), goro::chan<tp>>);
  static_assert(std::is_convertible_v<goro::chan<int>, goro::recv_chan<int>>);
  static_assert(!std::is_convertible_v<goro::recv_chan<int>, goro::chan<int>>);

  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> c(3);
    goro::recv_chan<int> r = c;
    CHECK(r == goro::recv_chan<int>(c));
    CHECK(r.capacity() == 3);
    c.send(1);
    c.send(2);
    CHECK(r.size() == 2);
    CHECK(r.recv() == 1);
    CHECK(r.try_recv() == 2);
    CHECK_FALSE(r.try_recv());

    int got = 0;
    c.send(7);
    goro::select(goro::on_recv(r, [&](std::optional<int> v) { got = v.value_or(-1); }));
    CHECK(got == 7);

    goro::go([c]() mutable {
      for (int i = 10; i < 15; ++i) c.send(i);
      c.close();
    });
    std::vector<int> all;
    for (int v : r) all.push_back(v);
    CHECK(all == std::vector<int>{10, 11, 12, 13, 14});
    CHECK_FALSE(r.recv());

    // after() in a select, as a recv_chan.
    goro::chan<int> never;
    bool timed_out = false;
    goro::select(goro::on_recv(never, [](std::optional<int>) {}),
                 goro::on_recv(goro::after(5ms), [&](std::optional<tp> v) { timed_out = v.has_value(); }));
    CHECK(timed_out);
  });
}

TEST_CASE("chan handles: a moved-from chan is a nil channel", "[chan][nil]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> a(1);
    goro::chan<int> b = std::move(a);
    CHECK(a.capacity() == 0);  // NOLINT(bugprone-use-after-move): that is the point
    CHECK(a.size() == 0);
    CHECK_FALSE(a.try_send(1));
    CHECK_FALSE(a.try_recv());
    CHECK_THROWS_WITH(a.close(), Catch::Matchers::StartsWith("goro: close of nil channel"));
    goro::recv_chan<int> rb = std::move(b);
    CHECK_FALSE(b.try_recv());
    CHECK_FALSE(rb.try_recv());

    // Send and receive block forever (other goroutines run on).
    std::atomic<int> returned{0};
    goro::go([a]() mutable {
      a.recv();
      std::abort();  // never
    });
    goro::go([a]() mutable {
      a.send(1);
      std::abort();  // never
    });
    goro::go([b]() mutable {
      for (int v : b) (void)v;
      std::abort();  // never
    });
    for (int i = 0; i < 20; ++i) {
      goro::sleep_for(1ms);
      goro::yield();
    }
    CHECK(returned.load() == 0);
  });
}

TEST_CASE("chan handles: main blocked on a nil channel is a deadlock", "[chan][nil]") {
  goro::runtime rt{goro::options{2}};
  CHECK_THROWS_AS(rt.run([] {
    goro::chan<int> a;
    { goro::chan<int> b = std::move(a); }
    a.recv();  // NOLINT(bugprone-use-after-move)
  }),
                  goro::deadlock_error);
}

namespace {

// Its move throws while `armed` is set (a std::deque-like type whose move
// allocates, say).
struct fragile {
  static inline std::atomic<int> armed{0};
  int v;
  explicit fragile(int x) : v(x) {}
  fragile(fragile&& o) : v(o.v) {
    if (armed.load()) throw std::runtime_error("fragile move");
  }
  fragile& operator=(fragile&& o) {
    v = o.v;
    return *this;
  }
};
static_assert(!std::is_nothrow_move_constructible_v<fragile>);

struct disarm {
  ~disarm() { fragile::armed = 0; }
};

}  // namespace

TEST_CASE("chan handles: an element whose move throws never breaks the channel", "[chan][throwing-move]") {
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    disarm guard;
    for (std::size_t cap : {std::size_t{0}, std::size_t{2}}) {
      INFO("capacity " << cap);
      goro::chan<fragile> c(cap);
      std::atomic<int> received{-1};
      goro::wait_group wg;

      // Sender side: the send fails, nothing is sent, the lock is free.
      wg.add(1);
      goro::go([&] {
        auto v = c.recv();  // waits for the second send (a direct hand-off when unbuffered)
        received = v ? v->v : -2;
        wg.done();
      });
      goro::yield();  // the receiver is now waiting
      fragile::armed = 1;
      CHECK_THROWS_AS(c.send(fragile(1)), std::runtime_error);
      fragile f(2);
      CHECK_THROWS_AS(c.try_send(f), std::runtime_error);
      fragile::armed = 0;
      CHECK(received.load() == -1);
      c.send(fragile(3));
      wg.wait();
      CHECK(received.load() == 3);

      // Receiver side: the receive fails (that value is lost), the channel
      // works on.
      if (cap > 0) {
        c.send(fragile(4));
        c.send(fragile(5));
        fragile::armed = 1;
        CHECK_THROWS_AS(c.recv(), std::runtime_error);
        fragile::armed = 0;
        CHECK(c.size() == 1);
        auto v = c.recv();
        REQUIRE(v);
        CHECK(v->v == 5);
      }

      // try_send keeps its value when it would block.
      goro::chan<fragile> full(cap);
      if (cap > 0)
        for (std::size_t i = 0; i < cap; ++i) full.send(fragile(0));
      fragile keep(9);
      CHECK_FALSE(full.try_send(keep));
      CHECK(keep.v == 9);

      // select on both sides.
      goro::go([&] { c.send(fragile(6)); });
      int sel = 0;
      goro::select(goro::on_recv(c, [&](std::optional<fragile> x) { sel = x ? x->v : -1; }));
      CHECK(sel == 6);
      goro::go([&] { received = c.recv()->v; });
      goro::select(goro::on_send(c, fragile(8), [] {}));
      goro::sleep_for(1ms);
      CHECK(received.load() == 8);
      c.close();
      CHECK_FALSE(c.recv());
    }
  });
}
