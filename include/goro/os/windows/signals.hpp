// What the Linux layer does with signals (linux/signals.hpp), on Windows:
// the stack-overflow report (a vectored exception handler), the console
// control events behind goro::signal (set_signal_handler & co., Go's
// ctrlHandler in os_windows.go) and aborting. Absent, as said here and in
// docs/platforms.md:
//   - the goroutine dump on SIGQUIT: Windows has no SIGQUIT
//     (detail/dump_impl.hpp leaves it out); goro::goroutine_dump() works;
//   - per-thread signal stacks: none (thread_altstack holds nothing);
//   - asynchronous preemption: os/windows/preempt.hpp.
#pragma once

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>

#include "windows_h.hpp"

namespace goro::detail::os {

// The stack-overflow report (detail/signals.hpp). Windows dispatches an
// exception on the faulting stack itself (no alternate stack), so what
// makes the report possible is the guard region's top zone
// (stack_memory.hpp): the first touch below a goroutine's stack hits its
// PAGE_GUARD page, the system raises STATUS_GUARD_PAGE_VIOLATION and
// builds the dispatcher's frame in the committed zone below, and this
// vectored handler, first in the chain, runs there: OnFault(address)
// reports and aborts when the address is below the current goroutine's
// stack, and otherwise the exception goes on to the program's handlers.
// Access violations (a guard region's decommitted part, reached only by
// code that skips the page probes) and STATUS_STACK_OVERFLOW are offered
// to OnFault as well. C++ exceptions (and every other code) pass through
// at the cost of one comparison.
template <void (*OnFault)(std::uintptr_t) noexcept>
inline LONG WINAPI fault_exception_handler(EXCEPTION_POINTERS* ep) noexcept {
  const EXCEPTION_RECORD* r = ep->ExceptionRecord;
  switch (r->ExceptionCode) {
    case STATUS_GUARD_PAGE_VIOLATION:
    case STATUS_ACCESS_VIOLATION:
      if (r->NumberParameters >= 2) OnFault(static_cast<std::uintptr_t>(r->ExceptionInformation[1]));
      break;
    case STATUS_STACK_OVERFLOW:
      OnFault(
          static_cast<std::uintptr_t>(r->NumberParameters >= 2 ? r->ExceptionInformation[1] : ep->ContextRecord->Rsp));
      break;
    default:
      break;
  }
  return EXCEPTION_CONTINUE_SEARCH;
}

// Installs OnFault as described above (a vectored exception handler,
// first in the chain). Call once per process.
template <void (*OnFault)(std::uintptr_t) noexcept>
inline void install_fault_handler() noexcept {
  AddVectoredExceptionHandler(1, &fault_exception_handler<OnFault>);
}

// Alternate signal stacks do not exist on Windows (the report runs on the
// guard region's zone instead, see install_fault_handler): the per-thread
// object the runtime keeps holds nothing.
class thread_altstack {
 public:
  thread_altstack() noexcept {}
  ~thread_altstack() {}  // user-provided, as Linux's: holding one is not an "unused variable"
  thread_altstack(const thread_altstack&) = delete;
  thread_altstack& operator=(const thread_altstack&) = delete;
  void detach() noexcept {}
};

// ---- Console control events as signals (goro::signal) ----
//
// Windows delivers no POSIX signals from outside the process; what a
// terminal's Ctrl+C, a closed console window or a log-off send are console
// control events, each run by the system on a new thread of the process
// through the handlers of SetConsoleCtrlHandler. As Go's ctrlHandler:
// CTRL_C_EVENT and CTRL_BREAK_EVENT are SIGINT; CTRL_CLOSE_EVENT,
// CTRL_LOGOFF_EVENT and CTRL_SHUTDOWN_EVENT are SIGTERM. No other signal
// arrives from outside (raise() runs the C runtime's signal() handlers
// only, in the raising thread), so goro::signal relays only these two
// (goro/signal.hpp's signal_not_relayable).

// The plain handlers of set_signal_handler, by signal (SIGINT, SIGTERM;
// null: not handled). Read by the console handler's thread, written
// under the relay's lock.
inline std::atomic<void (*)(int)>& console_signal_slot(int sig) noexcept {
  static std::atomic<void (*)(int)> slots[2] = {};
  return slots[sig == SIGTERM ? 1 : 0];
}

// The signal a console control event stands for, or 0.
inline int console_event_signal(DWORD event) noexcept {
  switch (event) {
    case CTRL_C_EVENT:
    case CTRL_BREAK_EVENT:
      return SIGINT;
    case CTRL_CLOSE_EVENT:
    case CTRL_LOGOFF_EVENT:
    case CTRL_SHUTDOWN_EVENT:
      return SIGTERM;
    default:
      return 0;
  }
}

// Runs the handler set for event's signal: its signal, or 0 when none is
// set (the event then goes on to the handlers installed before, and at
// the end of the chain to the system's default: ending the process).
inline int dispatch_console_event(DWORD event) noexcept {
  const int sig = console_event_signal(event);
  if (sig == 0) return 0;
  void (*fn)(int) = console_signal_slot(sig).load(std::memory_order_acquire);
  if (!fn) return 0;
  fn(sig);
  return sig;
}

// The handler goro installs, once (Go's ctrlHandler). After a SIGTERM
// event the system ends the process as soon as the handler returns (or
// after its own time limit, 5 s for CTRL_CLOSE_EVENT), so, as Go, it
// keeps the event's thread waiting for good: the program's goroutines
// get the signal and whatever time the system allows to end on their own.
inline BOOL WINAPI console_ctrl_handler(DWORD event) noexcept {
  const int sig = dispatch_console_event(event);
  if (sig == 0) return FALSE;
  if (sig == SIGTERM) Sleep(INFINITE);
  return TRUE;
}

// A signal's disposition as set_signal_handler saves it.
struct signal_action {
  void (*fn)(int) = nullptr;
};

// Installs handler(sig) for sig (SIGINT or SIGTERM, above; `restart` has
// no meaning here). The previous one goes to *saved when not null. 0, or
// EINVAL for another signal.
inline int set_signal_handler(int sig, void (*handler)(int), bool, signal_action* saved) noexcept {
  if (sig != SIGINT && sig != SIGTERM) return EINVAL;
  static const bool installed = SetConsoleCtrlHandler(&console_ctrl_handler, TRUE) != 0;
  if (!installed) return static_cast<int>(GetLastError() == ERROR_NOT_ENOUGH_MEMORY ? ENOMEM : EINVAL);
  void (*old)(int) = console_signal_slot(sig).exchange(handler, std::memory_order_acq_rel);
  if (saved) saved->fn = old;
  return 0;
}

// Puts back what set_signal_handler saved (null: the event passes on, as
// if goro's handler were not there).
inline void restore_signal_handler(int sig, const signal_action& saved) noexcept {
  if (sig == SIGINT || sig == SIGTERM) console_signal_slot(sig).store(saved.fn, std::memory_order_release);
}

// Aborts the process; SIGABRT is reset to its default first so that a
// program's handler cannot resume it (Go's crash).
[[noreturn]] inline void abort_process() noexcept {
  std::signal(SIGABRT, SIG_DFL);
  std::abort();
}

}  // namespace goro::detail::os
