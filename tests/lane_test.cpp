// goro::thread_lane (SPEC "Engine embedding", docs/embedding.md):
// goroutines of a runtime that only ever run on the thread that owns the
// lane, pumped with run_for / run_until_idle.
#include <catch2/catch.hpp>

#include <atomic>
#include <cfenv>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <goro/goro.hpp>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"

using namespace std::chrono_literals;

namespace {

// Pumps `lane` on the calling thread until it has no goroutine left (or
// `limit` passed: then the test fails on what it checks next).
void drain(goro::thread_lane& lane, std::chrono::seconds limit = 60s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (lane.goroutines() > 0 && std::chrono::steady_clock::now() < end) {
    if (lane.run_for(1ms) == 0) std::this_thread::sleep_for(50us);
  }
}

// Aborts the test program (a failure, not a hang) unless disarmed in time.
class hang_guard {
 public:
  explicit hang_guard(std::chrono::seconds limit)
      : t_([this, limit] {
          std::unique_lock<std::mutex> lk(m_);
          if (!cv_.wait_for(lk, limit, [this] { return done_; })) {
            std::fprintf(stderr, "hang_guard: still blocked after %lld s\n", static_cast<long long>(limit.count()));
            std::abort();
          }
        }) {}
  ~hang_guard() {
    {
      std::lock_guard<std::mutex> lk(m_);
      done_ = true;
    }
    cv_.notify_one();
    t_.join();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread t_;
};

}  // namespace

TEST_CASE("lane goroutines run only on the lane's thread, across every kind of wait") {
  goro::runtime rt({.maxprocs = 2});
  goro::thread_lane lane;
  const auto owner = std::this_thread::get_id();
  std::atomic<int> off_lane{0}, steps{0};
  auto check = [&] {
    if (std::this_thread::get_id() != owner) off_lane.fetch_add(1);
    steps.fetch_add(1);
  };
  goro::chan<int> to_lane, from_lane(1);
  goro::mutex mu;
  goro::wait_group wg;
  const int rounds = goro_test::scale(200, 50, 50);
  lane.go(rt, [&] {
    for (int i = 0; i < rounds; ++i) {
      const int v = to_lane.recv().value();  // a channel fed by a runtime goroutine
      check();
      goro::sleep_for(20us);  // a timer on the runtime's heaps
      check();
      {
        std::lock_guard<goro::mutex> lk(mu);  // contended by a runtime goroutine
        check();
      }
      goro::select(goro::on_recv(goro::after(50us), [](auto) {}));  // a select with a timer channel
      check();
      goro::yield();
      check();
      goro::blocking([] {});  // a blocking call: made on this thread
      check();
      from_lane.send(v + 1);
      check();
    }
  });
  std::atomic<int> wrong{0};  // checked on this thread: Catch2's assertions are not thread-safe
  wg.add(1);
  rt.go([&] {
    for (int i = 0; i < rounds; ++i) {
      {
        std::lock_guard<goro::mutex> lk(mu);
        goro::yield();
      }
      to_lane.send(i);
      if (from_lane.recv().value() != i + 1) wrong.fetch_add(1);
    }
    wg.done();
  });
  drain(lane);
  CHECK(lane.goroutines() == 0);
  CHECK(off_lane.load() == 0);
  CHECK(steps.load() == 7 * rounds);
  wg.wait();
  CHECK(wrong.load() == 0);
}

TEST_CASE("run_for returns at once with nothing ready, and counts resumptions") {
  goro::runtime rt({.maxprocs = 1});
  goro::thread_lane lane;
  CHECK(lane.run_for(1s) == 0);
  CHECK(lane.run_until_idle() == 0);
  // Two goroutines yielding in turn: FIFO on the lane, a resumption each.
  std::vector<int> order;
  for (int id = 0; id < 2; ++id)
    lane.go(rt, [&order, id] {
      for (int i = 0; i < 3; ++i) {
        order.push_back(id);
        goro::yield();
      }
    });
  CHECK(rt.num_goroutine() == 2);  // lane goroutines count
  CHECK(lane.run_until_idle() == 8);  // 3 yields + the final return, each
  CHECK(order == std::vector<int>{0, 1, 0, 1, 0, 1});
  CHECK(rt.num_goroutine() == 0);
  CHECK(lane.goroutines() == 0);
}

TEST_CASE("run_for stops after its budget") {
  goro::runtime rt({.maxprocs = 1});
  goro::thread_lane lane;
  std::atomic<bool> stop{false};
  lane.go(rt, [&] {
    while (!stop.load()) {
      const auto t0 = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() - t0 < 1ms) {
      }
      goro::yield();
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t n = lane.run_for(5ms);
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(n >= 1);
  CHECK(took < 500ms);  // stopped after the budget, not "until idle" (never, here)
  stop = true;
  drain(lane);
  CHECK(lane.goroutines() == 0);
}

TEST_CASE("goroutines a lane goroutine spawns run on the runtime's Ps") {
  goro::runtime rt({.maxprocs = 2});
  goro::thread_lane lane;
  const auto owner = std::this_thread::get_id();
  std::atomic<int> on_owner{0};
  goro::chan<int> done;
  lane.go(rt, [&] {
    for (int i = 0; i < 16; ++i)
      goro::go([&] {
        if (std::this_thread::get_id() == owner) on_owner.fetch_add(1);
        done.send(1);
      });
    for (int i = 0; i < 16; ++i) (void)done.recv();
  });
  drain(lane);
  CHECK(lane.goroutines() == 0);
  CHECK(on_owner.load() == 0);
}

TEST_CASE("lane.go from another thread, and goroutines of two runtimes on one lane") {
  goro::runtime a({.maxprocs = 1}), b({.maxprocs = 1});
  goro::thread_lane lane;
  std::atomic<int> ran{0};
  std::thread t([&] {
    lane.go(a, [&] { ran.fetch_add(1); });
    lane.go(b, [&] {
      goro::sleep_for(1ms);
      ran.fetch_add(10);
    });
  });
  t.join();
  CHECK(a.num_goroutine() == 1);
  CHECK(b.num_goroutine() == 1);
  drain(lane);
  CHECK(ran.load() == 11);
  CHECK(a.num_goroutine() == 0);
  CHECK(b.num_goroutine() == 0);
}

// The lane's M switches each goroutine with the kind of its own runtime
// (policy fp_control, docs/policies.md): a per_goroutine goroutine keeps
// its rounding mode across yields while a shared one, pumped in turn on
// the same thread, sees the owner's; the owner's mode survives both. A
// wrong kind on either side (the g0 frame read by the kind that did not
// write it) shows up as a wrong mode somewhere here.
TEST_CASE("a lane switches each goroutine with its runtime's fp_control") {
  using shared_policy = goro::policy<goro::fp_control_mode<goro::fp_control::shared>>;
  goro::runtime per({.maxprocs = 1});
  goro::basic_runtime<shared_policy> shared({.maxprocs = 1});
  goro::thread_lane lane;
  const int round0 = std::fegetround();
  std::fesetround(FE_UPWARD);
  int fresh_per = -1, fresh_shared = -1, bad_per = 0, bad_shared = 0;
  lane.go(per, [&] {
    fresh_per = std::fegetround();
    std::fesetround(FE_DOWNWARD);
    for (int i = 0; i < 50; ++i) {
      goro::yield();
      if (std::fegetround() != FE_DOWNWARD) ++bad_per;
    }
  });
  lane.go(shared, [&] {
    fresh_shared = std::fegetround();
    for (int i = 0; i < 50; ++i) {
      goro::yield();
      if (std::fegetround() != FE_UPWARD) ++bad_shared;  // the owner's, not the other goroutine's
    }
  });
  drain(lane);
  const int owner_after_mixed = std::fegetround();
  // A shared goroutine's change stays on the thread once it switches back.
  lane.go(shared, [] { std::fesetround(FE_TOWARDZERO); });
  drain(lane);
  const int owner_after_shared = std::fegetround();
  std::fesetround(round0);
  CHECK(fresh_per == FE_TONEAREST);  // a fresh per_goroutine context: the default mode
  CHECK(fresh_shared == FE_UPWARD);  // a fresh shared one: the thread's
  CHECK(bad_per == 0);
  CHECK(bad_shared == 0);
  CHECK(owner_after_mixed == FE_UPWARD);
  CHECK(owner_after_shared == FE_TOWARDZERO);
}

TEST_CASE("a lane serves a runtime made where a destroyed one of another policy was") {
  // The lane kept one adapter per runtime address, with the runtime's
  // fp_control (and allocator) read when it was made: a runtime of another
  // policy at a freed runtime's address got the dead one's switches.
  using shared_policy = goro::policy<goro::fp_control_mode<goro::fp_control::shared>>;
  goro::thread_lane lane;
  const int round0 = std::fegetround();
  int wrong = 0;
  for (int i = 0; i < 50; ++i) {
    std::fesetround(FE_UPWARD);
    {
      goro::runtime per({.maxprocs = 1});
      lane.go(per, [&] {
        if (std::fegetround() != FE_TONEAREST) ++wrong;  // a fresh per_goroutine context: the default mode
      });
      drain(lane);
    }
    {
      goro::basic_runtime<shared_policy> shared({.maxprocs = 1});
      lane.go(shared, [&] {
        if (std::fegetround() != FE_UPWARD) ++wrong;  // a shared goroutine starts with the thread's mode
      });
      drain(lane);
    }
    std::fesetround(round0);
  }
  CHECK(wrong == 0);
}

TEST_CASE("run_for is only for the owner thread, outside goroutines") {
  goro::runtime rt({.maxprocs = 1});
  goro::thread_lane lane;
  std::string other, other_idle;
  std::thread t([&] {
    try {
      lane.run_for(1ms);
    } catch (const goro::usage_error& e) {
      other = e.what();
    }
    try {
      lane.run_until_idle();
    } catch (const goro::usage_error& e) {
      other_idle = e.what();
    }
  });
  t.join();
  CHECK(other.find("thread_lane::run_for called on a thread other than the one that created the lane") !=
        std::string::npos);
  // The call named is the one made (it said run_for for run_until_idle).
  CHECK(other_idle.find("thread_lane::run_until_idle called on a thread other than") != std::string::npos);
  std::string inside;
  lane.go(rt, [&] {
    try {
      lane.run_until_idle();
    } catch (const goro::usage_error& e) {
      inside = e.what();
    }
  });
  drain(lane);
  CHECK(inside.find("thread_lane::run_until_idle called inside a goroutine") != std::string::npos);
}

TEST_CASE("a live lane is an external M: run() waits for it instead of reporting a deadlock") {
  goro::runtime rt({.maxprocs = 1});
  goro::chan<int> c;
  std::atomic<bool> pumping{true};
  // The lane lives on a thread of its own, which pumps only after run()'s
  // main has been blocked for longer than the deadlock grace period.
  std::thread owner([&] {
    goro::thread_lane lane;
    lane.go(rt, [c]() mutable { c.send(42); });
    std::this_thread::sleep_for(600ms);
    while (pumping.load()) {
      if (lane.run_for(1ms) == 0) std::this_thread::sleep_for(100us);
      if (lane.goroutines() == 0) break;
    }
  });
  int got = 0;
  CHECK_NOTHROW(got = rt.run([&] { return c.recv().value(); }));
  CHECK(got == 42);
  pumping = false;
  owner.join();
}

TEST_CASE("when main returns, a parked lane goroutine unwinds on its lane") {
  goro::runtime rt({.maxprocs = 1});
  goro::chan<int> never;
  std::atomic<bool> unwound{false}, stop{false};
  std::atomic<std::thread::id> unwound_on{};
  goro::thread_lane* lp = nullptr;
  std::atomic<bool> ready{false};
  std::thread owner([&] {
    goro::thread_lane lane;
    lp = &lane;
    ready = true;
    while (!stop.load() || lane.goroutines() > 0) {
      if (lane.run_for(1ms) == 0) std::this_thread::sleep_for(100us);
    }
  });
  while (!ready.load()) std::this_thread::yield();
  const auto owner_id = owner.get_id();
  rt.run([&] {
    lp->go(rt, [&]() mutable {
      struct guard {
        std::atomic<bool>& flag;
        std::atomic<std::thread::id>& on;
        ~guard() {
          on = std::this_thread::get_id();
          flag = true;
        }
      } g{unwound, unwound_on};
      (void)never.recv();  // parks for good; ended when main returns
    });
    goro::sleep_for(20ms);
  });
  stop = true;
  owner.join();
  CHECK(unwound.load());
  CHECK(unwound_on.load() == owner_id);
  CHECK(rt.num_goroutine() == 0);
}

namespace {
std::atomic<int> lane_exit_state{0};  // 1: the lane's thread is held in lane_g_exit, 2: released
}  // namespace

TEST_CASE("run() returns only once the lane's thread is done with the runtime") {
  // A lane goroutine ended when main returns unwinds on its lane; its
  // record went back to the runtime after the runtime's count of goroutines
  // had dropped, so run() could return and the runtime be destroyed while
  // the lane's thread still used it (goro::run(f) destroys it at once).
  goro::thread_lane* lp = nullptr;
  std::atomic<bool> ready{false}, stop{false};
  std::thread owner([&] {
    goro::thread_lane lane;
    lp = &lane;
    ready = true;
    while (!stop.load() || lane.goroutines() > 0) {
      if (lane.run_for(1ms) == 0) std::this_thread::sleep_for(100us);
    }
  });
  while (!ready.load()) std::this_thread::yield();
  goro::detail::testing::lane_exit_seam = [] {
    lane_exit_state = 1;
    std::this_thread::sleep_for(300ms);
    lane_exit_state = 2;
  };
  {
    goro::runtime rt({.maxprocs = 1});
    goro::chan<int> never;
    rt.run([&] {
      lp->go(rt, [never]() mutable { (void)never.recv(); });  // ended when main returns
      goro::sleep_for(20ms);
    });
    CHECK(lane_exit_state.load() == 2);
    while (lane_exit_state.load() == 1) std::this_thread::sleep_for(1ms);  // not destroyed under it (the test crashed)
  }
  goro::detail::testing::lane_exit_seam = nullptr;
  stop = true;
  owner.join();
}

TEST_CASE("lane.goroutines() drops to 0 only once the lane's thread is done with the runtime") {
  // Another thread that waits for it and then destroys the runtime (the
  // lane pumped on a render thread, the runtime owned by the main one) saw 0
  // while the lane's thread was still returning the goroutine's record:
  // a use after free, or "runtime destroyed while 1 of its goroutines live
  // on a thread_lane".
  goro::thread_lane* lp = nullptr;
  std::atomic<bool> ready{false}, started{false}, stop{false};
  goro::runtime rt({.maxprocs = 1});
  std::thread owner([&] {
    goro::thread_lane lane;
    lp = &lane;
    ready = true;
    while (!started.load()) std::this_thread::yield();
    while (!stop.load() || lane.goroutines() > 0) {
      if (lane.run_for(1ms) == 0) std::this_thread::sleep_for(100us);
    }
  });
  while (!ready.load()) std::this_thread::yield();
  lane_exit_state = 0;
  goro::detail::testing::lane_exit_seam = [] {
    lane_exit_state = 1;
    std::this_thread::sleep_for(300ms);
    lane_exit_state = 2;
  };
  lp->go(rt, [] {});
  started = true;
  while (lp->goroutines() > 0) std::this_thread::sleep_for(100us);
  CHECK(lane_exit_state.load() == 2);
  CHECK(rt.num_goroutine() == 0);
  while (lane_exit_state.load() == 1) std::this_thread::sleep_for(1ms);
  goro::detail::testing::lane_exit_seam = nullptr;
  stop = true;
  owner.join();
}

TEST_CASE("the goroutine dump marks lane goroutines") {
  goro::runtime rt({.maxprocs = 1});
  goro::thread_lane lane;
  goro::chan<int> c;
  lane.go(rt, [c]() mutable { (void)c.recv(); });
  lane.run_until_idle();
  bool found = false;
  for (const auto& gi : goro::goroutines())
    if (gi.wait_reason == "chan receive, lane") found = true;
  CHECK(found);
  const std::string dump = goro::goroutine_dump();
  CHECK(dump.find("[chan receive, lane") != std::string::npos);
  c.send(1);  // from this plain thread: the lane goroutine is runnable again
  drain(lane);
  CHECK(lane.goroutines() == 0);
}

TEST_CASE("many lane goroutines come and go; records and stacks go back to the runtime") {
  goro::runtime rt({.maxprocs = 2});
  goro::thread_lane lane;
  const int n = goro_test::scale(20000, 2000, 2000);
  std::atomic<int> sum{0};
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < n / 4; ++i) lane.go(rt, [&sum, i] { sum.fetch_add(i % 7); });
    lane.run_until_idle();
    CHECK(lane.goroutines() == 0);
  }
  int want = 0;
  for (int i = 0; i < n / 4; ++i) want += i % 7;
  CHECK(sum.load() == 4 * want);
  CHECK(rt.num_goroutine() == 0);
  const auto s = rt.stats();
  CHECK(s.spawns == s.exits);
}

TEST_CASE("a lane goroutine with spawn_options gets its stack size") {
  goro::runtime rt({.maxprocs = 1});
  goro::thread_lane lane;
  bool deep = false;
  lane.go(rt, goro::spawn_options{.stack_size = 2 << 20}, [&] {
    // ~1 MiB of frames: more than the default 64 KiB stack holds.
    struct rec {
      static int down(int n) {
        volatile char pad[1024];
        pad[0] = static_cast<char>(n);
        return n == 0 ? pad[0] : down(n - 1) + (pad[0] & 1);
      }
    };
    (void)rec::down(1000);
    deep = true;
  });
  lane.run_until_idle();
  CHECK(deep);
}

TEST_CASE("destroying a lane with goroutines alive is a usage_error") {
  auto r = goro_test::run_helper("lane", {"destroyed_alive"});
  CHECK(r.output.find("caught: goro: thread_lane destroyed with 1 goroutine(s) alive") != std::string::npos);
  // The abandoned lane no longer counts as an external M (it hung run()).
  CHECK(r.output.find("second runtime: deadlock reported") != std::string::npos);
  CHECK(r.output.find("goro: runtime destroyed while 1 of its goroutines live on a thread_lane") != std::string::npos);
  CHECK(r.signaled);
  CHECK(r.signal == SIGABRT);
  auto r2 = goro_test::run_helper("lane", {"runtime_first"});
  CHECK(r2.output.find("goro: runtime destroyed while 1 of its goroutines live on a thread_lane") != std::string::npos);
  CHECK(r2.output.find("not stopped") == std::string::npos);
  CHECK(r2.signaled);
}

TEST_CASE("with main_return::wait the runtime's destructor waits for lane goroutines too") {
  // It stopped the program at once ("runtime destroyed while 1 of its
  // goroutines live on a thread_lane") though the lane, pumped by another
  // thread, was running that goroutine to its end.
  auto r = goro_test::run_helper("lane", {"wait_mode"});
  CHECK(r.output.find("lane goroutine done\nruntime destroyed") != std::string::npos);
  CHECK(r.output.find("live on a thread_lane") == std::string::npos);
  CHECK_FALSE(r.signaled);
}

TEST_CASE("a stack overflow in a lane goroutine is reported after another lane of its thread was destroyed") {
  // The first lane had installed the thread's alternate signal stack and
  // took it away with it: the overflow was a bare SIGSEGV.
  auto r = goro_test::run_helper("lane", {"overflow_two_lanes"});
  CHECK(r.output.find("stack overflow") != std::string::npos);
  CHECK(r.output.find("size 32768") != std::string::npos);
  CHECK(r.output.find("not stopped") == std::string::npos);
  CHECK(r.signaled);
}

TEST_CASE("a lane owned by run()'s own thread is no external M: main waiting on it is a deadlock") {
  goro::runtime rt({.maxprocs = 1});
  goro::thread_lane lane;  // this thread's: it cannot pump it while inside run()
  goro::chan<int> c;
  std::atomic<bool> abandon{false};
  lane.go(rt, [c, &abandon]() mutable {
    if (!abandon.load()) c.send(1);
  });
  {
    hang_guard guard(20s);
    CHECK_THROWS_AS(rt.run([c]() mutable { (void)c.recv(); }), goro::deadlock_error);
  }
  abandon = true;
  drain(lane);
  CHECK(lane.goroutines() == 0);
}

TEST_CASE("main returning leaves the goroutines of a lane owned by run()'s own thread to its next run_for") {
  goro::runtime rt({.maxprocs = 1});
  goro::thread_lane lane;
  goro::chan<int> never;
  std::atomic<int> unwound{0};
  lane.go(rt, [&] {
    struct guard {
      std::atomic<int>& n;
      ~guard() { n.fetch_add(1); }
    } g{unwound};
    (void)never.recv();
  });
  CHECK(lane.run_until_idle() == 1);  // parked
  {
    hang_guard guard(20s);
    rt.run([] { goro::sleep_for(10ms); });  // returns: it cannot wait for a goroutine only this thread can run
  }
  CHECK(unwound.load() == 0);
  CHECK(lane.goroutines() == 1);
  drain(lane);  // ended when main returned: it unwinds now
  CHECK(unwound.load() == 1);
  CHECK(lane.goroutines() == 0);
  CHECK(rt.num_goroutine() == 0);
}

TEST_CASE("a thread_lane created inside a runtime's goroutine is a usage_error") {
  // Its owner was the M's thread, which can never pump it (run_for inside
  // a goroutine is refused), and as a live external M it kept run() from
  // ever reporting a deadlock: a hang. A lane goroutine's thread is its
  // lane's owner, a plain thread: a lane made there is fine.
  goro::runtime rt({.maxprocs = 2});
  std::string what;
  rt.run([&] {
    try {
      goro::thread_lane inner;
    } catch (const goro::usage_error& e) {
      what = e.what();
    }
  });
  CHECK(what.find("thread_lane created inside a goroutine") != std::string::npos);
  goro::thread_lane lane;
  bool made = false;
  lane.go(rt, [&] {
    goro::thread_lane inner;  // owned by this (the lane's) thread
    made = true;
  });
  drain(lane);
  CHECK(made);
}
