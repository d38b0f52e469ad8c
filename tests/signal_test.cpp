// signal::notify / stop: Go's os/signal relay to channels. On Windows the
// signals are console control events (SIGINT, SIGTERM): the cases at the
// end, under _WIN32; the POSIX ones (raise, kill, sigaction) are Linux-only.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>
#include <signal.h>
#if !defined(_WIN32)
#include <pthread.h>
#include <unistd.h>
#endif

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "test_util.hpp"

using namespace std::chrono_literals;

namespace {

// The next value on c within `limit`, or nullopt (never hangs).
std::optional<int> recv_within(goro::chan<int>& c, std::chrono::milliseconds limit = 5000ms) {
  std::optional<int> got;
  goro::select(goro::on_recv(c, [&](std::optional<int> v) { got = v; }),
               goro::on_recv(goro::after(limit), [](auto) {}));
  return got;
}

std::string usage_message(goro::chan<int> c, std::initializer_list<int> sigs) {
  try {
    goro::signal::notify(std::move(c), sigs);
  } catch (const goro::usage_error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

#if !defined(_WIN32)
namespace {

// A process-directed signal (kill) under ThreadSanitizer: TSan runs a
// signal's handler only when the thread the kernel picked reaches one of
// its interceptors, and a goro M asleep in a raw futex system call never
// does: the signal stays pending there. So under TSan the sending thread
// raises it on itself (thread-directed), which TSan delivers.
void send_to_process(int sig) {
#if GORO_TEST_TSAN
  ::raise(sig);
#else
  ::kill(::getpid(), sig);
#endif
}

std::atomic<int> own_handler_calls{0};
void own_handler(int) { own_handler_calls.fetch_add(1); }

}  // namespace

TEST_CASE("signal: a raised signal reaches the notified channel", "[signal]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> sigs(1);
    goro::signal::notify(sigs, {SIGUSR1});
    REQUIRE(::raise(SIGUSR1) == 0);
    CHECK(recv_within(sigs) == SIGUSR1);
    goro::signal::stop(sigs);
  });
}

TEST_CASE("signal: a signal sent from a plain thread with kill() is relayed", "[signal]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> sigs(1);
    goro::signal::notify(sigs, {SIGUSR2, SIGHUP});
    std::thread t([] { send_to_process(SIGHUP); });
    t.join();
    CHECK(recv_within(sigs) == SIGHUP);
    goro::signal::stop(sigs);
  });
}

TEST_CASE("signal: sends never block: a full channel misses the signal", "[signal]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> full(1), probe(1);
    full.send(0);  // no room for a signal
    goro::signal::notify(full, {SIGUSR1});
    goro::signal::notify(probe, {SIGUSR1});
    ::raise(SIGUSR1);
    // One relay pass offers the signal to both channels: once probe has it,
    // full's offer has been made (and refused).
    CHECK(recv_within(probe) == SIGUSR1);
    CHECK(full.recv() == 0);
    CHECK(!full.try_recv());
    goro::signal::stop(full);
    goro::signal::stop(probe);
  });
}

TEST_CASE("signal: every channel notified of a signal gets it; stop ends one", "[signal]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> a(1), b(1);
    goro::signal::notify(a, {SIGUSR1});
    goro::signal::notify(b, {SIGUSR1, SIGUSR2});
    ::raise(SIGUSR1);
    CHECK(recv_within(a) == SIGUSR1);
    CHECK(recv_within(b) == SIGUSR1);
    goro::signal::stop(a);
    ::raise(SIGUSR1);
    CHECK(recv_within(b) == SIGUSR1);
    CHECK(!a.try_recv());  // stopped before the signal
    goro::signal::stop(b);
    goro::signal::stop(b);  // twice: nothing happens
  });
}

TEST_CASE("signal: stop gives the signal its previous disposition back", "[signal]") {
  struct sigaction sa {}, old{};
  sa.sa_handler = &own_handler;
  sigemptyset(&sa.sa_mask);
  REQUIRE(sigaction(SIGUSR2, &sa, &old) == 0);
  own_handler_calls = 0;
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> sigs(1);
    goro::signal::notify(sigs, {SIGUSR2});
    ::raise(SIGUSR2);
    CHECK(recv_within(sigs) == SIGUSR2);
    CHECK(own_handler_calls.load() == 0);  // relayed instead
    goro::signal::stop(sigs);
    ::raise(SIGUSR2);  // the program's own handler again
    CHECK(own_handler_calls.load() == 1);
    CHECK(!sigs.try_recv());
  });
  sigaction(SIGUSR2, &old, nullptr);
}

