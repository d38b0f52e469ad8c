// The I/O readiness poller under detail/netpoll.hpp: one epoll instance,
// edge-triggered, plus an eventfd whose readiness breaks a blocking wait
// (Go's netpoll_epoll.go: netpollinit, netpollopen, netpollclose, netpoll,
// netpollBreak).
#pragma once

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

namespace goro::detail::os {

// A socket as the system names it: a file descriptor.
using socket_t = int;
inline constexpr socket_t invalid_socket = -1;

// What the poller keeps per registered descriptor (in its poll_desc):
// nothing, epoll keeps it all.
struct poll_slot {};

// epoll reports readiness by itself once a descriptor is added: arm() is
// not needed (netpoll.hpp skips it).
inline constexpr bool poller_arms = false;

// One readiness event: the tag its fd was added with (0: the wake-up) and
// which directions became ready.
using poll_event = epoll_event;

inline std::uint64_t event_tag(const poll_event& e) noexcept { return e.data.u64; }
// Readable, or the peer hung up / an error is pending (a read returns it).
inline bool event_readable(const poll_event& e) noexcept {
  return (e.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
}
inline bool event_writable(const poll_event& e) noexcept { return (e.events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0; }

class poller {
 public:
  poller() = default;
  poller(const poller&) = delete;
  poller& operator=(const poller&) = delete;

  // netpollinit: the epoll instance and the wake-up eventfd, published
  // (release) once both exist. 0, or an errno with *what naming the call
  // that failed (then nothing is left open).
  int open(const char** what) noexcept {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) {
      *what = "epoll_create1";
      return errno;
    }
    int ev = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ev < 0) {
      int e = errno;
      ::close(ep);
      *what = "eventfd";
      return e;
    }
    // Level-triggered: it stays readable until the blocking poller reads it
    // (a non-blocking poll leaves it for the sleeper it was meant to wake).
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u64 = 0;  // the wake-up's tag
    if (epoll_ctl(ep, EPOLL_CTL_ADD, ev, &e) != 0) {
      int err = errno;
      ::close(ep);
      ::close(ev);
      *what = "epoll_ctl(eventfd)";
      return err;
    }
    evfd_ = ev;
    epfd_.store(ep, std::memory_order_release);
    return 0;
  }
  bool is_open() const noexcept { return epfd_.load(std::memory_order_acquire) >= 0; }
  // Nobody may use it any more.
  void close() noexcept {
    int ep = epfd_.load(std::memory_order_acquire);
    if (ep >= 0) {
      ::close(ep);
      ::close(evfd_);
    }
  }

  // netpollopen: reports fd's readiness in both directions, edge-triggered,
  // as events tagged `tag` (not 0). Adding reports the fd's current
  // readiness at once. 0 or an errno (EPERM: a regular file; EEXIST:
  // already added).
  int add(socket_t fd, std::uint64_t tag, poll_slot&) noexcept {
    epoll_event e{};
    e.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    e.data.u64 = tag;
    return epoll_ctl(epfd_.load(std::memory_order_acquire), EPOLL_CTL_ADD, fd, &e) != 0 ? errno : 0;
  }
  // netpollclose: no more events for fd (before it is closed).
  void remove(socket_t fd, poll_slot&) noexcept {
    epoll_event e{};
    epoll_ctl(epfd_.load(std::memory_order_acquire), EPOLL_CTL_DEL, fd, &e);
  }
  // Unused (poller_arms is false): edge-triggered events need no re-arming.
  int arm(socket_t, std::uint64_t, poll_slot&, char) noexcept { return 0; }

  // netpoll's wait: up to max events into evs, waiting up to timeout_ns
  // (0: just looks; < 0: until an event or a wake()). Returns their number
  // (< 0 when interrupted). A wake() shows as an event tagged 0, and keeps
  // showing until drain_wake().
  //
  // epoll_wait's timeout is in ms, so a timer 200 us away would sleep 1 ms;
  // epoll_pwait2 (Linux 5.11) takes a timespec. Called as a raw syscall
  // (glibc >= 2.35 only declares it); the first ENOSYS (older kernel,
  // qemu-user) switches to epoll_wait, rounding up (never early).
  int wait(poll_event* evs, int max, long long timeout_ns) noexcept {
    const int ep = epfd_.load(std::memory_order_acquire);
#ifdef __NR_epoll_pwait2
    static std::atomic<bool> no_pwait2{false};
    if (timeout_ns > 0 && !no_pwait2.load(std::memory_order_relaxed)) {
      timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000), static_cast<long>(timeout_ns % 1'000'000'000)};
      long r = ::syscall(__NR_epoll_pwait2, ep, evs, max, &ts, nullptr, 0);
      if (r >= 0 || errno != ENOSYS) return static_cast<int>(r);
      no_pwait2.store(true, std::memory_order_relaxed);
    }
#endif
    int ms = timeout_ns < 0 ? -1 : static_cast<int>((timeout_ns + 999'999) / 1'000'000);
    return epoll_wait(ep, evs, max, ms);
  }

  // netpollBreak's write: the next (or current) wait() returns with the
  // wake-up event. The poller must be open.
  void wake() noexcept {
    std::uint64_t one = 1;
    [[maybe_unused]] ssize_t r = ::write(evfd_, &one, sizeof one);
  }
  // Consumes the wake-ups written so far.
  void drain_wake() noexcept {
    std::uint64_t v;
    [[maybe_unused]] ssize_t r = ::read(evfd_, &v, sizeof v);
  }

 private:
  std::atomic<int> epfd_{-1};
  int evfd_ = -1;
};

}  // namespace goro::detail::os
