// goro::signal: Go's os/signal Notify and Stop. OS signals are relayed to
// channels with non-blocking sends: a channel that is full when a signal
// arrives misses it (give it a buffer of 1 for one pending signal per kind,
// as Go advises).
//
//   goro::chan<int> sigs(1);
//   goro::signal::notify(sigs, {SIGINT, SIGTERM});
//   int sig = *sigs.recv();            // graceful shutdown from here
//   goro::signal::stop(sigs);          // SIGINT and SIGTERM act as before again
//
// How (Go's sigsend/signal_recv, with a thread instead of a goroutine): the
// handler, installed with sigaction for each notified signal, only sets the
// signal's bit in a pending mask, bumps a wake-up word and futex-wakes it
// (atomics and one system call: async-signal-safe, as Go's sigsend and
// notewakeup). One process-wide relay thread, started by the first notify,
// sleeps on that word, takes the pending mask and try-sends each signal to
// every channel registered for it. Signals of one kind that arrive before
// the relay thread runs are delivered once, as in Go. No file descriptor
// is involved: nothing is inherited by child processes, and on Windows the
// relay sleeps in WaitOnAddress, woken at once.
//
// Threads and masks: the handler runs on whichever thread the kernel picks
// (goro's Ms, the program's threads; none of them blocks these signals);
// the relay thread blocks every signal, so it never runs the handler. A
// signal raised by kill(), raise() or a terminal reaches the channel
// whichever thread took it.
//
// Deadlock detection: while any notify registration exists, the relay
// thread counts as a live external M (as Go's signal-receiving M sits in a
// system call): a program whose goroutines wait only for a signal is not
// deadlocked.
//
// Not relayed (notify with one of them is a usage_error): SIGKILL and
// SIGSTOP (they cannot be caught), the synchronous faults SIGSEGV, SIGBUS,
// SIGFPE, SIGILL and SIGTRAP (goro's stack-guard handler and debuggers own
// them), SIGURG (goro's preemption signal), and the real-time signals the C
// library keeps for its threads (Linux: 32 up to SIGRTMIN). An empty list
// relays every other signal. Notifying SIGQUIT replaces the goroutine dump on SIGQUIT
// until stop (Go: the same).
//
// Windows (os/windows/signals.hpp; Go's ctrlHandler): the signals are the
// console control events, SIGINT for CTRL_C_EVENT and CTRL_BREAK_EVENT,
// SIGTERM for CTRL_CLOSE_EVENT, CTRL_LOGOFF_EVENT and
// CTRL_SHUTDOWN_EVENT, and only those two can be notified (any other
// signal number is a usage_error: nothing would ever deliver it; an empty
// list means both). The system runs a console handler on a thread of its
// own, which plays the POSIX handler's part below (pending mask, wake-up
// word, WakeByAddressSingle), so a Ctrl+C reaches the channel as soon as
// the relay thread is scheduled. An event that no channel
// is notified of goes on to the handlers installed before goro's and then
// to the system's default (ending the process). After a SIGTERM event the
// system ends the process once the handler returns, so goro's handler, as
// Go's, never returns from one it relayed: the program has the system's
// grace period (5 s for a closed console window) to end on its own.
#pragma once

#include <signal.h>

#include <initializer_list>

#include "chan.hpp"
#include "detail/config.hpp"

namespace goro::signal {

// Go's signal.Notify: relays `signals` (every relayable signal if the list
// is empty) to c from now on, adding to what c already receives. A nil
// channel, or a signal that cannot be relayed (see the top of this file),
// is a usage_error naming it; nothing is registered then.
GORO_DECL void notify(chan<int> c, std::initializer_list<int> signals);

// Go's signal.Stop: c receives no more signals. For each signal no other
// channel is notified of, the disposition it had before the first notify
// returns (the default action, the program's own handler, or goro's
// SIGQUIT dump). A channel that was never notified: nothing happens. When
// stop returns, no more signals are sent to c.
GORO_DECL void stop(chan<int> c);

}  // namespace goro::signal

#if GORO_COMPILE_RUNTIME
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <mutex>
#include <string>
#include <vector>

#include "detail/extm.hpp"
#include "dump.hpp"  // install_dump_handlers
#include "error.hpp"
#include "os/os.hpp"

