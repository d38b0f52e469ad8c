// Inside goro::blocking the goroutine's M has no P of its own (it is "in a
// system call", see blocking.hpp): the goroutine must not park (a channel
// operation that waits, select, sleep, a contended mutex, wait_group or
// cond wait, semaphore acquire) nor yield. The goro calls that would check
// here, at the point where they would park, before queueing anything, and
// raise usage_error "goro: <call> inside goro::blocking".
#pragma once

#include <string>

#include "../error.hpp"
#include "config.hpp"
#include "goexit.hpp"
#include "m.hpp"

namespace goro::detail {

[[noreturn]] GORO_NOINLINE inline void raise_inside_blocking(const char* call) {
  raise<usage_error>(std::string("goro: ") + call + " inside goro::blocking");
}

// Whether m (current_m(), or nullptr on a plain thread) runs a goroutine
// inside goro::blocking, where it must not park or yield.
GORO_ALWAYS_INLINE bool inside_blocking(const m_base* m) noexcept { return m != nullptr && m->in_blocking; }

// Raises usage_error naming `call` if the caller may not park here; ends
// the calling goroutine instead of parking if its runtime is ending its
// goroutines (main returned: goexit.hpp).
GORO_ALWAYS_INLINE void check_may_park(const char* call) {
  if (GORO_UNLIKELY(inside_blocking(current_m()))) raise_inside_blocking(call);
  call_point();
}

}  // namespace goro::detail
