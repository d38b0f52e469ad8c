// Asynchronous preemption (policy preemption::signal) is not ported to
// Windows yet (issue 17). Go's way, the one to port: sysmon suspends the
// goroutine's thread (SuspendThread), reads its registers
// (GetThreadContext), pushes a call to the yield path onto the goroutine's
// stack, writes them back (SetThreadContext) and resumes it
// (preemptM, os_windows.go).
//
// Until then a preemption::signal policy does not compile on Windows
// (detail/sched.hpp checks async_preemption_ported), and the names
// detail/async_preempt.hpp uses exist only so that it compiles: reaching
// any of them is a bug, reported and fatal.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "thread.hpp"

namespace goro::detail::os {

inline constexpr bool async_preemption_ported = false;

// The interrupted thread's state (a CONTEXT, once ported).
struct signal_context;

[[noreturn]] inline void async_preemption_missing() noexcept {
  std::fputs("goro: asynchronous preemption is not ported to Windows yet (issue 17)\n", stderr);
  std::abort();
}

inline std::uintptr_t context_pc(const signal_context*) noexcept { async_preemption_missing(); }
inline std::uintptr_t context_sp(const signal_context*) noexcept { async_preemption_missing(); }
inline bool push_sigreturn_call(signal_context*, std::uintptr_t, std::uintptr_t, std::uintptr_t,
                                std::uintptr_t) noexcept {
  async_preemption_missing();
}
template <bool (*Inject)(signal_context*) noexcept>
inline void install_preempt_handler() noexcept {
  async_preemption_missing();
}
inline void preempt_thread(thread_handle) noexcept { async_preemption_missing(); }

}  // namespace goro::detail::os
