// What the Linux layer does with signals (linux/signals.hpp), on Windows:
// the stack-overflow report, per-thread signal stacks, the plain handlers
// of goro::signal and the SIGQUIT dump, and aborting. Only aborting is
// ported so far (issue 17); the rest is absent, each as said here and in
// docs/platforms.md:
//   - goro::signal: not ported (goro/signal.hpp stops the build with a
//     message), so no set_signal_handler & co. here;
//   - the goroutine dump on SIGQUIT: Windows has no SIGQUIT
//     (detail/dump_impl.hpp leaves it out); goro::goroutine_dump() works;
//   - asynchronous preemption: os/windows/preempt.hpp.
#pragma once

#include <csignal>
#include <cstdint>
#include <cstdlib>

namespace goro::detail::os {

// The stack-overflow report (detail/signals.hpp) is not ported: on Linux
// it runs on a per-thread alternate signal stack, and Windows dispatches
// an exception on the faulting stack itself, which an overflow has just
// used up. A goroutine that runs off its stack into the guard region below
// it (decommitted, stack_memory.hpp) ends the process with the system's
// access violation (0xC0000005) instead of goro's message. Stacks without
// a guard region still have their canary checked at each switch. The
// handler is not installed: nothing to do.
template <void (*OnFault)(std::uintptr_t) noexcept>
inline void install_fault_handler() noexcept {}

// Alternate signal stacks do not exist on Windows (see install_fault_handler):
// the per-thread object the runtime keeps holds nothing.
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
