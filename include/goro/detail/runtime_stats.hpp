// goro::runtime_stats: the counters basic_runtime::stats() returns.
#pragma once

#include <cstdint>

namespace goro {

// Counters since the runtime started (snapshots; exact when quiescent).
struct runtime_stats {
  std::uint64_t spawns = 0;         // goroutines created
  std::uint64_t exits = 0;          // goroutines finished
  std::uint64_t steals = 0;         // successful steals from another P
  std::uint64_t global_polls = 0;   // Gs taken from the global run queue
  std::uint64_t preemptions = 0;    // goroutines preempted by sysmon (they yielded at a safe point)
  std::uint64_t syscall_handoffs = 0;  // Ps handed to another M around goro::blocking calls
  std::uint64_t parks = 0;          // goroutines parked (blocked)
  std::uint64_t unparks = 0;        // goroutines readied
  std::uint64_t m_parks = 0;        // Ms that went to sleep for lack of work
  std::uint64_t m_spins = 0;        // times an M started spinning
  std::uint64_t threads = 0;        // OS threads (Ms) created
  std::uint64_t sysmon_parks = 0;   // times sysmon slept until a P got busy (every P idle for 1 ms)
};

}  // namespace goro
