// Fairness: ports of Go's TestTimerFairness2 (src/runtime/proc_test.go)
// and TestGCFairness / GCFairness (testdata/testprog/gc.go). Goroutines
// that never park for long (a select ping-pong, a loop of blocking
// writes) must not keep timers, sleepers or other goroutines from running.
// A starvation regression means "never", so the bounds are generous
// (seconds) and every loop gives up after a watchdog deadline: a failure
// ends the test instead of hanging it. No test asserts speed.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <utility>

#include "test_util.hpp"

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

// How long a starved goroutine may wait before the test calls it a failure
// (Go's tests wait 20 ms / 100 ms; sanitizers and qemu are far slower).
const auto starve_bound = std::chrono::milliseconds(goro_test::scale(5000, 15000));

double ms(steady::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Closes c() from a plain thread once starve_bound has passed (unless
// stopped first): a goroutine starved of timers cannot rely on a goro timer
// to give up, so every wait in these tests also selects on c().
class watchdog {
 public:
  watchdog()
      : t_([this] {
          auto end = steady::now() + starve_bound;
          while (!stop_.load() && steady::now() < end) std::this_thread::sleep_for(1ms);
          if (!stop_.load()) {
            fired_.store(true);
            c_.close();
          }
        }) {}
  ~watchdog() {
    stop_.store(true);
    t_.join();
  }
  goro::chan<bool> c() const { return c_; }
  bool fired() const { return fired_.load(); }

 private:
  goro::chan<bool> c_;
  std::atomic<bool> stop_{false}, fired_{false};
  std::thread t_;
};

int open_dev_null(int flags) {
  int fd = ::open("/dev/null", flags | O_CLOEXEC);
  REQUIRE(fd >= 0);
  return fd;
}

// TestTimerFairness2: two goroutines each loop { a zero-length read (a
// system call), select { send on c, receive on c, their own 20 ms timer } }.
// They keep handing each other the P through c (runnext), so the Ps are
// never idle; their timers must still fire. A sleeper goroutine must wake,
// too.
void timer_fairness2(unsigned procs) {
  goro::runtime rt{goro::options{procs}};
  const int fd = open_dev_null(O_RDONLY);
  watchdog dog;
  std::atomic<int> fired{0};
  bool sleeper_woke = false;
  steady::duration sleeper_late{};
  steady::duration elapsed{};
  rt.run([&] {
    const auto start = steady::now();
    goro::chan<bool> c;        // unbuffered: the two loopers meet on it
    goro::chan<bool> done{2};  // buffered: a looper that gave up never waits for main
    for (int i = 0; i < 2; ++i) {
      goro::go([&, c, done]() mutable {
        auto timer = goro::after(20ms);
        auto stop = dog.c();
        char buf[1];
        for (bool over = false; !over;) {
          goro::blocking([&] { return ::read(fd, buf, 0); });
          goro::select(goro::on_send(c, true, [] {}),                 //
                       goro::on_recv(c, [](std::optional<bool>) {}),  //
                       goro::on_recv(timer,
                                     [&](auto) {
                                       fired.fetch_add(1);
                                       over = true;
                                     }),
                       goro::on_recv(stop, [&](auto) { over = true; }));  // watchdog: starved
        }
        done.send(true);
      });
    }
    // The sleeper (this goroutine): 10 ms, measured.
    auto t0 = steady::now();
    goro::select(goro::on_recv(goro::after(10ms), [&](auto) { sleeper_woke = true; }),
                 goro::on_recv(dog.c(), [](auto) {}));
    sleeper_late = steady::now() - t0 - 10ms;
    done.recv();
    done.recv();
    elapsed = steady::now() - start;
  });
  ::close(fd);
  INFO("procs=" << procs << " loopers done after " << ms(elapsed) << " ms, sleeper woke " << ms(sleeper_late)
                << " ms late; watchdog fired: " << dog.fired());
  CHECK(fired.load() == 2);
  CHECK(sleeper_woke);
  CHECK_FALSE(dog.fired());
}

// GCFairness: goroutines that write to /dev/null in a loop through
// goro::blocking (fast system calls: the P is back before sysmon could
// retake it) must not starve a goroutine that sleeps and then sets a flag.
// Returns when the sleeper's flag is set (or the watchdog gives up).
// With `slow`, each call also takes ~5 us (it spins after the write, as
// a short read from the page cache would take): the P is in a blocking
// call nearly all the time, which is where sysmon finds it. Short of one
// sysmon round, such calls are never retaken; a time slice that restarted
// whenever sysmon saw the P in a call would never end, and the sleeper
// would starve (it did before sysmon counted blocking calls as running).
void blocking_fairness(unsigned procs, unsigned writers, std::chrono::milliseconds sleep, bool slow = false) {
  goro::runtime rt{goro::options{procs}};
  const int fd = open_dev_null(O_WRONLY);
  watchdog dog;
  std::atomic<bool> flag{false};
  std::atomic<long> writes{0};
  bool sleeper_woke = false;
  steady::duration sleeper_late{};
  rt.run([&] {
    goro::wait_group wg, started;
    wg.add(static_cast<std::int64_t>(writers));
    started.add(static_cast<std::int64_t>(writers));
    for (unsigned i = 0; i < writers; ++i) {
      goro::go([&] {
        bool first = true;
        // Until the sleeper sets the flag, or the watchdog fires (the sleeper never ran).
        while (!flag.load(std::memory_order_relaxed) && !dog.fired()) {
          goro::blocking([&] {
            auto n = ::write(fd, ".", 1);
            if (slow)
              for (auto end = steady::now() + 5us; steady::now() < end;) {
              }
            return n;
          });
          writes.fetch_add(1, std::memory_order_relaxed);
          if (std::exchange(first, false)) started.done();
        }
        if (first) started.done();  // the watchdog fired first
        wg.done();
      });
    }
    // This goroutine is the sleeper. It sleeps once every writer has
    // written: the writers hold every P then. (Under qemu-riscv64 a
    // writer's first call, thread start and lazy binding included, once
    // took longer than the whole 1 ms sleep, and the sleeper saw 0 writes.)
    started.wait();
    auto t0 = steady::now();
    goro::select(goro::on_recv(goro::after(sleep), [&](auto) { sleeper_woke = true; }),
                 goro::on_recv(dog.c(), [](auto) {}));
    sleeper_late = steady::now() - t0 - sleep;
    flag.store(true);
    wg.wait();
  });
  ::close(fd);
  INFO("procs=" << procs << " writers=" << writers << " sleep=" << sleep.count() << " ms"
                << (slow ? " (5 us calls)" : "") << ": sleeper woke " << ms(sleeper_late) << " ms late after "
                << writes.load() << " writes; preemptions=" << rt.stats().preemptions
                << " handoffs=" << rt.stats().syscall_handoffs << "; watchdog fired: " << dog.fired());
  CHECK(sleeper_woke);
  CHECK_FALSE(dog.fired());
  CHECK(writes.load() > 0);
}

}  // namespace

TEST_CASE("fairness: TimerFairness2 — select ping-pong with system calls does not starve timers", "[fairness][time]") {
  SECTION("1 proc") { timer_fairness2(1); }
  SECTION("2 procs") { timer_fairness2(2); }
}

TEST_CASE("fairness: GCFairness — goroutines looping on fast blocking writes do not starve a sleeper",
          "[fairness][blocking]") {
  SECTION("1 proc, 2 writers, 10 ms sleep (Go's GCFairness)") { blocking_fairness(1, 2, 10ms); }
  SECTION("1 proc, 2 writers, 1 ms sleep") { blocking_fairness(1, 2, 1ms); }
  SECTION("2 procs, 4 writers, 10 ms sleep") { blocking_fairness(2, 4, 10ms); }
  SECTION("2 procs, 4 writers, 1 ms sleep") { blocking_fairness(2, 4, 1ms); }
  SECTION("1 proc, 2 writers, 5 us calls, 10 ms sleep") { blocking_fairness(1, 2, 10ms, true); }
  SECTION("2 procs, 4 writers, 5 us calls, 10 ms sleep") { blocking_fairness(2, 4, 10ms, true); }
}

#if !GORO_TSAN  // async preemption is off under TSan (docs/preemption.md)

// An M that holds async-preempted goroutines alternates between them and
// its run queues without passing through find_runnable; it must still run
// its P's due timers, or hogs that are always async-preempted keep a
// sleeper (and every ticker) waiting forever.
TEST_CASE("fairness: async-preempted hogs do not starve the P's timers", "[fairness][time][async]") {
  using sig = goro::policy<goro::preemption_mode<goro::preemption::signal>, goro::slice_us<2000>>;
  for (unsigned procs : {1u, 2u}) {
    goro::basic_runtime<sig> rt{goro::options{procs}};
    watchdog dog;
    std::atomic<bool> stop{false};
    bool sleeper_woke = false;
    steady::duration sleeper_late{};
    rt.run([&] {
      goro::wait_group wg;
      wg.add(static_cast<std::int64_t>(2 * procs));
      for (unsigned i = 0; i < 2 * procs; ++i) {
        goro::go([&] {
          {
            goro::async_preemptible scope;  // a call-free loop: only SIGURG preempts it
            for (volatile std::uint64_t x = 0; !stop.load(std::memory_order_relaxed);) x = x + 1;
          }
          wg.done();
        });
      }
      auto t0 = steady::now();
      goro::select(goro::on_recv(goro::after(10ms), [&](auto) { sleeper_woke = true; }),
                   goro::on_recv(dog.c(), [](auto) {}));  // from a plain thread: lands in the global queue
      sleeper_late = steady::now() - t0 - 10ms;
      stop.store(true);
      wg.wait();
    });
    INFO("procs=" << procs << ": sleeper woke " << ms(sleeper_late)
                  << " ms late; preemptions=" << rt.stats().preemptions << "; watchdog fired: " << dog.fired());
    CHECK(sleeper_woke);
    CHECK_FALSE(dog.fired());
  }
}

// The same for the timers of a P retired by gomaxprocs: they stay on its
// heap, and every active P runs them when it schedules (find_runnable),
// but the M alternating between its pinned goroutines and its queues did
// not: sleepers left on the retired P woke only when the hogs ended (here
// at their 5 s limit).
TEST_CASE("fairness: async-preempted hogs do not starve the timers of a retired P", "[fairness][time][async]") {
  using sig = goro::policy<goro::preemption_mode<goro::preemption::signal>, goro::slice_us<2000>>;
  goro::basic_runtime<sig> rt{goro::options{2}};
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> max_late_ms{0};
  rt.run([&] {
    goro::wait_group sleepers, hogs;
    // Two sleepers that meet while both run (so on different Ps) and then
    // sleep: each sleep's timer goes on its own P's heap, one on P 1's.
    std::atomic<int> arrived{0};
    for (int i = 0; i < 2; ++i) {
      sleepers.add(1);
      goro::go([&] {
        const auto meet_by = steady::now() + 2s;
        arrived.fetch_add(1);
        while (arrived.load() < 2 && steady::now() < meet_by) {
        }
        const auto t0 = steady::now();
        goro::sleep_for(100ms);
        const auto late = static_cast<std::int64_t>(ms(steady::now() - t0 - 100ms));
        std::int64_t m = max_late_ms.load();
        while (late > m && !max_late_ms.compare_exchange_weak(m, late)) {
        }
        sleepers.done();
      });
    }
    while (arrived.load() < 2) goro::sleep_for(1ms);
    goro::sleep_for(5ms);
    goro::gomaxprocs(1);
    const auto give_up = steady::now() + 5s;
    for (int i = 0; i < 3; ++i) {
      hogs.add(1);
      goro::go([&, give_up] {
        {
          goro::async_preemptible scope;  // a call-free loop: only SIGURG preempts it
          volatile std::uint64_t x = 0;
          while (!stop.load(std::memory_order_relaxed) && steady::now() < give_up) x = x + 1;
        }
        hogs.done();
      });
    }
    sleepers.wait();
    stop.store(true);
    hogs.wait();
  });
  INFO("latest sleeper woke " << max_late_ms.load() << " ms late; preemptions=" << rt.stats().preemptions);
  CHECK(max_late_ms.load() < 2500);  // a hog slice or two (~20 ms); was ~5 s
}

#endif
