// Whether the machine has more than one CPU online, read once and cached
// (Go's ncpu, set in schedinit). Spinning for a mutex pays only when its
// owner can run at the same time (sync.hpp). Read before any goroutine
// runs (resolve_runtime_symbols, signals.hpp): the first read goes to
// sysconf, which parses /sys with a buffer on the stack, too deep for a
// small goroutine stack.
#pragma once

#include <atomic>

#include "../os/os.hpp"

namespace goro::detail {

inline bool multicore() noexcept {
  static std::atomic<int> cached{-1};  // a constant-initialised atomic: no guard
  int v = cached.load(std::memory_order_relaxed);
  if (v < 0) {
    v = os::online_cpus() > 1 ? 1 : 0;
    cached.store(v, std::memory_order_relaxed);
  }
  return v != 0;
}

}  // namespace goro::detail
