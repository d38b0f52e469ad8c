// Preemption at goro calls that switch (Go's PingPongHog) and signal-mode
// goroutines versus the run() caller's thread (docs/preemption.md).
// Bounded: a failure ends through a preempt_watchdog, never a hang.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <goro/goro.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "test_util.hpp"

using namespace std::chrono_literals;

namespace {

// Counts to `limit` in memory (the compiler may not fold the loop).
void count_up(long& counter, long limit) {
  for (long i = 0; i < limit; ++i) {
    ++counter;
    asm volatile("" ::: "memory");
  }
}

// Calls f() on a plain thread if `done` is not set within `limit`.
class preempt_watchdog {
 public:
  template <class F>
  preempt_watchdog(std::chrono::milliseconds limit, F f)
      : t_([this, limit, f] {
          std::unique_lock<std::mutex> lk(m_);
          if (!cv_.wait_for(lk, limit, [&] { return done_; })) {
            fired_ = true;
            lk.unlock();
            f();
          }
        }) {}
  ~preempt_watchdog() { stop(); }
  void stop() {
    {
      std::lock_guard<std::mutex> lk(m_);
      done_ = true;
    }
    cv_.notify_all();
    if (t_.joinable()) t_.join();
  }
  bool fired() {
    std::lock_guard<std::mutex> lk(m_);
    return fired_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  bool fired_ = false;
  std::thread t_;
};

}  // namespace

// Go's TestPingPongHog (src/runtime/proc_test.go), ported as it is: at one
// P, two goroutines hand a value back and forth over an unbuffered channel
// with a lot of work per hand-off (hogs), two others with little work
// (light). No goroutine calls preempt_point(): the only safe points are the
// channel operations. Each pair shares one time slice (the woken partner
// runs from runnext and inherits it), so sysmon's request must end the
// pair's slice at its next channel operation; a request dropped when the
// goroutine parks left the hog pair with the P for good (52-210 million hog
// counts against exactly 1,000 light ones, and main's 100 ms sleep never
// ended). Go checks the counts are within a factor of 20.
TEST_CASE("preempt: a ping-pong hog pair does not starve a light pair at 1 P (Go's PingPongHog)", "[preempt]") {
  // Declared before rt: the pairs still use them until rt's destructor returns.
  long hog_count = 0, light_count = 0;  // each written by one pair, ordered by its hand-offs
  goro::chan<bool> done, hog_chan, light_chan;
  std::atomic<bool> closed{false};
  goro::runtime rt{goro::options{1}};
  auto close_done = [&] {
    if (!closed.exchange(true)) done.close();
  };
  // If main never gets the P back, end the run from outside (the test then fails).
  preempt_watchdog dog(std::chrono::milliseconds(goro_test::scale(10'000, 30'000)), close_done);
  std::chrono::nanoseconds slept{};
  rt.run([&] {
    auto run = [&](long limit, long* counter, goro::chan<bool> wake) {
      for (;;) {
        bool quit = false;
        goro::select(goro::on_recv(done, [&](std::optional<bool>) { quit = true; }),
                     goro::on_recv(wake, [&](std::optional<bool>) {
                       count_up(*counter, limit);
                       wake.send(true);
                     }));
        if (quit) return;
      }
    };
    const long hog_limit = goro_test::scale(1'000'000, 100'000), light_limit = goro_test::scale(1'000, 100);
    for (int i = 0; i < 2; ++i) goro::go(run, hog_limit, &hog_count, hog_chan);
    for (int i = 0; i < 2; ++i) goro::go(run, light_limit, &light_count, light_chan);
    hog_chan.send(true);
    light_chan.send(true);
    // Go sleeps 100 ms. On a loaded machine 100 ms of wall time may hold
    // only a slice or two of CPU time: sleep 100 ms more until the pairs
    // were preempted 10 times (at most 5 s). Not shorter naps: main's
    // wake-ups go through runnext, and the partner they push to the
    // local queue then starts a fresh slice, so waking every slice would
    // let whichever pair holds the P keep it (in Go too).
    auto t0 = std::chrono::steady_clock::now();
    do {
      goro::sleep_for(100ms);
      slept = std::chrono::steady_clock::now() - t0;
    } while (rt.stats().preemptions < 10 && slept < 5s);
    close_done();
    hog_chan.recv();
    light_chan.recv();
  });
  dog.stop();
  INFO("hog count " << hog_count << ", light count " << light_count << ", main slept "
                    << std::chrono::duration_cast<std::chrono::milliseconds>(slept).count() << " ms, preemptions "
                    << rt.stats().preemptions);
  CHECK_FALSE(dog.fired());
  constexpr long factor = 20;
  CHECK(hog_count / factor <= light_count);
  CHECK(light_count / factor <= hog_count);
}

// ---- preemption::signal and the run() caller's thread ----

#if !GORO_TSAN  // async preemption is off under TSan (signal mode is cooperative there)

namespace {
using signal_policy = goro::policy<goro::preemption_mode<goro::preemption::signal>, goro::slice_us<2000>>;
using signal_runtime = goro::basic_runtime<signal_policy>;

// qemu-user (how CI runs the AArch64 and RISC-V builds) aborts in a child forked from a
// process that has other threads ("qemu_plugin_vcpu_init_hook: assertion
// failed"), and the first runtime starts the process-wide dump thread.
// Emulated, /proc/cpuinfo is the x86 host's.
inline bool under_qemu_user() {
#if defined(__aarch64__) || defined(__riscv)
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("vendor_id", 0) == 0) return true;
#endif
  return false;
}

// Runs f() in a forked child that is killed after `limit_s` seconds: a
// hang fails instead of hanging. Returns the child's status: 0 when f()
// returned true. Skipped (0, with a warning) under qemu-user, see above.
template <class F>
int in_child(unsigned limit_s, F f) {
  if (under_qemu_user()) {
    WARN("fork from a threaded process crashes qemu-user: this forked case is skipped here");
    return 0;
  }
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(limit_s);  // SIGALRM's default action ends the child
    _exit(f() ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
}  // namespace

// An async-preempted goroutine resumes only on the thread it was preempted
// on. Goroutines spinning for ever inside async_preemptible used to be
// pinned to the run() caller's thread, which then alternated between them
// and never returned from run() after main did (the child was killed).
TEST_CASE("preempt: goroutines spinning in async_preemptible do not keep run() from returning", "[preempt][async]") {
  const unsigned procs = GENERATE(1u, 2u);
  CAPTURE(procs);
  const int status = in_child(goro_test::scale(20, 60), [procs] {
    std::atomic<bool> stop{false};  // outlives rt: the spinners read it until rt's destructor returns
    std::atomic<int> started{0};
    // wait: run() returns while the spinners (reaching no goro call) still run
    signal_runtime rt{goro::options{.maxprocs = procs, .on_main_return = goro::main_return::wait}};
    const int spinners = static_cast<int>(2 * procs);
    rt.run([&] {
      for (int i = 0; i < spinners; ++i) {
        goro::go([&] {
          goro::async_preemptible scope;  // no lock, no call inside
          started.fetch_add(1, std::memory_order_relaxed);
          while (!stop.load(std::memory_order_relaxed)) {
          }
        });
      }
      // Let every spinner run and be preempted a few times (2 ms slices).
      while (started.load(std::memory_order_relaxed) < spinners) goro::sleep_for(1ms);
      goro::sleep_for(50ms);
    });
    stop.store(true);  // run() returned: the runtime's destructor waits for the spinners
    return rt.stats().preemptions >= 1;
  });
  CHECK(status == 0);
}

// A goroutine::blocking call made on an M that holds async-preempted
// goroutines used to keep the P for the whole call: at one P, a call that
// waits for another goroutine (here main, writing a pipe) deadlocked.
TEST_CASE("preempt: goro::blocking on an M holding async-preempted goroutines hands its P off",
          "[preempt][async][blocking]") {
  const int status = in_child(goro_test::scale(20, 60), [] {
    signal_runtime rt{goro::options{1}};
    int fds[2];
    if (pipe(fds) != 0) return false;
    std::atomic<bool> stop{false}, spinning{false}, in_read{false};
    char got = 0;
    rt.run([&] {
      goro::wait_group wg;
      wg.add(2);
      goro::go([&] {
        {
          goro::async_preemptible scope;
          spinning.store(true, std::memory_order_relaxed);
          while (!stop.load(std::memory_order_relaxed)) {
          }
        }
        wg.done();
      });
      goro::go([&] {
        // Go on only after the spinner was preempted: this M holds it then.
        while (!spinning.load()) goro::yield();
        goro::yield();
        in_read.store(true);
        goro::blocking([&] { return read(fds[0], &got, 1); });
        wg.done();
      });
      while (!in_read.load()) goro::sleep_for(1ms);
      goro::sleep_for(5ms);
      char c = 'm';
      (void)!write(fds[1], &c, 1);
      stop.store(true);
      wg.wait();
    });
    close(fds[0]);
    close(fds[1]);
    return got == 'm';
  });
  CHECK(status == 0);
}

// Main (wired to the run() caller's thread in signal mode) and a goroutine
// wired by lock_os_thread are async-preempted too: each is queued, and its
// thread gets a P back to resume it there. At one P, a spinner of each kind
// must let the other goroutines run, and never change threads.
TEST_CASE("preempt: main and lock_os_thread goroutines are async-preempted and stay on their threads",
          "[preempt][async]") {
  const int status = in_child(goro_test::scale(20, 60), [] {
    signal_runtime rt{goro::options{1}};
    std::atomic<bool> stop_main{false}, stop_locked{false}, moved{false}, locked_spinning{false};
    const pthread_t caller = pthread_self();
    rt.run([&] {
      goro::wait_group wg;
      wg.add(2);
      goro::go([&] {  // stops main's spin: runs only if main is preempted
        stop_main.store(true);
        wg.done();
      });
      goro::go([&] {
        goro::lock_os_thread();
        const pthread_t self = pthread_self();
        {
          goro::async_preemptible scope;
          locked_spinning.store(true, std::memory_order_relaxed);
          while (!stop_locked.load(std::memory_order_relaxed)) {
            if (!pthread_equal(pthread_self(), self)) moved.store(true, std::memory_order_relaxed);
          }
        }
        goro::unlock_os_thread();
        wg.done();
      });
      {
        // Leaves only after main was preempted (A and B ran) and then got
        // the P back from the spinning B.
        goro::async_preemptible scope;
        while (!stop_main.load(std::memory_order_relaxed) || !locked_spinning.load(std::memory_order_relaxed)) {
          if (!pthread_equal(pthread_self(), caller)) moved.store(true, std::memory_order_relaxed);
        }
        // Main got here while the locked spinner spins: it was preempted.
        stop_locked.store(true, std::memory_order_relaxed);
      }
      wg.wait();
      if (!pthread_equal(pthread_self(), caller)) moved.store(true);
    });
    return !moved.load() && rt.stats().preemptions >= 1;
  });
  CHECK(status == 0);
}

#endif
