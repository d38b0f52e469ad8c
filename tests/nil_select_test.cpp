// Nil channels (Go's `var c chan T`) and select over a run-time list of
// cases (goro::select_case, Go's reflect.Select).
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "test_util.hpp"

using goro_test::scale;

TEST_CASE("nil chan: non-blocking operations, size, close is a usage_error", "[chan][nil]") {
  goro::chan<int> c = nullptr;
  CHECK(c == nullptr);
  CHECK(!c);
  CHECK(c.size() == 0);
  CHECK(c.capacity() == 0);
  CHECK(!c.try_send(1));
  CHECK(!c.try_recv());
  CHECK_THROWS_MATCHES(c.close(), goro::usage_error,
                       Catch::Matchers::Predicate<goro::usage_error>([](const goro::usage_error& e) {
                         std::string w = e.what();
                         return w.rfind("goro: ", 0) == 0 && w.find("close") != std::string::npos &&
                                w.find("nil channel") != std::string::npos;
                       }));
  goro::chan<int> real(0);  // `chan<int> x(0)` still means capacity 0
  CHECK(real != nullptr);
  CHECK(real.capacity() == 0);
  real = nullptr;  // assigning nullptr makes it nil
  CHECK(real == nullptr);
  goro::recv_chan<int> r;  // a default recv_chan is nil too
  CHECK(r == nullptr);
  CHECK(!r.try_recv());
}

TEST_CASE("nil chan: send and receive block forever (the deadlock detector sees them)", "[chan][nil]") {
  CHECK_THROWS_AS(goro::run([] {
                    goro::chan<int> c = nullptr;
                    (void)c.recv();
                  }),
                  goro::deadlock_error);
  CHECK_THROWS_AS(goro::run([] {
                    goro::chan<int> c = nullptr;
                    c.send(1);
                  }),
                  goro::deadlock_error);
  CHECK_THROWS_AS(goro::run([] {
                    goro::chan<int> c = nullptr;
                    for (int v : c) (void)v;
                  }),
                  goro::deadlock_error);
  // Only nil cases and no default: Go's `select {}`.
  CHECK_THROWS_AS(goro::run([] {
                    goro::chan<int> c = nullptr;
                    goro::select(goro::on_recv(c, [](std::optional<int>) {}), goro::on_send(c, 1, [] {}));
                  }),
                  goro::deadlock_error);
}

TEST_CASE("nil chan: a select case on a nil channel is never chosen", "[select][nil]") {
  goro::run([] {
    goro::chan<int> nil = nullptr;
    goro::chan<int> ready(1);
    int from_nil = 0, from_ready = 0, defaults = 0;
    for (int i = 0; i < 500; ++i) {
      ready.send(i);
      goro::select(goro::on_recv(nil, [&](std::optional<int>) { ++from_nil; }),
                   goro::on_send(nil, 7, [&] { ++from_nil; }),
                   goro::on_recv(ready, [&](std::optional<int> v) { from_ready += v.has_value(); }));
      goro::select(goro::on_recv(nil, [&](std::optional<int>) { ++from_nil; }), goro::on_default([&] { ++defaults; }));
    }
    CHECK(from_nil == 0);
    CHECK(from_ready == 500);
    CHECK(defaults == 500);
  });
}

TEST_CASE("nil chan: switching a case off by assigning nullptr (merge two channels)", "[select][nil]") {
  goro::run([] {
    goro::chan<int> a(4), b(4);
    goro::go([a]() mutable {
      for (int i = 0; i < 10; ++i) a.send(1);
      a.close();
    });
    goro::go([b]() mutable {
      for (int i = 0; i < 10; ++i) b.send(100);
      b.close();
    });
    int sum = 0;
    while (a != nullptr || b != nullptr) {
      goro::select(goro::on_recv(a,
                                 [&](std::optional<int> v) {
                                   if (v)
                                     sum += *v;
                                   else
                                     a = nullptr;
                                 }),
                   goro::on_recv(b, [&](std::optional<int> v) {
                     if (v)
                       sum += *v;
                     else
                       b = nullptr;
                   }));
    }
    CHECK(sum == 1010);
  });
}

