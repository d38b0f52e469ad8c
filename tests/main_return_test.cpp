// options::on_main_return (SPEC "Runtime"): with main_return::unwind (the
// default) the goroutines still alive when main returns end as if they had
// called goro::exit() -- blocked ones are woken and unwind, running ones
// unwind at their next goro call, unstarted ones are discarded, one that
// reaches no goro call is reported after 1 s and waited for -- all before
// run() returns. main_return::wait keeps the runtime serving until every
// goroutine has finished.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "test_util.hpp"

using namespace std::chrono_literals;

namespace {

using steady = std::chrono::steady_clock;

// Counts its destruction: the goroutine's frame unwound.
struct raii {
  std::atomic<int>* n;
  ~raii() { n->fetch_add(1); }
};

// Waits (yielding) until `n` goroutines are parked and nothing else runs.
void wait_parked(std::size_t total) {
  REQUIRE(goro_test::eventually([&] { return goro::num_goroutine() == total; }));
  goro::sleep_for(20ms);  // let them reach their waits
}

double seconds_since(steady::time_point t0) { return std::chrono::duration<double>(steady::now() - t0).count(); }

// Captures what the process writes on stderr while alive.
class stderr_capture {
 public:
  stderr_capture() {
    std::fflush(stderr);
    path_ = "/tmp/goro_main_return_" + std::to_string(getpid()) + ".txt";
    int fd = ::open(path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    saved_ = ::dup(2);
    ::dup2(fd, 2);
    ::close(fd);
  }
  std::string finish() {
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    ::unlink(path_.c_str());
    return ss.str();
  }
  ~stderr_capture() {
    if (saved_ >= 0) finish();
  }

 private:
  std::string path_;
  int saved_ = -1;
};

}  // namespace

TEST_CASE("main returns: goroutines blocked in goro calls unwind, destructors run") {
  std::atomic<int> unwound{0};
  std::atomic<int> after{0};  // code after a wait that must not run
  std::atomic<int> started{0};  // a goroutine main returns before is discarded unrun (no raii)
  goro::chan<int> ch_recv, ch_send, ch_sel1, ch_sel2;
  goro::mutex mu;
  goro::wait_group wg;
  goro::mutex cmu;
  goro::cond cv;
  goro::semaphore sem(0);
  const auto t0 = steady::now();
  goro::run([&] {
    mu.lock();  // held by main for good
    wg.add(1);  // never done
    goro::go([&] {
      raii r{&unwound};
      started.fetch_add(1);
      (void)ch_recv.recv();
      after.fetch_add(1);
    });
    goro::go([&] {
      raii r{&unwound};
      started.fetch_add(1);
      ch_send.send(1);
      after.fetch_add(1);
    });
    goro::go([&] {
      raii r{&unwound};
      started.fetch_add(1);
      goro::select(goro::on_recv(ch_sel1, [](std::optional<int>) {}), goro::on_send(ch_sel2, 2, [] {}));
      after.fetch_add(1);
    });
    goro::go([&] {
      raii r{&unwound};
      started.fetch_add(1);
      goro::sleep_for(1h);
      after.fetch_add(1);
    });
    goro::go([&] {
      raii r{&unwound};
      started.fetch_add(1);
      std::lock_guard<goro::mutex> lk(mu);
      after.fetch_add(1);
    });
    goro::go([&] {
      raii r{&unwound};
      started.fetch_add(1);
      wg.wait();
      after.fetch_add(1);
    });
    goro::go([&] {
      raii r{&unwound};
      started.fetch_add(1);
      std::unique_lock<goro::mutex> lk(cmu);
      cv.wait(lk);
      after.fetch_add(1);
    });
    goro::go([&] {
      raii r{&unwound};
      started.fetch_add(1);
      sem.acquire();
      after.fetch_add(1);
    });
    goro::go([&] {
      raii r{&unwound};
      started.fetch_add(1);
      goro::chan<int> nil = nullptr;
      (void)nil.recv();
      after.fetch_add(1);
    });
    // Each has begun (under qemu on a loaded machine 20 ms was not
    // always enough for all nine to start: unwound was 8).
    REQUIRE(goro_test::eventually([&] { return started.load() == 9; }));
    wait_parked(10);
  });
  CHECK(unwound.load() == 9);
  CHECK(after.load() == 0);
  CHECK(seconds_since(t0) < 1.0);
  // The objects outlive the runtime: usable, their queues hold no stale waiter.
  CHECK(ch_recv.try_send(5) == false);
  CHECK(!ch_send.try_recv());
  mu.unlock();
  CHECK(mu.try_lock());
  mu.unlock();
  wg.done();
  wg.wait();
  cv.notify_all();
  sem.release();
  CHECK(sem.try_acquire());
}

TEST_CASE("main returns: a goroutine waiting on main's own (destroyed) channel unwinds") {
  std::atomic<int> unwound{0};
  goro::run([&] {
    goro::chan<int> local;  // destroyed when main returns, with the goroutine queued on it
    goro::go([&unwound, c = local.impl()] {
      raii r{&unwound};
      std::optional<int> v;
      c->recv_into(v);
    });
    wait_parked(2);
  });
  CHECK(unwound.load() == 1);
}

TEST_CASE("main returns: running goroutines unwind at their next goro call") {
  std::atomic<int> unwound{0};
  std::atomic<int> started{0};
  goro::run(
      [&] {
        goro::go([&] {
          raii r{&unwound};
          started.fetch_add(1);
          for (;;) goro::yield();
        });
        goro::go([&] {
          raii r{&unwound};
          started.fetch_add(1);
          for (;;) goro::preempt_point();  // sysmon's preemption lets the others run
        });
        goro::go([&] {
          raii r{&unwound};
          started.fetch_add(1);
          goro::chan<int> c(1);
          for (;;) {
            c.send(1);
            (void)c.recv();
          }
        });
        REQUIRE(goro_test::eventually([&] { return started.load() == 3; }));
        goro::sleep_for(10ms);
      },
      goro::options{.maxprocs = 2});
  CHECK(unwound.load() == 3);
}

TEST_CASE("main returns: goroutines that never started are discarded unrun") {
  std::atomic<int> ran{0};
  auto token = std::make_shared<int>(0);
  goro::run(
      [&] {
        for (int i = 0; i < 100; ++i) goro::go([&ran, token] { ran.fetch_add(1); });
        // returns at once: one P, main never yielded, none started
      },
      goro::options{.maxprocs = 1});
  CHECK(ran.load() == 0);
  CHECK(token.use_count() == 1);  // every functor (and its copy of token) destroyed
}

TEST_CASE("main returns: a goroutine reaching no goro call is reported after 1 s and waited for") {
  std::atomic<bool> stop{false};
  std::atomic<bool> finished{false};
  stderr_capture cap;
  const auto t0 = steady::now();
  std::thread stopper;
  goro::run([&] {
    goro::go([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
      finished = true;
    });
    goro::sleep_for(10ms);
    stopper = std::thread([&] {
      std::this_thread::sleep_for(1500ms);
      stop = true;
    });
  });
  const double took = seconds_since(t0);
  stopper.join();
  const std::string err = cap.finish();
  CHECK(finished.load());  // waited for
  CHECK(took >= 1.0);
  CHECK(err.find("goro: main returned; 1 goroutine reached no goro call within 1 s") != std::string::npos);
  CHECK(err.find("goroutine ") != std::string::npos);
  CHECK(err.find("running") != std::string::npos);
}

TEST_CASE("main returns: destructors of unwinding goroutines make goro calls") {
  goro::chan<int> blocked;
  goro::chan<int> out(16);
  goro::chan<int> closed_by_dtor;
  goro::mutex mu;
  goro::wait_group done;
  std::atomic<int> finished{0};
  struct dtor_calls {
    goro::chan<int>* out;
    goro::chan<int>* closed;
    goro::mutex* mu;
    goro::wait_group* done;
    std::atomic<int>* finished;
    ~dtor_calls() {
      out->send(7);
      closed->close();
      mu->lock();
      mu->unlock();
      goro::yield();
      goro::sleep_for(1ms);
      done->done();
      finished->fetch_add(1);
    }
  };
  // A destructor that parks until another unwinding goroutine's destructor
  // signals it.
  struct dtor_waits {
    goro::wait_group* done;
    std::atomic<int>* finished;
    ~dtor_waits() {
      done->wait();
      finished->fetch_add(1);
    }
  };
  goro::run([&] {
    done.add(1);
    goro::go([&] {
      dtor_waits w{&done, &finished};
      (void)blocked.recv();
    });
    goro::go([&] {
      dtor_calls d{&out, &closed_by_dtor, &mu, &done, &finished};
      (void)blocked.recv();
    });
    wait_parked(3);
  });
  CHECK(finished.load() == 2);
  CHECK(out.try_recv() == 7);
  CHECK(!closed_by_dtor.recv());  // closed
}

TEST_CASE("main returns: an unwinding swallowed by catch (...) is raised again at the next goro call") {
  std::atomic<int> swallowed{0}, after{0}, unwound{0};
  goro::chan<int> c;
  goro::run([&] {
    goro::go([&] {
      raii r{&unwound};
      try {
        (void)c.recv();
      } catch (...) {
        swallowed.fetch_add(1);
      }
      goro::yield();
      after.fetch_add(1);
    });
    wait_parked(2);
  });
  CHECK(swallowed.load() == 1);
  CHECK(after.load() == 0);
  CHECK(unwound.load() == 1);
}

TEST_CASE("main returns: goro::exit's type is not a std::exception") {
  std::atomic<int> caught_std{0}, unwound{0};
  goro::chan<int> c;
  goro::run([&] {
    goro::go([&] {
      raii r{&unwound};
      try {
        (void)c.recv();
      } catch (const std::exception&) {
        caught_std.fetch_add(1);
      }
    });
    wait_parked(2);
  });
  CHECK(caught_std.load() == 0);
  CHECK(unwound.load() == 1);
}

TEST_CASE("main returns: an exception escaping main still propagates, after the goroutines ended") {
  std::atomic<int> unwound{0};
  goro::chan<int> c;
  CHECK_THROWS_AS(goro::run([&] {
                    goro::go([&] {
                      raii r{&unwound};
                      (void)c.recv();
                    });
                    wait_parked(2);
                    throw std::runtime_error("main failed");
                  }),
                  std::runtime_error);
  CHECK(unwound.load() == 1);
}

TEST_CASE("main returns: a lock_os_thread goroutine and one in goro::blocking end too") {
  std::atomic<int> unwound{0}, after{0};
  std::atomic<bool> in_call{false};
  goro::chan<int> c;
  goro::run([&] {
    goro::go([&] {
      raii r{&unwound};
      goro::lock_os_thread();
      (void)c.recv();
      after.fetch_add(1);
    });
    goro::go([&] {
      raii r{&unwound};
      goro::blocking([&] {
        in_call = true;
        std::this_thread::sleep_for(100ms);
      });
      after.fetch_add(1);  // the call returned: ends at its end, before this
    });
    REQUIRE(goro_test::eventually([&] { return in_call.load(); }));
    goro::sleep_for(10ms);
  });
  CHECK(unwound.load() == 2);
  CHECK(after.load() == 0);
}

TEST_CASE("main returns: goroutines spawned after main returned (timers, destructors) are discarded") {
  std::atomic<int> ran{0}, unwound{0};
  goro::chan<int> c;
  goro::run([&] {
    goro::go([&] {
      struct spawner {
        std::atomic<int>* ran;
        std::atomic<int>* unwound;
        ~spawner() {
          goro::go([r = ran] { r->fetch_add(1); });
          unwound->fetch_add(1);
        }
      } s{&ran, &unwound};
      (void)c.recv();
    });
    wait_parked(2);
  });
  CHECK(unwound.load() == 1);
  CHECK(ran.load() == 0);
}

TEST_CASE("main returns: a plain thread uses the channels afterwards") {
  goro::chan<int> c;
  std::atomic<int> unwound{0};
  goro::run([&] {
    goro::go([&] {
      raii r{&unwound};
      (void)c.recv();
    });
    wait_parked(2);
  });
  CHECK(unwound.load() == 1);
  std::thread t([&] { c.close(); });  // no stale waiter to wake
  t.join();
  CHECK(!c.recv());
}

TEST_CASE("main_return::wait: run's runtime serves until every goroutine has finished") {
  std::atomic<bool> finished{false};
  goro::options o;
  o.on_main_return = goro::main_return::wait;
  goro::run(
      [&] {
        goro::go([&] {
          goro::sleep_for(100ms);
          finished = true;
        });
      },
      o);
  CHECK(finished.load());
}

TEST_CASE("main_return::wait: rt.run returns when main does, the goroutines keep running") {
  std::atomic<bool> finished{false};
  goro::chan<int> c;
  goro::options o;
  o.on_main_return = goro::main_return::wait;
  {
    goro::runtime rt(o);
    rt.run([&] { goro::go([&] { finished = c.recv().has_value(); }); });
    CHECK(!finished.load());
    c.send(1);  // a plain thread feeds it
    REQUIRE(goro_test::eventually([&] { return finished.load(); }));
  }
  CHECK(finished.load());
}

TEST_CASE("runtime destructor: goroutines started by rt.go with no run end as when main returns") {
  std::atomic<int> unwound{0}, after{0};
  std::atomic<int> parked{0};
  goro::chan<int> c;
  const auto t0 = steady::now();
  {
    goro::runtime rt;
    for (int i = 0; i < 4; ++i)
      rt.go([&] {
        raii r{&unwound};
        parked.fetch_add(1);
        (void)c.recv();
        after.fetch_add(1);
      });
    REQUIRE(goro_test::eventually([&] { return parked.load() == 4; }));
    std::this_thread::sleep_for(20ms);
  }
  CHECK(unwound.load() == 4);
  CHECK(after.load() == 0);
  CHECK(seconds_since(t0) < 1.0);
}

TEST_CASE("runtime destructor with main_return::wait: waits for rt.go's goroutines") {
  std::atomic<bool> finished{false};
  goro::options o;
  o.on_main_return = goro::main_return::wait;
  {
    goro::runtime rt(o);
    rt.go([&] {
      goro::sleep_for(50ms);
      finished = true;
    });
  }
  CHECK(finished.load());
}

// SPEC: main_return::wait keeps the runtime serving "until every goroutine
// has finished (a server whose goroutines are fed by plain threads may want
// this)", and its shutdown may release goroutines as blocked forever only
// as run()'s deadlock check would report them: not while a plain thread
// that used a goro object is alive, nor within the grace period before its
// first call. The destructor released them after 10 ms, whatever the
// feeder: the values sent later stayed in the buffer.
TEST_CASE("main_return::wait: the destructor serves goroutines fed by a live plain thread") {
  std::atomic<int> got{0};
  goro::chan<int> c(8);  // buffered: a released receiver makes the sends land there, not hang
  std::thread feeder;
  {
    goro::runtime rt{goro::options{.maxprocs = 2, .on_main_return = goro::main_return::wait}};
    rt.run([&] {
      goro::go([&, c]() mutable {
        for (int v : c) got.fetch_add(v);
      });
      goro::sleep_for(5ms);  // the receiver waits: the feeder's sends reach the runtime
    });
    feeder = std::thread([c]() mutable {
      for (int i = 0; i < 4; ++i) {
        std::this_thread::sleep_for(60ms);  // past the old 10 ms, within the 250 ms grace
        c.send(1);
      }
      c.close();
    });
  }
  feeder.join();
  CHECK(got.load() == 4);
}

// SPEC: "With main_return::wait and detection off, a runtime whose
// goroutines can never run again waits forever": so however late the feeder
// comes, its goroutine is there to serve it.
TEST_CASE("main_return::wait with detection off: the destructor waits however long the feeder takes") {
  std::atomic<int> got{0};
  goro::chan<int> c(8);
  std::thread feeder;
  const auto t0 = steady::now();
  {
    goro::runtime rt{goro::options{.maxprocs = 2, .detect_deadlock = false, .on_main_return = goro::main_return::wait}};
    rt.go([&, c]() mutable {
      for (int v : c) got.fetch_add(v);
    });
    feeder = std::thread([c]() mutable {
      std::this_thread::sleep_for(400ms);  // longer than any grace period
      c.send(1);
      c.close();
    });
  }
  feeder.join();
  CHECK(got.load() == 1);
  CHECK(seconds_since(t0) >= 0.35);
}

TEST_CASE("main returns: many goroutines blocked on one channel all end") {
  const int n = goro_test::scale(2000, 200);
  std::atomic<int> unwound{0};
  goro::chan<int> c;
  goro::run([&] {
    for (int i = 0; i < n; ++i)
      goro::go([&] {
        raii r{&unwound};
        (void)c.recv();
      });
    wait_parked(static_cast<std::size_t>(n) + 1);
    // Every one blocked in recv (wait_parked's 20 ms was not always enough
    // under qemu on a loaded machine: one goroutine had not started, and a
    // goroutine not started when main returns is discarded unrun).
    REQUIRE(goro_test::eventually(
        [&] {
          std::size_t blocked = 0;
          for (const auto& gi : goro::goroutines()) blocked += gi.wait_reason == "chan receive";
          if (blocked < static_cast<std::size_t>(n)) goro::sleep_for(10ms);
          return blocked == static_cast<std::size_t>(n);
        },
        std::chrono::milliseconds(20000)));
  });
  CHECK(unwound.load() == n);
}

TEST_CASE("main returns: while a goroutine closes the channel many others wait on") {
  // The runtime ends the parked receivers while close() is waking them: a
  // receiver close() had popped (linked to the others it popped) was also
  // taken by the runtime's unlink, and readied twice (a crash in
  // run_goroutine within a few hundred rounds).
  const int rounds = goro_test::scale(300, 30);
  for (int round = 0; round < rounds; ++round) {
    std::atomic<bool> go_close{false};
    auto token = std::make_shared<int>(0);
    goro::run(
        [&] {
          goro::chan<int> ch;
          for (int i = 0; i < 100; ++i) goro::go([ch, token]() mutable { (void)ch.recv(); });
          goro::go([&, ch]() mutable {
            while (!go_close.load()) goro::yield();
            ch.close();
          });
          goro::sleep_for(1ms);
          go_close = true;
          for (int i = 0; i < (round % 7) * 300; ++i) asm volatile("");  // a varying delay before main returns
        },
        goro::options{static_cast<unsigned>(2 + round % 3)});
    REQUIRE(token.use_count() == 1);  // every goroutine ended (or was discarded unrun)
  }
}

TEST_CASE("main returns: an unwinding destructor waiting on a live plain thread is waited for") {
  // A goroutine's RAII guard hands off to a plain thread and waits for its
  // answer. When main returns, the goroutine unwinds and its destructor
  // parks in that wait: the plain thread (a live external M: it used a
  // channel that reached the runtime) can still wake it, so run() must wait
  // for it, as the deadlock rule would (SPEC: "It must never fire while a
  // plain thread can still make a goroutine runnable"). It returned within
  // a millisecond and the destructor then released the goroutine as
  // "blocked forever", its guard half run.
  std::atomic<bool> guard_done{false};
  goro::chan<int> answer(1);  // buffered: a released guard leaves the feeder's send in the buffer, no hang
  std::thread feeder;
  {
    goro::runtime rt{goro::options{.maxprocs = 2}};
    stderr_capture cap;
    const auto t0 = steady::now();
    rt.run([&] {
      goro::chan<int> hello, started;
      feeder = std::thread([&, hello]() mutable {
        hello.send(1);                       // main waits: reaches the runtime, counted from here on
        std::this_thread::sleep_for(400ms);  // past the 250 ms grace period
        answer.send(1);
      });
      hello.recv();
      goro::go([&] {
        struct guard {
          goro::chan<int>& a;
          std::atomic<bool>& done;
          ~guard() noexcept(false) {
            a.recv();
            done = true;
          }
        } g{answer, guard_done};
        started.send(1);
        goro::chan<int> never;
        never.recv();
      });
      started.recv();
    });
    const double took = seconds_since(t0);
    const std::string err = cap.finish();
    CHECK(guard_done.load());
    CHECK(took >= 0.3);
    CHECK(err.find("blocked forever") == std::string::npos);
    CHECK(err.find("reached no goro call") == std::string::npos);
  }
  feeder.join();
  CHECK(guard_done.load());
}