TEST_CASE("signal: nil channels and signals that cannot be relayed are usage errors", "[signal][errors]") {
  goro::chan<int> c(1);
  CHECK(usage_message(goro::chan<int>(nullptr), {SIGINT}) == "goro: signal::notify using a nil channel");
  CHECK(usage_message(c, {SIGKILL}) == "goro: signal::notify: signal 9 cannot be relayed: cannot be caught");
  CHECK(usage_message(c, {SIGSEGV}).find("signal 11 cannot be relayed: a synchronous fault signal") !=
        std::string::npos);
  CHECK(usage_message(c, {SIGURG}).find("goro's preemption signal") != std::string::npos);
  CHECK(usage_message(c, {0}) == "goro: signal::notify: signal 0 cannot be relayed: not a signal number");
  CHECK(usage_message(c, {SIGUSR1, 1000}).find("signal 1000") != std::string::npos);
  // Nothing was registered by the failed calls: SIGUSR1 keeps its action.
  struct sigaction now {};
  sigaction(SIGUSR1, nullptr, &now);
  CHECK(now.sa_handler == SIG_DFL);
}

// Go's Notify(c) with no signals relays every signal. glibc (and musl)
// keep the first real-time signals, below SIGRTMIN, for their threads:
// sigaction refuses them (EINVAL), and notify(c, {}) threw that
// system_error after registering half the signals.
TEST_CASE("signal: an empty list relays every signal and skips the C library's reserved ones", "[signal]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> sigs(1);
    REQUIRE_NOTHROW(goro::signal::notify(sigs, {}));
    ::raise(SIGUSR1);
    CHECK(recv_within(sigs) == SIGUSR1);
    goro::signal::stop(sigs);
    struct sigaction now {};
    sigaction(SIGUSR1, nullptr, &now);
    CHECK(now.sa_handler == SIG_DFL);  // nothing left registered
  });
#if defined(SIGRTMIN)
  if (SIGRTMIN > 32) {
    goro::chan<int> c(1);
    CHECK(usage_message(c, {32}).find("goro: signal::notify: signal 32 cannot be relayed: reserved by the C library") ==
          0);
  }
#endif
}

// While a registration exists, a program whose goroutines only wait for a
// signal is not deadlocked (Go: the signal M sits in a system call); once
// every channel is stopped, a real deadlock is reported again.
TEST_CASE("signal: waiting for a signal is not a deadlock; after stop it is again", "[signal][deadlock]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> sigs(1);
    goro::signal::notify(sigs, {SIGUSR1});
    std::thread later([] {
      std::this_thread::sleep_for(800ms);  // well past the deadlock grace period
      send_to_process(SIGUSR1);
    });
    auto v = sigs.recv();  // nothing else can wake main for 800 ms
    later.join();
    CHECK(v == SIGUSR1);
    goro::signal::stop(sigs);
  });
  goro::runtime rt2{goro::options{2}};
  CHECK_THROWS_AS(rt2.run([] {
    goro::chan<int> c(0);
    goro::signal::notify(c, {SIGUSR1});
    goro::signal::stop(c);
    (void)c.recv();  // nobody sends: deadlock
  }),
                  goro::deadlock_error);
}
#else  // _WIN32

namespace {
// A console control event as the system's console thread delivers it:
// goro's handler in the chain SetConsoleCtrlHandler installed. The event
// number stands for the system's (dispatch_console_event is what
// goro's handler runs; it returns the signal relayed, 0 if none).
int console_event(DWORD event) { return goro::detail::os::dispatch_console_event(event); }
}  // namespace

// A real event, where the system can send one: GenerateConsoleCtrlEvent
// to this process's console (Wine: only with a console; without one the
// case says so and sends through goro's handler directly).
TEST_CASE("signal: Windows: a generated CTRL_BREAK_EVENT reaches the channel as SIGINT", "[signal]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> sigs(1);
    goro::signal::notify(sigs, {SIGINT});
    if (GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, 0)) {
      CHECK(recv_within(sigs) == SIGINT);
    } else {
      // Wine 8 without a terminal: no console, and AllocConsole fails too.
      WARN("GenerateConsoleCtrlEvent failed (error " << GetLastError()
                                                      << ": no console here): goro's registered handler is called directly");
      CHECK(goro::detail::os::console_ctrl_handler(CTRL_BREAK_EVENT) == TRUE);
      CHECK(recv_within(sigs) == SIGINT);
    }
    goro::signal::stop(sigs);
  });
}