TEST_CASE("select_case: fan-in over a vector of channels", "[select][select_case]") {
  goro::runtime rt{goro::options{4}};
  rt.run([] {
    constexpr int nchan = 16, per = scale(200, 50);
    std::vector<goro::chan<int>> chans;
    for (int i = 0; i < nchan; ++i) chans.emplace_back(i % 3);  // unbuffered and buffered
    for (int i = 0; i < nchan; ++i)
      goro::go([c = chans[i], i]() mutable {
        for (int k = 0; k < per; ++k) c.send(i);
        c.close();
      });
    std::vector<goro::select_case> cases;
    std::vector<int> got(nchan, 0);
    int open = nchan;
    bool closed = false;
    for (int i = 0; i < nchan; ++i)
      cases.push_back(goro::recv_case(chans[i], [&, i](std::optional<int> v) {
        if (!v) {
          closed = true;
          return;
        }
        CHECK(*v == i);
        ++got[i];
      }));
    while (open > 0) {
      closed = false;
      std::size_t k = goro::select(cases);
      REQUIRE(k < cases.size());
      if (closed) {
        --open;
        cases[k] = goro::recv_case(goro::chan<int>(nullptr), [](std::optional<int>) {});  // switch it off
      }
    }
    for (int i = 0; i < nchan; ++i) CHECK(got[i] == per);
  });
}

TEST_CASE("select_case: send cases resend copies; move-only values are sent once", "[select][select_case]") {
  goro::run([] {
    goro::chan<std::string> out(10);
    int sent = 0;
    std::vector<goro::select_case> cases;
    cases.push_back(goro::send_case(out, std::string("hello"), [&] { ++sent; }));
    for (int i = 0; i < 5; ++i) CHECK(goro::select(cases) == 0);
    CHECK(sent == 5);
    for (int i = 0; i < 5; ++i) CHECK(*out.recv() == "hello");

    goro::chan<std::unique_ptr<int>> owned(10);
    int fallback = 0;
    std::vector<goro::select_case> once;
    once.push_back(goro::send_case(owned, std::make_unique<int>(42), [] {}));
    once.push_back(goro::default_case([&] { ++fallback; }));
    CHECK(goro::select(once) == 0);
    CHECK(goro::select(once) == 1);  // spent: off, like a nil channel
    CHECK(fallback == 1);
    CHECK(**owned.recv() == 42);
  });
}

TEST_CASE("select_case: default, uniform choice, closed-channel send and misuse", "[select][select_case]") {
  goro::run([] {
    goro::chan<int> a(1000), b(1000);
    for (int i = 0; i < 1000; ++i) a.send(0), b.send(1);
    int counts[2] = {0, 0};
    std::vector<goro::select_case> cases;
    cases.push_back(goro::recv_case(a, [&](std::optional<int> v) { ++counts[*v]; }));
    cases.push_back(goro::recv_case(goro::recv_chan<int>(b), [&](std::optional<int> v) { ++counts[*v]; }));
    for (int i = 0; i < 1000; ++i) goro::select(cases);
    CHECK(counts[0] > 350);  // uniform among ready cases: ~500 each
    CHECK(counts[1] > 350);

    goro::chan<int> empty;
    int defaults = 0;
    std::vector<goro::select_case> d;
    d.push_back(goro::recv_case(empty, [](std::optional<int>) {}));
    d.push_back(goro::default_case([&] { ++defaults; }));
    CHECK(goro::select(d) == 1);
    CHECK(defaults == 1);

    std::vector<goro::select_case> two;
    two.push_back(goro::default_case([] {}));
    two.push_back(goro::default_case([] {}));
    CHECK_THROWS_AS(goro::select(two), goro::usage_error);

    goro::chan<int> closed(1);
    closed.close();
    std::vector<goro::select_case> s;
    s.push_back(goro::send_case(closed, 1, [] {}));
    CHECK_THROWS_AS(goro::select(s), goro::channel_closed);

    // A blocked run-time select is woken by a sender.
    goro::chan<int> later;
    goro::go([later]() mutable { later.send(5); });
    int v = 0;
    std::vector<goro::select_case> w;
    w.push_back(goro::recv_case(later, [&](std::optional<int> x) { v = *x; }));
    CHECK(goro::select(w) == 0);
    CHECK(v == 5);
  });
  // No channel case and no default: blocks forever.
  CHECK_THROWS_AS(goro::run([] {
                    std::vector<goro::select_case> none;
                    goro::select(none);
                  }),
                  goro::deadlock_error);
}
