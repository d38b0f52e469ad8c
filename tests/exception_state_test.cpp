// The C++ exception-handling state (std::current_exception, `throw;`,
// std::uncaught_exceptions) is per goroutine: a goroutine never sees the
// state of the thread that runs it, of the goroutine that ran before it, or
// of a record's earlier goroutine, and run() leaves its caller's state as
// it found it.
#include <goro/goro.hpp>

#include <atomic>
#include <catch2/catch.hpp>
#include <exception>
#include <stdexcept>
#include <string>

namespace {

// Goroutines (main among them) that park and yield and check, each time
// they run, that they see no exception of anyone else's.
int clean_goroutines(int n) {
  std::atomic<int> dirty{0};
  auto check = [&] {
    if (std::current_exception() != nullptr) dirty.fetch_add(1);
    if (std::uncaught_exceptions() != 0) dirty.fetch_add(1);
  };
  check();
  goro::wait_group wg;
  wg.add(n);
  for (int i = 0; i < n; ++i)
    goro::go([&] {
      for (int k = 0; k < 20; ++k) {
        check();
        goro::yield();
      }
      check();
      wg.done();
    });
  wg.wait();
  check();
  return dirty.load();
}

}  // namespace

TEST_CASE("exception state: run() called inside a catch block", "[exceptions]") {
  goro::runtime rt{goro::options{2}};
  int dirty = -1;
  bool rethrown = false;
  try {
    throw std::runtime_error("outer");
  } catch (const std::exception&) {
    dirty = rt.run([] { return clean_goroutines(8); });
    // The caller's exception is still being handled, and is its own.
    REQUIRE(std::current_exception() != nullptr);
    try {
      throw;
    } catch (const std::runtime_error& e) {
      rethrown = std::string(e.what()) == "outer";
    }
  }
  CHECK(dirty == 0);
  CHECK(rethrown);
  CHECK(std::current_exception() == nullptr);
  CHECK(std::uncaught_exceptions() == 0);

  // The records those goroutines ran on are reused clean.
  CHECK(rt.run([] { return clean_goroutines(16); }) == 0);
}

namespace {
struct runs_while_unwinding {
  goro::runtime& rt;
  int& dirty;
  int& uncaught_after;
  ~runs_while_unwinding() {
    dirty = rt.run([] { return clean_goroutines(8); });
    uncaught_after = std::uncaught_exceptions();
  }
};
}  // namespace

TEST_CASE("exception state: run() called by a destructor during unwinding", "[exceptions]") {
  goro::runtime rt{goro::options{2}};
  int dirty = -1;
  int uncaught_after = -1;
  try {
    runs_while_unwinding r{rt, dirty, uncaught_after};
    throw 42;
  } catch (int) {
  }
  CHECK(dirty == 0);
  CHECK(uncaught_after == 1);  // the caller still unwinds
  CHECK(std::uncaught_exceptions() == 0);
  CHECK(rt.run([] { return clean_goroutines(16); }) == 0);
}

TEST_CASE("exception state: a goroutine unwinding across a park keeps its own count", "[exceptions]") {
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    std::atomic<int> seen_in_dtor{-1};
    std::atomic<int> others_dirty{0};
    goro::chan<int> c;
    struct parks_in_dtor {
      goro::chan<int>& c;
      std::atomic<int>& seen;
      ~parks_in_dtor() {
        c.recv();  // parks mid-unwind; others run meanwhile
        seen = std::uncaught_exceptions();
      }
    };
    goro::wait_group wg;
    wg.add(2);
    goro::go([&] {
      try {
        parks_in_dtor p{c, seen_in_dtor};
        throw 1;
      } catch (int) {
      }
      wg.done();
    });
    goro::go([&] {
      for (int k = 0; k < 5; ++k) {
        if (std::uncaught_exceptions() != 0 || std::current_exception() != nullptr) others_dirty.fetch_add(1);
        goro::yield();
      }
      c.send(1);
      wg.done();
    });
    wg.wait();
    CHECK(seen_in_dtor.load() == 1);
    CHECK(others_dirty.load() == 0);
    CHECK(std::uncaught_exceptions() == 0);
  });
}