namespace goro {
namespace detail {

// Signals 1..max_signal (Linux: NSIG is 65, real-time signals included;
// MinGW-w64: 23).
inline constexpr int max_signal = NSIG - 1;

struct signal_mask {
  std::uint64_t bits[2] = {0, 0};
  void set(int sig) noexcept { bits[sig / 64] |= std::uint64_t{1} << (sig % 64); }
  bool has(int sig) const noexcept { return (bits[sig / 64] >> (sig % 64)) & 1; }
  void clear(int sig) noexcept { bits[sig / 64] &= ~(std::uint64_t{1} << (sig % 64)); }
  bool empty() const noexcept { return bits[0] == 0 && bits[1] == 0; }
};

// Why sig cannot be relayed, or nullptr.
inline const char* signal_not_relayable(int sig) noexcept {
  if (sig <= 0 || sig > max_signal) return "not a signal number";
#if defined(_WIN32)
  if (sig != SIGINT && sig != SIGTERM)
    return "Windows delivers only SIGINT (CTRL_C_EVENT, CTRL_BREAK_EVENT) and SIGTERM (CTRL_CLOSE_EVENT, "
           "CTRL_LOGOFF_EVENT, CTRL_SHUTDOWN_EVENT)";
  return nullptr;
#else
  switch (sig) {
    case SIGKILL:
    case SIGSTOP:
      return "cannot be caught";
    case SIGSEGV:
    case SIGBUS:
    case SIGFPE:
    case SIGILL:
    case SIGTRAP:
      return "a synchronous fault signal (goro's stack guard and debuggers own it)";
    case os::preempt_signal:
      return "goro's preemption signal";
    default:
      break;
  }
#if defined(SIGRTMIN)
  // The kernel's first real-time signals (32 up), below the C library's
  // SIGRTMIN, are its threads' own (glibc: cancellation, setxid):
  // sigaction refuses them, and an empty list threw that EINVAL.
  if (sig >= 32 && sig < SIGRTMIN) return "reserved by the C library";
#endif
  return nullptr;
#endif
}

// The process-wide relay: registrations, the saved dispositions, the
// handler's pending mask and wake-up word, the relay thread. Everything
// but the handler's atomics is guarded by mu.
struct signal_relay {
  struct registration {
    chan<int> c;
    signal_mask sigs;
  };

  std::mutex mu;
  std::vector<registration> regs;
  int watchers[NSIG] = {};             // registrations per signal
  os::signal_action saved[NSIG] = {};  // the disposition before the first notify
  bool thread_started = false;
  bool held = false;  // extm_hold(true) in effect
  std::atomic<std::uint64_t> pending[2] = {};
  std::atomic<std::uint32_t> wakeups{0};  // bumped by the handler after each pending bit

  static signal_relay& get() noexcept {
    static signal_relay* r = new signal_relay;  // never destroyed: the handler may run during exit
    return *r;
  }

  // The handler (Go's sigsend + notewakeup). Publish, then wake: the bit
  // goes in before the bump, both seq_cst; relay_main's side of the pair
  // is stated there.
  static void handler(int sig) noexcept {
    const int saved_errno = errno;  // the futex call may set it
    signal_relay& r = get();
    r.pending[sig / 64].fetch_or(std::uint64_t{1} << (sig % 64), std::memory_order_seq_cst);
    r.wakeups.fetch_add(1, std::memory_order_seq_cst);
    os::futex_wake(&r.wakeups, 1);
    errno = saved_errno;
  }

  // The relay thread (Go's signal_recv loop). Read the word, then take the
  // mask, then sleep only while the word is unchanged: a handler whose bit
  // the exchange missed set it after the exchange, so its bump comes after
  // our read of the word (seq_cst: one order of the four operations), and
  // the futex wait, seeing a different word, returns at once. A wake-up
  // for a bit already taken costs one empty round.
  static void* relay_main(void*) {
    extm_mark_internal();  // counted only through extm_hold, while registrations exist
    os::set_thread_name("goro-signal");  // process-wide
    signal_relay& r = get();
    for (;;) {
      const std::uint32_t seen = r.wakeups.load(std::memory_order_seq_cst);
      signal_mask got;
      got.bits[0] = r.pending[0].exchange(0, std::memory_order_seq_cst);
      got.bits[1] = r.pending[1].exchange(0, std::memory_order_seq_cst);
      if (!got.empty())
        r.deliver(got);
      else
        os::futex_wait(&r.wakeups, seen);  // returns at once if a handler bumped it since
    }
    return nullptr;
  }

