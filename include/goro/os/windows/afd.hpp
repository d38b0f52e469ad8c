// AFD poll requests: the readiness of sockets, delivered through an I/O
// completion port. AFD (the "ancillary function driver") is the kernel
// side of Winsock; IOCTL_AFD_POLL is what select() and WSAPoll are made
// of, and it accepts an OVERLAPPED-style completion, so a poll request
// finishes as one completion packet when any of the asked events holds
// (at once if one holds already). It is not in the Windows SDK's
// documented headers; the definitions below are the ones libuv, wepoll
// and mio rely on, and Wine implements the same (checked under Wine 8:
// accept, receive, send, peer close, local close, a refused connect and
// CancelIoEx all complete as on Windows).
//
// One request asks about one socket (its base handle: SIO_BASE_HANDLE,
// under any layered service provider) and is issued on a handle of our
// own to the AFD device (open_afd_handle), which is what is associated
// with the completion port: sockets themselves are never associated, so
// a socket may be waited on from any runtime's poller in turn.
#pragma once

#include "windows_h.hpp"
// (after <windows.h>)
#include <winternl.h>

#include <cstdint>

namespace goro::detail::os::afd {

// CTL_CODE(FILE_DEVICE_NETWORK, 9, METHOD_BUFFERED, FILE_ANY_ACCESS).
inline constexpr ULONG ioctl_poll = 0x00012024;

// Events (AFD_POLL_*). A request completes when any asked one holds; the
// handle's `events` then says which.
inline constexpr ULONG poll_receive = 0x0001;       // data (or a datagram) to read
inline constexpr ULONG poll_send = 0x0004;          // room to write; also a finished connect
inline constexpr ULONG poll_disconnect = 0x0008;    // the peer shut down its side (FIN)
inline constexpr ULONG poll_abort = 0x0010;         // the connection was reset
inline constexpr ULONG poll_local_close = 0x0020;   // the socket was closed here
inline constexpr ULONG poll_accept = 0x0080;        // a connection waits to be accepted
inline constexpr ULONG poll_connect_fail = 0x0100;  // a connect failed (SO_ERROR says why)
// (0x0040, "connect", is left out: Wine reports it on any connected
// socket, and a finished connect shows as poll_send anyway.)

// What a reader / writer waits for: its own event, or anything after which
// its call fails at once instead of blocking (Go's netpoll readies both
// directions on an error as well).
inline constexpr ULONG read_events =
    poll_receive | poll_accept | poll_disconnect | poll_abort | poll_local_close | poll_connect_fail;
inline constexpr ULONG write_events = poll_send | poll_abort | poll_local_close | poll_connect_fail;

struct poll_handle {
  HANDLE handle;  // the socket's base handle
  ULONG events;   // asked for; on completion, what holds
  NTSTATUS status;
};
// AFD_POLL_INFO with room for one handle; the output buffer is the input.
struct poll_info {
  LARGE_INTEGER timeout;  // absolute, 100 ns units: INT64_MAX is never
  ULONG count;            // handles (1)
  ULONG exclusive;        // FALSE: other requests on the socket stay
  poll_handle handles[1];
};

inline constexpr NTSTATUS status_pending = 0x00000103;
inline constexpr NTSTATUS status_cancelled = static_cast<NTSTATUS>(0xC0000120);

// A handle to the AFD device, for issuing poll requests on (synchronize
// access only: it is no socket), or nullptr and the NTSTATUS in *st.
inline HANDLE open_afd_handle(NTSTATUS* st) noexcept {
  // Any name under \Device\Afd opens the device; ours says who opened it.
  wchar_t name[] = L"\\Device\\Afd\\goro";
  UNICODE_STRING us;
  us.Buffer = name;
  us.Length = static_cast<USHORT>(sizeof name - sizeof(wchar_t));
  us.MaximumLength = static_cast<USHORT>(sizeof name);
  OBJECT_ATTRIBUTES oa;
  InitializeObjectAttributes(&oa, &us, 0, nullptr, nullptr);
  IO_STATUS_BLOCK iosb{};
  HANDLE h = nullptr;
  *st = NtCreateFile(&h, SYNCHRONIZE, &oa, &iosb, nullptr, 0, FILE_SHARE_READ | FILE_SHARE_WRITE, FILE_OPEN, 0, nullptr,
                     0);
  return *st == 0 ? h : nullptr;
}

// Starts a poll request on afd_handle for info's socket. Its completion
// packet carries `context` as the OVERLAPPED pointer; iosb (which must live
// until then, like info) is what CancelIoEx names to cancel it. Returns the
// NTSTATUS: status_pending or success (a packet will come), else a
// failure (none will).
inline NTSTATUS start_poll(HANDLE afd_handle, void* context, IO_STATUS_BLOCK* iosb, poll_info* info) noexcept {
  iosb->Status = status_pending;
  return NtDeviceIoControlFile(afd_handle, nullptr, nullptr, context, iosb, ioctl_poll, info, sizeof *info, info,
                               sizeof *info);
}

}  // namespace goro::detail::os::afd