TEST_CASE("signal: Windows: each console control event maps to SIGINT or SIGTERM, as in Go", "[signal]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> sigs(1);
    goro::signal::notify(sigs, {});  // both
    const std::pair<DWORD, int> events[] = {{CTRL_C_EVENT, SIGINT},
                                            {CTRL_BREAK_EVENT, SIGINT},
                                            {CTRL_CLOSE_EVENT, SIGTERM},
                                            {CTRL_LOGOFF_EVENT, SIGTERM},
                                            {CTRL_SHUTDOWN_EVENT, SIGTERM}};
    for (const auto& [event, sig] : events) {
      INFO("event " << event);
      CHECK(console_event(event) == sig);
      CHECK(recv_within(sigs) == sig);
    }
    CHECK(console_event(7) == 0);  // no such event: passed on
    goro::signal::stop(sigs);
  });
}

TEST_CASE("signal: Windows: sends never block: a full channel misses the signal", "[signal]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> full(1), probe(1);
    full.send(0);
    goro::signal::notify(full, {SIGINT});
    goro::signal::notify(probe, {SIGINT});
    console_event(CTRL_C_EVENT);
    CHECK(recv_within(probe) == SIGINT);
    CHECK(full.recv() == 0);
    CHECK(!full.try_recv());
    goro::signal::stop(full);
    goro::signal::stop(probe);
  });
}

TEST_CASE("signal: Windows: every channel notified gets the signal; stop ends one, then passes events on",
          "[signal]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> a(1), b(1);
    goro::signal::notify(a, {SIGTERM});
    goro::signal::notify(b, {SIGTERM, SIGINT});
    CHECK(console_event(CTRL_CLOSE_EVENT) == SIGTERM);
    CHECK(recv_within(a) == SIGTERM);
    CHECK(recv_within(b) == SIGTERM);
    goro::signal::stop(a);
    CHECK(console_event(CTRL_LOGOFF_EVENT) == SIGTERM);
    CHECK(recv_within(b) == SIGTERM);
    CHECK(!a.try_recv());
    goro::signal::stop(b);
    // No channel left: goro's handler passes the events on (to the
    // program's handlers, then the system's default).
    CHECK(console_event(CTRL_C_EVENT) == 0);
    CHECK(console_event(CTRL_CLOSE_EVENT) == 0);
    CHECK(goro::detail::os::console_ctrl_handler(CTRL_C_EVENT) == FALSE);
  });
}

TEST_CASE("signal: Windows: signals Windows cannot deliver are usage errors", "[signal][errors]") {
  goro::chan<int> c(1);
  CHECK(usage_message(goro::chan<int>(nullptr), {SIGINT}) == "goro: signal::notify using a nil channel");
  for (int sig : {SIGABRT, SIGSEGV, SIGFPE, SIGILL, 1}) {
    INFO("signal " << sig);
    CHECK(usage_message(c, {SIGINT, sig}).find("cannot be relayed: Windows delivers only SIGINT") !=
          std::string::npos);
  }
  CHECK(usage_message(c, {0}) == "goro: signal::notify: signal 0 cannot be relayed: not a signal number");
  CHECK(usage_message(c, {1000}).find("signal 1000") != std::string::npos);
  // Nothing was registered by the failed calls.
  CHECK(console_event(CTRL_C_EVENT) == 0);
}

TEST_CASE("signal: Windows: waiting for a signal is not a deadlock; after stop it is again", "[signal][deadlock]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> sigs(1);
    goro::signal::notify(sigs, {SIGINT});
    std::thread later([] {
      std::this_thread::sleep_for(800ms);  // well past the deadlock grace period
      console_event(CTRL_C_EVENT);
    });
    auto v = sigs.recv();
    later.join();
    CHECK(v == SIGINT);
    goro::signal::stop(sigs);
  });
  goro::runtime rt2{goro::options{2}};
  CHECK_THROWS_AS(rt2.run([] {
    goro::chan<int> c(0);
    goro::signal::notify(c, {SIGINT});
    goro::signal::stop(c);
    (void)c.recv();
  }),
                  goro::deadlock_error);
}

#endif  // _WIN32
