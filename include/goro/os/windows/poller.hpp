// The I/O readiness poller under detail/netpoll.hpp is not ported to
// Windows yet (issue 17: an I/O completion port, as Go's
// netpoll_windows.go). goro::net is the only user of the poller (goro/net.hpp
// stops the build on Windows with a message); the scheduler asks for it
// only when a descriptor is registered, and sleeps on its notes until then
// (timers and sleeps need no poller). If something still opens it,
// open() fails, and netpoller::init raises std::system_error naming this.
#pragma once

#include <cerrno>
#include <cstdint>

namespace goro::detail::os {

struct poll_event {
  std::uint64_t tag;
};

inline std::uint64_t event_tag(const poll_event& e) noexcept { return e.tag; }
inline bool event_readable(const poll_event&) noexcept { return false; }
inline bool event_writable(const poll_event&) noexcept { return false; }

class poller {
 public:
  poller() = default;
  poller(const poller&) = delete;
  poller& operator=(const poller&) = delete;

  // Never opens: ENOSYS, and *what says why.
  int open(const char** what) noexcept {
    *what = "the network poller (IOCP) is not ported to Windows yet (issue 17)";
    return ENOSYS;
  }
  bool is_open() const noexcept { return false; }
  void close() noexcept {}
  // Unreachable while the poller is closed (netpoll.hpp opens it first);
  // they refuse, and wait() reports nothing.
  int add(int, std::uint64_t) noexcept { return ENOSYS; }
  void remove(int) noexcept {}
  int wait(poll_event*, int, long long) noexcept { return -1; }
  void wake() noexcept {}
  void drain_wake() noexcept {}
};

}  // namespace goro::detail::os
