// Why a goroutine waits (Go's waitReason), recorded at each park site with
// the time the wait began, for the goroutine dump (dump.hpp). Recording is
// two relaxed stores into the G record, no clock read (a vDSO clock read
// cost pingpong ~7%): the time is stamped afterwards, about once a second,
// by the dump thread (dump.hpp); the dump prints durations in minutes, as
// Go does.
#pragma once

#include <time.h>

#include <atomic>
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
  blocking_call,  // running inside goro::blocking (Go's "syscall")
  other,          // a park site that names no reason
};

inline const char* wait_reason_name(wait_reason r) noexcept {
  switch (r) {
    case wait_reason::none: return "";
    case wait_reason::chan_receive: return "chan receive";
    case wait_reason::chan_send: return "chan send";
    case wait_reason::select: return "select";
    case wait_reason::sleep: return "sleep";
    case wait_reason::mutex_lock: return "sync.Mutex.Lock";
    case wait_reason::wait_group_wait: return "sync.WaitGroup.Wait";
    case wait_reason::cond_wait: return "sync.Cond.Wait";
    case wait_reason::semacquire: return "semacquire";
    case wait_reason::io_wait: return "IO wait";
    case wait_reason::blocking_call: return "blocking call";
    case wait_reason::other: return "waiting";
  }
  return "waiting";
}

// CLOCK_MONOTONIC at tick granularity (a few ms), in nanoseconds. Only
// compared with itself (wait durations).
inline std::int64_t coarse_nanotime() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace goro::detail
