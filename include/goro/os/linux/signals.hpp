// Signals: the fault handler behind stack-overflow reports, the preemption
// signal and its handler, per-thread alternate signal stacks, and plain
// handlers for the signal relay and the goroutine dump (Go's
// signal_unix.go: initsig / sighandler / preemptM / minitSignalStack, and
// os_linux.go: signalM). Handlers that do nothing with a signal pass it on
// to the one installed before goro's.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "signal_context.hpp"
#include "stack_memory.hpp"
#include "thread.hpp"

namespace goro::detail::os {

// The signal sent to a thread to preempt the goroutine it runs (as Go:
// SIGURG, which programs rarely use and whose default action is to ignore it).
inline constexpr int preempt_signal = SIGURG;

// The disposition installed before goro's, for the signals goro handles
// itself (the faults and the preemption signal).
inline struct sigaction& previous_action(int sig) noexcept {
  static struct sigaction segv, bus, urg;
  return sig == SIGBUS ? bus : sig == preempt_signal ? urg : segv;
}

// Runs the handler installed before goro's for sig, if there is one (not
// the default action, not ignore); false if there was none.
inline bool call_previous_handler(int sig, siginfo_t* info, void* ctx) noexcept {
  struct sigaction& prev = previous_action(sig);
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
    prev.sa_sigaction(sig, info, ctx);
    return true;
  }
  if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler != nullptr) {
    prev.sa_handler(sig);
    return true;
  }
  return false;
}

template <void (*OnFault)(std::uintptr_t) noexcept>
inline void fault_signal_handler(int sig, siginfo_t* info, void* ctx) noexcept {
  OnFault(reinterpret_cast<std::uintptr_t>(info->si_addr));
  // Not ours: hand over to whatever was installed before. Without one,
  // restore the default action; returning re-executes the faulting
  // instruction, which now kills the process with the right signal.
  if (!call_previous_handler(sig, info, ctx)) ::signal(sig, SIG_DFL);
}

// Installs OnFault(fault address) as the handler of memory faults
// (SIGSEGV, SIGBUS), on the alternate signal stack. OnFault either does
// not return (it reported the fault) or leaves the fault to the previous
// handler, else to the default action. Call once per process.
template <void (*OnFault)(std::uintptr_t) noexcept>
inline void install_fault_handler() noexcept {
  for (int sig : {SIGSEGV, SIGBUS}) {
    struct sigaction sa {};
    sa.sa_sigaction = &fault_signal_handler<OnFault>;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, &previous_action(sig));
  }
}

template <bool (*Inject)(signal_context*) noexcept>
inline void preempt_signal_handler(int sig, siginfo_t* info, void* ctx) noexcept {
  if (Inject(static_cast<signal_context*>(ctx))) return;
  // Not a preemption we can take: the application's handler, if any
  // (SIGURG's default action is to ignore it).
  call_previous_handler(sig, info, ctx);
}

// Installs Inject(interrupted context) as the preemption signal's handler,
// on the alternate signal stack: it returns true when it rewrote the
// context (push_sigreturn_call); otherwise the previous handler runs.
// Call once per process.
template <bool (*Inject)(signal_context*) noexcept>
inline void install_preempt_handler() noexcept {
  struct sigaction sa {};
  sa.sa_sigaction = &preempt_signal_handler<Inject>;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(preempt_signal, &sa, &previous_action(preempt_signal));
}

// Sends the preemption signal to thread t (Go's preemptM / signalM). t
// must still exist; it may run something else by then. The handler
// (install_preempt_handler) decides on t itself, from its own M: Inject
// and m are for systems where the caller decides (os/windows/preempt.hpp).
template <class M, bool (*Inject)(signal_context*, M*) noexcept>
inline void preempt_thread(thread_handle t, M*) noexcept {
  pthread_kill(t, preempt_signal);
}

// The thread handle sysmon preempts the calling thread through, and its
// release (nothing to open or close here: a pthread_t).
inline thread_handle open_preemption_target() noexcept { return current_thread(); }
inline void close_preemption_target(thread_handle&) noexcept {}

// Whether an interrupted pc may be preempted as far as the OS layer is
// concerned (Windows excludes system DLLs); on Linux any pc.
inline bool pc_preemptible(std::uintptr_t) noexcept { return true; }

// An alternate signal stack for the calling thread (so the fault handler
// can run when the goroutine's stack is exhausted). Restores the previous
// one on destruction (Go's minitSignalStack / unminitSignals).
class thread_altstack {
 public:
  static constexpr std::size_t size = 64 * 1024;

  thread_altstack() noexcept {
    stack_t old{};
    if (sigaltstack(nullptr, &old) == 0 && !(old.ss_flags & SS_DISABLE) &&
        old.ss_size >= static_cast<std::size_t>(MINSIGSTKSZ)) {
      return;  // the thread already has one (e.g. set up by the application); keep it
    }
    mem_ = map_memory(size);
    if (!mem_) return;
    stack_t st{};
    st.ss_sp = mem_;
    st.ss_size = size;
    st.ss_flags = 0;
    if (sigaltstack(&st, nullptr) != 0) {
      unmap_memory(mem_, size);
      mem_ = nullptr;
    }
  }
  ~thread_altstack() {
    if (!mem_) return;
    stack_t st{};
    st.ss_flags = SS_DISABLE;
    sigaltstack(&st, nullptr);
    unmap_memory(mem_, size);
  }
  thread_altstack(const thread_altstack&) = delete;
  thread_altstack& operator=(const thread_altstack&) = delete;
  // Leaves the stack installed and mapped (destroyed on another thread
  // than the one it was installed on: that thread may still take signals).
  void detach() noexcept { mem_ = nullptr; }

 private:
  void* mem_ = nullptr;
};

// A signal's disposition, as saved by set_signal_handler.
using signal_action = struct sigaction;

// Installs handler(sig) for sig, run on the alternate signal stack; with
// `restart`, system calls it interrupts are restarted (SA_RESTART). The
// previous disposition goes to *saved when not null. 0 or an errno.
inline int set_signal_handler(int sig, void (*handler)(int), bool restart, signal_action* saved) noexcept {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sa.sa_flags = (restart ? SA_RESTART : 0) | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  return sigaction(sig, &sa, saved) == 0 ? 0 : errno;
}

// Puts back a disposition set_signal_handler saved.
inline void restore_signal_handler(int sig, const signal_action& saved) noexcept { sigaction(sig, &saved, nullptr); }

// Whether the program handles sig itself: a handler other than the default
// action or ignore (an inherited ignore does not count). True also when
// the disposition cannot be read: then leave it alone.
inline bool signal_has_handler(int sig) noexcept {
  struct sigaction old {};
  if (sigaction(sig, nullptr, &old) != 0) return true;
  return (old.sa_flags & SA_SIGINFO) || (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN);
}

// Aborts the process; SIGABRT is reset to its default first so that a
// program's handler cannot resume it (Go's crash).
[[noreturn]] inline void abort_process() noexcept {
  ::signal(SIGABRT, SIG_DFL);
  std::abort();
}

}  // namespace goro::detail::os
