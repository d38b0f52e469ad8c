// Why a goroutine waits (Go's waitReason), recorded at each park site with
// the time the wait began, for the goroutine dump (dump.hpp). Recording is
// two relaxed stores into the G record, no clock read (a vDSO clock read
// cost pingpong ~7%): the time is stamped afterwards, about once a second,
// by the dump thread (dump.hpp); the dump prints durations in minutes, as
// Go does.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace goro::detail {

enum class wait_reason : std::uint8_t {
  none,  // not waiting (running or runnable)
  chan_receive,
  chan_send,
  select,
  sleep,
  mutex_lock,
  wait_group_wait,
  cond_wait,
  semacquire,
  io_wait,
  blocking_call,     // running inside goro::blocking (Go's "syscall")
  chan_receive_nil,  // a receive on a nil channel: blocks forever
  chan_send_nil,     // a send on a nil channel: blocks forever
  select_no_cases,   // a select whose every case is on a nil channel
  rw_mutex_rlock,    // rw_mutex::lock_shared behind a writer (Go 1.20's name)
  rw_mutex_lock,     // rw_mutex::lock waiting for the readers inside to leave
  other,             // a park site that names no reason
};

// The names, indexed by wait_reason (also read by tools/goro-gdb.py through
// debug_info.hpp's anchor).
inline constexpr const char* wait_reason_names[] = {
    "",              // none
    "chan receive",  // chan_receive
    "chan send",
    "select",
    "sleep",
    "sync.Mutex.Lock",
    "sync.WaitGroup.Wait",
    "sync.Cond.Wait",
    "semacquire",
    "IO wait",
    "blocking call",
    "chan receive (nil chan)",  // Go's names for the three
    "chan send (nil chan)",
    "select (no cases)",
    "sync.RWMutex.RLock",
    "sync.RWMutex.Lock",
    "waiting",  // other
};
static_assert(sizeof(wait_reason_names) / sizeof(wait_reason_names[0]) ==
              static_cast<std::size_t>(wait_reason::other) + 1);

inline const char* wait_reason_name(wait_reason r) noexcept {
  const auto i = static_cast<std::size_t>(r);
  return i < sizeof(wait_reason_names) / sizeof(wait_reason_names[0]) ? wait_reason_names[i] : "waiting";
}

}  // namespace goro::detail
