// goro::blocking: run a call that may block in the kernel (a read on a
// pipe, a lock in a C library, a slow fsync...) without taking a P out of
// service for its duration. Go's entersyscall / exitsyscall; the scheduler
// side is in detail/sysmon.hpp.
//
//   auto n = goro::blocking([&] { return ::read(fd, buf, len); });
//   goro::blocking(goro::long_call, [&] { std::this_thread::sleep_for(1s); });
//
// The short form keeps the P reserved for this M, marked "in syscall": if
// the call returns quickly the goroutine simply carries on (the fast path
// costs two atomic operations). If it lasts longer than one sysmon round
// (>= 20 us) while there is other work, sysmon hands the P to another M.
// The long form (goro::long_call) hands the P off at once — for calls
// known to take long, it saves the wait for sysmon.
//
// On return the goroutine takes its old P back if nobody took it, else an
// idle P, else it waits in the global run queue like any runnable
// goroutine (and its thread parks). Exceptions from f propagate after
// that. Outside a goroutine (a plain thread), and when nested inside
// another blocking call, f is simply called.
//
// Inside f the goroutine has no P: it may spawn goroutines (they go to the
// global queue) but must not park on goro primitives (a channel operation
// or select that waits, sleep, a contended mutex, wait_group or cond wait)
// or yield: those raise usage_error "goro: <call> inside goro::blocking"
// (detail/inside_blocking.hpp). Block in the kernel only.
#pragma once

#include <exception>
#include <functional>
#include <type_traits>
#include <utility>

#include "detail/config.hpp"
#include "detail/m.hpp"
#include "runtime.hpp"

namespace goro {

// Tag for goro::blocking(goro::long_call, f): hand the P off immediately
// (Go's entersyscallblock).
struct long_call_t {
  explicit long_call_t() = default;
};
inline constexpr long_call_t long_call{};

namespace detail {

template <class F>
decltype(auto) blocking_call(bool long_call, F&& f) {
  m_base* m = current_m();
  // An M holding async-preempted goroutines lets its P go as well: if it
  // finds none when the call returns, it waits for one the way a locked M
  // does (sched.hpp park_pinned).
  if (!m || !m->curg || m->in_blocking) return std::invoke(std::forward<F>(f));
  g* gp = m->curg;  // goroutine dump: "blocking call" while inside
  gp->wait_since.store(0, std::memory_order_relaxed);  // stamped later (dump.hpp)
  gp->waiting_on.store(wait_reason::blocking_call, std::memory_order_relaxed);
  m->sched->enter_syscall(long_call);
  // exitsyscall on every way out, the exception path included; then a
  // pending preemption request is honoured (a runtime call that can switch).
  // main_return (detail/goexit.hpp): a goroutine whose runtime ended its
  // goroutines meanwhile ends here, as f returns (not while an exception
  // from f is propagating: that one goes on).
  struct exit_syscall_guard {
    g* gp;
    int uncaught = std::uncaught_exceptions();
    ~exit_syscall_guard() noexcept(false) {
      gp->waiting_on.store(wait_reason::none, std::memory_order_relaxed);
      current_m()->sched->exit_syscall();  // re-read: TLS rule (DESIGN.md section 7)
      if (std::uncaught_exceptions() == uncaught)
        call_point();
      else
        safe_point();
    }
  } guard{gp};
  return std::invoke(std::forward<F>(f));
}

}  // namespace detail

// Runs f(), which may block in the kernel, letting the scheduler give this
// goroutine's P to another thread if it blocks for long. Returns f's
// result (references too); f's exception propagates.
template <class F>
decltype(auto) blocking(F&& f) {
  return detail::blocking_call(false, std::forward<F>(f));
}

// The same, handing the P off before calling f (for calls expected to
// block for long: sleeping, waiting for a child process, ...).
template <class F>
decltype(auto) blocking(long_call_t, F&& f) {
  return detail::blocking_call(true, std::forward<F>(f));
}

}  // namespace goro
