// Sockets under goro::net: Winsock 2, with the contract of
// linux/socket.hpp. Sockets are SOCKET (socket_t, poller.hpp), made
// non-blocking and not inherited by child processes. Failures are errno
// values: Winsock's WSAE* codes are mapped to the errno a Linux system
// reports for the same condition (WSAECONNREFUSED -> ECONNREFUSED, ...),
// so a std::error_code from goro::net compares equal to the same
// std::errc on both systems. WSAStartup runs once, on first use.
//
// Unix sockets: unix_sockets is false. Winsock has AF_UNIX since Windows
// 10 1803, but Wine 8 (where goro's Windows build is tested) refuses the
// family (WSAEAFNOSUPPORT), so listen_unix / dial_unix are not offered on
// Windows: they fail with std::errc::address_family_not_supported.
#pragma once

#include "windows_h.hpp"
// (after windows_h.hpp: it includes <winsock2.h> before <windows.h>)
#include <afunix.h>
#include <ws2tcpip.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>

#include "poller.hpp"

namespace goro::detail::os {

using sock_len = int;

inline constexpr bool unix_sockets = false;

// IPv6 zones by name: not looked up here (if_nametoindex is iphlpapi's, a
// library goro does not link), so a zone is its number ("%12").
inline unsigned interface_index(const char*) noexcept { return 0; }
inline bool interface_name(unsigned, char*) noexcept { return false; }
inline constexpr std::size_t interface_name_size = 16;

// Winsock's codes as errno values (those MinGW-w64's <errno.h> and
// libstdc++'s std::errc use); anything else is EIO.
inline int errno_from_wsa(int e) noexcept {
  switch (e) {
    case 0:
      return 0;
    case WSAEWOULDBLOCK:
      return EWOULDBLOCK;
    case WSAEINPROGRESS:
      return EINPROGRESS;
    case WSAEALREADY:
      return EALREADY;
    case WSAEINTR:
      return EINTR;
    case WSAEBADF:
    case WSA_INVALID_HANDLE:
      return EBADF;
    case WSAEACCES:
      return EACCES;
    case WSAEFAULT:
      return EFAULT;
    case WSAEINVAL:
      return EINVAL;
    case WSAEMFILE:
      return EMFILE;
    case WSAENOTSOCK:
      return ENOTSOCK;
    case WSAEDESTADDRREQ:
      return EDESTADDRREQ;
    case WSAEMSGSIZE:
      return EMSGSIZE;
    case WSAEPROTOTYPE:
      return EPROTOTYPE;
    case WSAENOPROTOOPT:
      return ENOPROTOOPT;
    case WSAEPROTONOSUPPORT:
    case WSAESOCKTNOSUPPORT:
      return EPROTONOSUPPORT;
    case WSAEOPNOTSUPP:
      return EOPNOTSUPP;
    case WSAEAFNOSUPPORT:
    case WSAEPFNOSUPPORT:
      return EAFNOSUPPORT;
    case WSAEADDRINUSE:
      return EADDRINUSE;
    case WSAEADDRNOTAVAIL:
      return EADDRNOTAVAIL;
    case WSAENETDOWN:
      return ENETDOWN;
    case WSAENETUNREACH:
      return ENETUNREACH;
    case WSAENETRESET:
      return ENETRESET;
    case WSAECONNABORTED:
      return ECONNABORTED;
    case WSAECONNRESET:
      return ECONNRESET;
    case WSAENOBUFS:
    case WSA_NOT_ENOUGH_MEMORY:
      return ENOBUFS;
    case WSAEISCONN:
      return EISCONN;
    case WSAENOTCONN:
      return ENOTCONN;
    case WSAESHUTDOWN:
      return EPIPE;  // a send after close_write: EPIPE on Linux
    case WSAETIMEDOUT:
      return ETIMEDOUT;
    case WSAECONNREFUSED:
      return ECONNREFUSED;
    case WSAEHOSTUNREACH:
    case WSAEHOSTDOWN:
      return EHOSTUNREACH;
    default:
      return EIO;
  }
}

// Text for the errno values Winsock's codes map to: MinGW's C runtime
// has none for them (strerror(ECONNREFUSED) is "Unknown error"); the
// words are Linux's. nullptr for the others (the C runtime knows them).
inline const char* errno_text(int e) noexcept {
  switch (e) {
    case EWOULDBLOCK:
      return "Resource temporarily unavailable";
    case EINPROGRESS:
      return "Operation now in progress";
    case EALREADY:
      return "Operation already in progress";
    case ENOTSOCK:
      return "Socket operation on non-socket";
    case EDESTADDRREQ:
      return "Destination address required";
    case EMSGSIZE:
      return "Message too long";
    case EPROTOTYPE:
      return "Protocol wrong type for socket";
    case ENOPROTOOPT:
      return "Protocol not available";
    case EPROTONOSUPPORT:
      return "Protocol not supported";
    case EOPNOTSUPP:
      return "Operation not supported";
    case EAFNOSUPPORT:
      return "Address family not supported by protocol";
    case EADDRINUSE:
      return "Address already in use";
    case EADDRNOTAVAIL:
      return "Cannot assign requested address";
    case ENETDOWN:
      return "Network is down";
    case ENETUNREACH:
      return "Network is unreachable";
    case ENETRESET:
      return "Network dropped connection on reset";
    case ECONNABORTED:
      return "Software caused connection abort";
    case ECONNRESET:
      return "Connection reset by peer";
    case ENOBUFS:
      return "No buffer space available";
    case EISCONN:
      return "Transport endpoint is already connected";
    case ENOTCONN:
      return "Transport endpoint is not connected";
    case ETIMEDOUT:
      return "Connection timed out";
    case ECONNREFUSED:
      return "Connection refused";
    case EHOSTUNREACH:
      return "No route to host";
    case ECANCELED:
      return "Operation canceled";
    default:
      return nullptr;
  }
}

// The errno of the Winsock call that just failed (WSAGetLastError is per
// thread: read right after the call, as errno).
inline int socket_errno() noexcept { return errno_from_wsa(WSAGetLastError()); }

// WSAStartup, once per process (never undone: the runtime may outlive main).
inline void net_startup() noexcept {
  static const int started = [] {
    WSADATA d;
    return WSAStartup(MAKEWORD(2, 2), &d);
  }();
  (void)started;
}

// Non-blocking and not inherited: 0 or an errno.
inline int socket_setup(socket_t s) noexcept {
  u_long one = 1;
  if (ioctlsocket(static_cast<SOCKET>(s), FIONBIO, &one) != 0) return socket_errno();
  SetHandleInformation(reinterpret_cast<HANDLE>(s), HANDLE_FLAG_INHERIT, 0);
  return 0;
}

// A datagram socket's errors as Linux reports them: an ICMP "port
// unreachable" for an earlier datagram is WSAECONNRESET on Windows,
// ECONNREFUSED on Linux (which reports it on connected sockets only; a
// bound one has it turned off, socket_bind).
inline int dgram_errno(int wsa) noexcept { return wsa == WSAECONNRESET ? ECONNREFUSED : errno_from_wsa(wsa); }

inline void close_socket(socket_t s) noexcept { closesocket(static_cast<SOCKET>(s)); }

inline socket_t open_socket(int family, int type, int* err) noexcept {
  net_startup();
  SOCKET s = WSASocketW(family, type, 0, nullptr, 0, WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
  if (s == INVALID_SOCKET) {
    *err = socket_errno();
    return invalid_socket;
  }
  if (int e = socket_setup(s)) {
    closesocket(s);
    *err = e;
    return invalid_socket;
  }
  return s;
}

inline socket_t accept_socket(socket_t s, sockaddr* sa, sock_len* len, int* err) noexcept {
  SOCKET c = ::accept(static_cast<SOCKET>(s), sa, len);
  if (c == INVALID_SOCKET) {
    *err = socket_errno();
    return invalid_socket;
  }
  if (int e = socket_setup(c)) {
    closesocket(c);
    *err = e;
    return invalid_socket;
  }
  return c;
}

// Windows cannot duplicate a socket for a second poller registration, and
// needs none (any number of AFD polls may name one socket).
inline socket_t dup_socket(socket_t, int* err) noexcept {
  *err = ENOSYS;
  return invalid_socket;
}

// Winsock counts bytes in an int: longer buffers move in several calls.
inline int io_len(std::size_t n) noexcept { return n > INT_MAX ? INT_MAX : static_cast<int>(n); }

inline long long socket_read(socket_t s, void* buf, std::size_t n, int* err) noexcept {
  int r = ::recv(static_cast<SOCKET>(s), static_cast<char*>(buf), io_len(n), 0);
  if (r < 0) *err = socket_errno();
  return r;
}
inline long long socket_send(socket_t s, const void* buf, std::size_t n, int* err) noexcept {
  int r = ::send(static_cast<SOCKET>(s), static_cast<const char*>(buf), io_len(n), 0);
  if (r < 0) *err = socket_errno();
  return r;
}
// A datagram longer than buf: Linux returns the part that fits; Winsock
// fills buf and fails with WSAEMSGSIZE. Reported as Linux does.
inline long long socket_recvfrom(socket_t s, void* buf, std::size_t n, sockaddr* from, sock_len* len,
                                 int* err) noexcept {
  int r = ::recvfrom(static_cast<SOCKET>(s), static_cast<char*>(buf), io_len(n), 0, from, len);
  if (r < 0) {
    int e = WSAGetLastError();
    if (e == WSAEMSGSIZE) return io_len(n);
    *err = dgram_errno(e);
  }
  return r;
}
inline long long socket_sendto(socket_t s, const void* buf, std::size_t n, const sockaddr* to, sock_len len,
                               int* err) noexcept {
  int r = ::sendto(static_cast<SOCKET>(s), static_cast<const char*>(buf), io_len(n), 0, to, len);
  if (r < 0) *err = dgram_errno(WSAGetLastError());
  return r;
}

// A non-blocking connect in progress is WSAEWOULDBLOCK on Windows:
// EINPROGRESS, as on Linux.
inline int socket_connect(socket_t s, const sockaddr* sa, sock_len len) noexcept {
  if (::connect(static_cast<SOCKET>(s), sa, len) == 0) return 0;
  int e = socket_errno();
  return e == EWOULDBLOCK ? EINPROGRESS : e;
}
// A bound datagram socket (listen_udp) ignores ICMP "port unreachable"
// as an unconnected Linux socket does (Go turns it off the same way);
// the request fails harmlessly on a stream socket.
inline int socket_bind(socket_t s, const sockaddr* sa, sock_len len) noexcept {
  if (::bind(static_cast<SOCKET>(s), sa, len) != 0) return socket_errno();
  BOOL off = FALSE;
  DWORD n = 0;
  WSAIoctl(static_cast<SOCKET>(s), SIO_UDP_CONNRESET, &off, sizeof off, nullptr, 0, &n, nullptr, nullptr);
  return 0;
}
inline int socket_listen(socket_t s) noexcept {
  return ::listen(static_cast<SOCKET>(s), SOMAXCONN) == 0 ? 0 : socket_errno();
}
inline int socket_shutdown_write(socket_t s) noexcept {
  return ::shutdown(static_cast<SOCKET>(s), SD_SEND) == 0 ? 0 : socket_errno();
}
inline int socket_name(socket_t s, bool peer, sockaddr* sa, sock_len* len) noexcept {
  int r = peer ? ::getpeername(static_cast<SOCKET>(s), sa, len) : ::getsockname(static_cast<SOCKET>(s), sa, len);
  return r == 0 ? 0 : socket_errno();
}
inline int socket_take_error(socket_t s) noexcept {
  int e = 0;
  int len = sizeof e;
  if (::getsockopt(static_cast<SOCKET>(s), SOL_SOCKET, SO_ERROR, reinterpret_cast<char*>(&e), &len) != 0)
    return socket_errno();
  return errno_from_wsa(e);
}
// SO_EXCLUSIVEADDRUSE, not SO_REUSEADDR: on Windows the latter lets a
// second socket bind a port in use (Linux's SO_REUSEADDR only allows
// rebinding past TIME_WAIT, which Windows allows anyway).
inline void socket_set_reuseaddr(socket_t s) noexcept {
  BOOL one = TRUE;
  ::setsockopt(static_cast<SOCKET>(s), SOL_SOCKET, SO_EXCLUSIVEADDRUSE, reinterpret_cast<const char*>(&one),
               sizeof one);
}
inline void socket_set_nodelay(socket_t s) noexcept {
  BOOL one = TRUE;
  ::setsockopt(static_cast<SOCKET>(s), IPPROTO_TCP, TCP_NODELAY, reinterpret_cast<const char*>(&one), sizeof one);
}

// A plain thread's wait, WSAPoll: 1 ready, 0 after timeout_ms, or -errno.
inline int socket_poll(socket_t s, char mode, int timeout_ms) noexcept {
  if (s == invalid_socket) return -EBADF;  // WSAPoll ignores a "negative" one: it would only time out
  WSAPOLLFD p{static_cast<SOCKET>(s), static_cast<SHORT>(mode == 'r' ? POLLRDNORM : POLLWRNORM), 0};
  int r = WSAPoll(&p, 1, timeout_ms);
  if (r < 0) return -socket_errno();
  if (r > 0 && (p.revents & POLLNVAL)) return -EBADF;
  return r;
}

// getaddrinfo's failures (WSA codes on Windows), for lookup_host. Windows
// has no EAI_SYSTEM (the code is the error itself): a value it never returns.
inline constexpr int gai_noname = EAI_NONAME;
inline constexpr int gai_nodata = EAI_NODATA;
inline constexpr int gai_addrfamily = EAI_NONAME;
inline constexpr int gai_again = EAI_AGAIN;
inline constexpr int gai_system = INT_MIN;
inline constexpr int gai_memory = EAI_MEMORY;

inline void unlink_path(const char* path) noexcept { std::remove(path); }

}  // namespace goro::detail::os
