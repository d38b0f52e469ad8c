// rw_mutex: Go's RWMutex -- shared readers, exclusive writers, writer
// preference, try variants, std::shared_lock, misuse.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "test_util.hpp"

using namespace std::chrono_literals;
using goro_test::scale;

TEST_CASE("rw_mutex: readers share, writers exclude", "[rw_mutex]") {
  goro::runtime rt{goro::options{4}};
  rt.run([] {
    goro::rw_mutex mu;
    std::atomic<int> readers{0}, writers{0}, max_readers{0};
    std::atomic<bool> bad{false};
    long counter = 0;
    goro::wait_group wg;
    const int rounds = scale(300, 50);
    for (int w = 0; w < 4; ++w) {
      wg.add(1);
      goro::go([&] {
        for (int i = 0; i < rounds; ++i) {
          std::lock_guard<goro::rw_mutex> lk(mu);
          if (writers.fetch_add(1) != 0 || readers.load() != 0) bad = true;
          ++counter;
          if (i % 16 == 0) goro::yield();
          writers.fetch_sub(1);
        }
        wg.done();
      });
    }
    for (int r = 0; r < 8; ++r) {
      wg.add(1);
      goro::go([&] {
        for (int i = 0; i < rounds; ++i) {
          std::shared_lock<goro::rw_mutex> lk(mu);
          int now = readers.fetch_add(1) + 1;
          int m = max_readers.load();
          while (now > m && !max_readers.compare_exchange_weak(m, now)) {
          }
          if (writers.load() != 0) bad = true;
          if (i % 8 == 0) goro::yield();
          readers.fetch_sub(1);
        }
        wg.done();
      });
    }
    wg.wait();
    CHECK(!bad.load());
    CHECK(counter == 4L * rounds);
    CHECK(max_readers.load() >= 1);
  });
}

TEST_CASE("rw_mutex: a waiting writer blocks new readers (writer preference)", "[rw_mutex]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::rw_mutex mu;
    mu.lock_shared();                                                         // reader 1 inside
    std::atomic<bool> writer_in{false}, reader2_in{false}, order_bad{false};  // no CHECK off the main goroutine
    std::atomic<bool> writer_started{false};
    goro::wait_group wg;
    wg.add(2);
    goro::go([&] {
      writer_started = true;
      mu.lock();  // waits for reader 1
      writer_in = true;
      if (reader2_in.load()) order_bad = true;  // the later reader must not overtake us
      mu.unlock();
      wg.done();
    });
    // The writer may run on the other P, late on a loaded machine: wait
    // until it announced itself (a try_lock_shared that fails), then check
    // that new readers stay held back.
    while (!writer_started.load()) goro::yield();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    bool pending = false;
    while (!pending && std::chrono::steady_clock::now() < deadline) {
      if (mu.try_lock_shared()) {
        mu.unlock_shared();
        goro::yield();
      } else {
        pending = true;
      }
    }
    REQUIRE(pending);  // the writer announced itself within 5 s
    for (int i = 0; i < 50; ++i) {
      goro::yield();
      CHECK(!mu.try_lock_shared());  // new readers are held back
    }
    CHECK(!mu.try_lock());
    goro::go([&] {
      mu.lock_shared();  // blocks behind the pending writer
      reader2_in = true;
      if (!writer_in.load()) order_bad = true;
      mu.unlock_shared();
      wg.done();
    });
    for (int i = 0; i < 50; ++i) goro::yield();
    CHECK(!writer_in.load());
    CHECK(!reader2_in.load());
    mu.unlock_shared();  // reader 1 leaves: the writer, then reader 2
    wg.wait();
    CHECK(writer_in.load());
    CHECK(reader2_in.load());
    CHECK(!order_bad.load());
    CHECK(mu.try_lock());
    mu.unlock();
    CHECK(mu.try_lock_shared());
    CHECK(mu.try_lock_shared());
    CHECK(!mu.try_lock());
    mu.unlock_shared();
    mu.unlock_shared();
  });
}

TEST_CASE("rw_mutex: plain threads, and misuse is a usage_error that leaves it intact", "[rw_mutex]") {
  goro::rw_mutex mu;
  CHECK_THROWS_AS(mu.unlock(), goro::usage_error);
  CHECK_THROWS_AS(mu.unlock_shared(), goro::usage_error);
  mu.lock();
  CHECK_THROWS_AS(mu.unlock_shared(), goro::usage_error);
  mu.unlock();
  int value = 0;
  std::thread t([&] {
    std::lock_guard<goro::rw_mutex> lk(mu);
    value = 1;
  });
  t.join();
  std::shared_lock<goro::rw_mutex> lk(mu);
  CHECK(value == 1);
}
