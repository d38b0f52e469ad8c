// What the Linux layer does with signals (linux/signals.hpp), on Windows:
// the stack-overflow report (a vectored exception handler) and aborting.
// Absent, as said here and in docs/platforms.md:
//   - goro::signal: not ported (goro/signal.hpp stops the build with a
//     message), so no set_signal_handler & co. here;
//   - the goroutine dump on SIGQUIT: Windows has no SIGQUIT
//     (detail/dump_impl.hpp leaves it out); goro::goroutine_dump() works;
//   - per-thread signal stacks: none (thread_altstack holds nothing);
//   - asynchronous preemption: os/windows/preempt.hpp.
#pragma once

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
      OnFault(static_cast<std::uintptr_t>(
          r->NumberParameters >= 2 ? r->ExceptionInformation[1] : ep->ContextRecord->Rsp));
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

// Aborts the process; SIGABRT is reset to its default first so that a
// program's handler cannot resume it (Go's crash).
[[noreturn]] inline void abort_process() noexcept {
  std::signal(SIGABRT, SIG_DFL);
  std::abort();
}

}  // namespace goro::detail::os
