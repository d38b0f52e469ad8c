// The I/O readiness poller under detail/netpoll.hpp: an I/O completion
// port, and AFD poll requests (afd.hpp) completing on it. The counterpart
// of Go's netpoll_windows.go (netpollinit, netpollopen, netpollclose,
// netpoll, netpollBreak), with one difference: Go issues overlapped
// reads and writes and is woken by their completion; goro keeps the
// readiness model of the epoll poller (try the call, park on
// WSAEWOULDBLOCK until the socket is ready, try again), so detail/
// net_socket.hpp is the same code on both systems.
//
// AFD polls report readiness once per request, level-style (a request made
// while the socket is readable completes at once). So no request is
// outstanding while nobody waits: the goroutine about to park asks for its
// direction (arm(), from pd_block), and the completion readies it. Per
// descriptor and direction there is at most one request in flight (its
// poll_slot entry); a wait that ends by a deadline leaves it in flight for
// the next wait, so short deadlines in a loop do not pile requests up.
//
// An in-flight request (afd_op) is referenced by its slot entry and by the
// kernel (until its completion packet is dequeued); whoever drops the last
// reference frees it. remove() takes it out of the slot and cancels it.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <new>

#include "afd.hpp"
#include "windows_h.hpp"

namespace goro::detail::os {

// A socket as the system names it: SOCKET (UINT_PTR), not an int.
using socket_t = std::uintptr_t;
inline constexpr socket_t invalid_socket = ~socket_t{0};  // INVALID_SOCKET

struct afd_op;

// What the poller keeps per descriptor (in its poll_desc): the socket's
// base handle and each direction's request in flight ([0] read, [1] write).
struct poll_slot {
  std::atomic<afd_op*> op[2]{nullptr, nullptr};
  HANDLE base = nullptr;
};

// One poll request: what the kernel writes (iosb, info) and what its
// completion means (tag, direction).
struct afd_op {
  IO_STATUS_BLOCK iosb;
  afd::poll_info info;
  std::uint64_t tag;
  poll_slot* slot;
  int dir;
  std::atomic<int> refs{2};  // the slot entry's and the kernel's
};

inline void afd_op_unref(afd_op* op) noexcept {
  if (op->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete op;
}

// Readiness is asked for per wait (netpoll.hpp calls arm()).
inline constexpr bool poller_arms = true;

// One readiness event: the tag the request was made with (0: the wake-up)
// and its direction.
struct poll_event {
  std::uint64_t tag;
  bool readable;
  bool writable;
};

inline std::uint64_t event_tag(const poll_event& e) noexcept { return e.tag; }
inline bool event_readable(const poll_event& e) noexcept { return e.readable; }
inline bool event_writable(const poll_event& e) noexcept { return e.writable; }

class poller {
 public:
  poller() = default;
  poller(const poller&) = delete;
  poller& operator=(const poller&) = delete;

  // netpollinit: the completion port and our AFD handle, associated with
  // it; published (release) once both exist. 0, or an errno with *what
  // naming the call that failed (then nothing is left open).
  int open(const char** what) noexcept {
    HANDLE port = CreateIoCompletionPort(INVALID_HANDLE_VALUE, nullptr, 0, 0);
    if (!port) {
      *what = "CreateIoCompletionPort";
      return ENOMEM;
    }
    NTSTATUS st = 0;
    HANDLE h = afd::open_afd_handle(&st);
    if (!h) {
      CloseHandle(port);
      *what = "NtCreateFile(\\Device\\Afd): no AFD driver to poll sockets with";
      return ENOSYS;
    }
    if (!CreateIoCompletionPort(h, port, afd_key, 0)) {
      CloseHandle(h);
      CloseHandle(port);
      *what = "CreateIoCompletionPort(AFD handle)";
      return EIO;
    }
    // Completions go to the port only; nobody waits on the handle.
    SetFileCompletionNotificationModes(h, FILE_SKIP_SET_EVENT_ON_HANDLE);
    afd_ = h;
    port_.store(port, std::memory_order_release);
    return 0;
  }
  bool is_open() const noexcept { return port_.load(std::memory_order_acquire) != nullptr; }

  // Nobody may use it any more. Requests still in flight are cancelled and
  // their packets taken (a second at most), so their memory is freed and
  // no slot names them.
  void close() noexcept {
    HANDLE port = port_.load(std::memory_order_acquire);
    if (!port) return;
    CancelIoEx(afd_, nullptr);
    const ULONGLONG start = GetTickCount64();
    while (in_flight_.load(std::memory_order_acquire) > 0 && GetTickCount64() - start < 1000) {
      poll_event evs[16];
      wait(evs, 16, 10'000'000);
    }
    CloseHandle(afd_);
    CloseHandle(port);
  }

  // netpollopen: notes fd's base handle (no request yet: arm() makes them).
  // 0, or an errno. Unlike epoll, several descriptors may name one socket.
  int add(socket_t fd, std::uint64_t, poll_slot& slot) noexcept {
    SOCKET base = INVALID_SOCKET;
    DWORD n = 0;
    if (WSAIoctl(static_cast<SOCKET>(fd), SIO_BASE_HANDLE, nullptr, 0, &base, sizeof base, &n, nullptr, nullptr) != 0 ||
        base == INVALID_SOCKET)
      base = static_cast<SOCKET>(fd);  // no layered provider in the way (or an old one): the socket itself
    slot.base = reinterpret_cast<HANDLE>(base);
    // A previous poller's requests (the descriptor outlived its runtime)
    // were cancelled when that poller closed.
    slot.op[0].store(nullptr, std::memory_order_relaxed);
    slot.op[1].store(nullptr, std::memory_order_relaxed);
    return 0;
  }

  // netpollclose: cancels the requests in flight (before the socket is
  // closed; closing it would complete them too).
  void remove(socket_t, poll_slot& slot) noexcept {
    for (auto& e : slot.op) {
      if (afd_op* op = e.exchange(nullptr, std::memory_order_acq_rel)) {
        CancelIoEx(afd_, reinterpret_cast<OVERLAPPED*>(&op->iosb));
        afd_op_unref(op);  // the slot's reference: the memory lived through the cancel
      }
    }
  }

  // Asks for the next readiness of `mode` ('r' / 'w'), reported as an event
  // tagged `tag`, unless a request for it is in flight already. 0, or an
  // errno (ENOMEM; EBADF: the system refused the request).
  int arm(socket_t, std::uint64_t tag, poll_slot& slot, char mode) noexcept {
    const int dir = mode == 'r' ? 0 : 1;
    if (slot.op[dir].load(std::memory_order_acquire)) return 0;
    auto* op = new (std::nothrow) afd_op;
    if (!op) return ENOMEM;
    op->tag = tag;
    op->slot = &slot;
    op->dir = dir;
    op->info.timeout.QuadPart = INT64_MAX;
    op->info.count = 1;
    op->info.exclusive = FALSE;
    op->info.handles[0] = {slot.base, dir == 0 ? afd::read_events : afd::write_events, 0};
    afd_op* none = nullptr;
    if (!slot.op[dir].compare_exchange_strong(none, op, std::memory_order_acq_rel)) {
      delete op;  // another waiter's request just went out (wait_fd's descriptors are shared)
      return 0;
    }
    in_flight_.fetch_add(1, std::memory_order_relaxed);
    NTSTATUS st = afd::start_poll(afd_, op, &op->iosb, &op->info);
    if (st == afd::status_pending || st == 0) return 0;  // a packet will come, even for an immediate success
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    afd_op* mine = op;
    if (slot.op[dir].compare_exchange_strong(mine, nullptr, std::memory_order_acq_rel)) afd_op_unref(op);
    afd_op_unref(op);  // the kernel's: it will not complete
    return EBADF;
  }

  // netpoll's wait: up to max events into evs, waiting up to timeout_ns
  // (0: just looks; < 0: until an event or a wake()). Returns their number
  // (< 0 on failure). A wake() shows as an event tagged 0; one taken by a
  // look (0 ns) is posted again, so it keeps showing until a blocking
  // wait takes it (drain_wake has nothing left to do then).
  //
  // GetQueuedCompletionStatusEx waits in whole ms: rounded up (never early).
  int wait(poll_event* evs, int max, long long timeout_ns) noexcept {
    HANDLE port = port_.load(std::memory_order_acquire);
    OVERLAPPED_ENTRY ents[max_entries];
    ULONG want = static_cast<ULONG>(max < max_entries ? max : max_entries);
    DWORD ms = timeout_ns < 0 ? INFINITE : static_cast<DWORD>((timeout_ns + 999'999) / 1'000'000);
    ULONG n = 0;
    if (!GetQueuedCompletionStatusEx(port, ents, want, &n, ms, FALSE)) return GetLastError() == WAIT_TIMEOUT ? 0 : -1;
    int k = 0;
    bool repost = false;
    for (ULONG i = 0; i < n; ++i) {
      if (ents[i].lpCompletionKey != afd_key) {  // the wake-up
        evs[k++] = {0, false, false};
        repost = repost || timeout_ns == 0;
        continue;
      }
      auto* op = reinterpret_cast<afd_op*>(ents[i].lpOverlapped);
      const bool cancelled = op->iosb.Status == afd::status_cancelled;
      const poll_event ev{op->tag, op->dir == 0, op->dir == 1};
      afd_op* mine = op;
      // The slot's memory stays valid while a request may name it (poll
      // descriptors are recycled, never freed before the poller closes).
      if (op->slot->op[op->dir].compare_exchange_strong(mine, nullptr, std::memory_order_acq_rel)) afd_op_unref(op);
      afd_op_unref(op);
      in_flight_.fetch_sub(1, std::memory_order_release);
      // Any other completion (data, a close, a reset, even a failure to
      // poll) makes the waiter try its call again, which tells.
      if (!cancelled) evs[k++] = ev;
    }
    if (repost) wake();
    return k;
  }

  // netpollBreak: a packet with no request behind it (key wake_key).
  void wake() noexcept { PostQueuedCompletionStatus(port_.load(std::memory_order_acquire), 0, wake_key, nullptr); }
  // The blocking wait consumed the packet already.
  void drain_wake() noexcept {}

 private:
  static constexpr ULONG_PTR wake_key = 0;
  static constexpr ULONG_PTR afd_key = 1;
  static constexpr int max_entries = 64;

  std::atomic<HANDLE> port_{nullptr};
  HANDLE afd_ = nullptr;
  std::atomic<long> in_flight_{0};  // requests whose packet is still to come
};

}  // namespace goro::detail::os