  // Go's process(): a non-blocking send to every channel registered for
  // each signal. Under mu, so that once stop() returns nothing more is sent
  // to its channel (a send never blocks, and no goro lock is held across a
  // signal:: call). A closed channel is skipped (Go panics in its signal
  // goroutine; a runtime thread must not).
  void deliver(const signal_mask& got) {
    std::lock_guard<std::mutex> lk(mu);
    for (int sig = 1; sig <= max_signal; ++sig) {
      if (!got.has(sig)) continue;
      for (registration& reg : regs) {
        if (!reg.sigs.has(sig)) continue;
        int v = sig;
        (void)reg.c.impl()->offer(v);  // done, blocked (full: dropped, as in Go) or closed
      }
    }
  }

  // mu held. The relay thread, once.
  void start_locked() {
    if (thread_started) return;
    if (int err = os::start_daemon_thread(&relay_main, nullptr, 256 << 10))  // it blocks every signal
      raise_system(err, "signal::notify: cannot start the signal thread");
    thread_started = true;
  }

  // mu held. The first registration for sig installs the handler.
  void watch_locked(int sig) {
    if (watchers[sig]++ > 0) return;
    if (int err = os::set_signal_handler(sig, &signal_relay::handler, true, &saved[sig])) {
      --watchers[sig];
      raise_system(err, "signal::notify: sigaction");
    }
  }

  // mu held. The last registration for sig gone: its disposition returns.
  void unwatch_locked(int sig) noexcept {
    if (--watchers[sig] > 0) return;
    os::restore_signal_handler(sig, saved[sig]);
  }

  void update_hold_locked() noexcept {
    const bool want = !regs.empty();
    if (want != held) extm_hold(held = want);
  }
};

}  // namespace detail

namespace signal {

GORO_DECL void notify(chan<int> c, std::initializer_list<int> signals) {
  if (!c) detail::raise_usage("signal::notify using a nil channel");
  detail::signal_mask want;
  if (signals.size() == 0) {
    for (int sig = 1; sig <= detail::max_signal; ++sig)
      if (!detail::signal_not_relayable(sig)) want.set(sig);
  }
  for (int sig : signals) {
    if (const char* why = detail::signal_not_relayable(sig)) {
      const std::string what = "signal::notify: signal " + std::to_string(sig) + " cannot be relayed: " + why;
      detail::raise_usage(what.c_str());
    }
    want.set(sig);
  }
#if defined(SIGQUIT) && !defined(_WIN32)
  // goro's SIGQUIT dump goes in first (once per process, else at the first
  // runtime), so that it is the disposition saved here and stop restores,
  // as Go's is installed before any Notify. Installed after, it found our
  // relay handler, took it for the program's own and stayed off for good.
  if (want.has(SIGQUIT)) detail::install_dump_handlers();
#endif
  detail::signal_relay& r = detail::signal_relay::get();
  std::lock_guard<std::mutex> lk(r.mu);
  r.start_locked();
  detail::signal_relay::registration* reg = nullptr;
  for (auto& x : r.regs)
    if (x.c == c) reg = &x;
  if (!reg) {
    r.regs.push_back({c, {}});
    reg = &r.regs.back();
  }
  for (int sig = 1; sig <= detail::max_signal; ++sig) {
    if (!want.has(sig) || reg->sigs.has(sig)) continue;
    r.watch_locked(sig);  // may throw: what was added so far stays registered
    reg->sigs.set(sig);
  }
  r.update_hold_locked();
}

GORO_DECL void stop(chan<int> c) {
  detail::signal_relay& r = detail::signal_relay::get();
  std::lock_guard<std::mutex> lk(r.mu);
  for (auto it = r.regs.begin(); it != r.regs.end(); ++it) {
    if (!(it->c == c)) continue;
    for (int sig = 1; sig <= detail::max_signal; ++sig)
      if (it->sigs.has(sig)) r.unwatch_locked(sig);
    r.regs.erase(it);
    break;
  }
  r.update_hold_locked();
}

}  // namespace signal
}  // namespace goro
#endif  // GORO_COMPILE_RUNTIME
