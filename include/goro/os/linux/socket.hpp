// Sockets under goro::net (detail/net_socket.hpp, net.hpp, net_udp.hpp,
// net_address.hpp): the BSD calls, non-blocking. Failures are errno
// values, returned or stored in *err, read right after the call that
// failed (a goroutine cannot switch threads in between: DESIGN §7).
// The contract is what windows/socket.hpp provides too; socket_t and
// invalid_socket are in poller.hpp.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

#include "../../detail/config.hpp"
#include "poller.hpp"

namespace goro::detail::os {

using sock_len = socklen_t;

// AF_UNIX streams work here (listen_unix / dial_unix).
inline constexpr bool unix_sockets = true;

// The errno of the call that just failed. Not inlined: the caller's copy of
// &errno may be a thread's it no longer runs on (DESIGN §7).
[[gnu::noinline]] inline int socket_errno() noexcept {
  asm volatile("" ::: "memory");
  return errno;
}

// strerror knows every errno here: no text of goro's own (Windows has some).
inline const char* errno_text(int) noexcept { return nullptr; }

// Nothing to start on Linux (Winsock's WSAStartup elsewhere).
inline void net_startup() noexcept {}

// IPv6 zones by name ("%eth0"): the interface's index (0: none such), and
// an index's name into buf (interface_name_size bytes; false: none such).
// What if_nametoindex / if_indextoname do (SIOCGIFINDEX / SIOCGIFNAME on a
// throwaway socket), with the kernel's struct ifreq layout written here:
// <net/if.h> cannot be included, since a program that included
// <linux/if.h> first would then fail to compile (IFF_UP redeclared).
inline constexpr std::size_t interface_name_size = 16;  // IFNAMSIZ
struct interface_request {                               // struct ifreq
  char name[interface_name_size];
  union {
    int index;
    char pad[24];  // the union's size (struct ifmap)
  };
};
static_assert(sizeof(interface_request) == 40);
inline bool interface_ioctl(unsigned long request, interface_request& r) noexcept {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool ok = ::ioctl(fd, request, &r) == 0;
  ::close(fd);
  return ok;
}
inline unsigned interface_index(const char* name) noexcept {
  interface_request r{};
  std::size_t n = 0;
  while (name[n] != '\0') {
    if (n + 1 >= interface_name_size) return 0;  // too long for any interface
    r.name[n] = name[n];
    ++n;
  }
  if (n == 0 || !interface_ioctl(SIOCGIFINDEX, r) || r.index <= 0) return 0;
  return static_cast<unsigned>(r.index);
}
inline bool interface_name(unsigned index, char* buf) noexcept {
  interface_request r{};
  r.index = static_cast<int>(index);
  if (index == 0 || index > 0x7fffffffu || !interface_ioctl(SIOCGIFNAME, r)) return false;
  r.name[interface_name_size - 1] = '\0';
  for (std::size_t i = 0; i < interface_name_size; ++i) buf[i] = r.name[i];
  return true;
}

// A new non-blocking, close-on-exec socket, or invalid_socket and *err.
inline socket_t open_socket(int family, int type, int* err) noexcept {
  int fd = ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) *err = socket_errno();
  return fd;
}

// accept4: a non-blocking, close-on-exec socket, or invalid_socket and
// *err (EAGAIN: nobody is waiting to be accepted).
inline socket_t accept_socket(socket_t s, sockaddr* sa, sock_len* len, int* err) noexcept {
  int fd = ::accept4(s, sa, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) *err = socket_errno();
  return fd;
}

inline void close_socket(socket_t s) noexcept { ::close(s); }

// A copy of s for a second registration with the poller (wait_fd), or
// invalid_socket and *err.
inline socket_t dup_socket(socket_t s, int* err) noexcept {
  int fd = ::fcntl(s, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) *err = socket_errno();
  return fd;
}

// read(2) / send(2) as plain system calls: glibc's wrappers are
// thread-cancellation points, which costs two extra calls around each (a
// few per cent of a request/response server's CPU); Go makes raw system
// calls too. Under the sanitizers the wrappers stay: ThreadSanitizer
// intercepts them to see the happens-before edge a byte sent over a
// socket carries. The bytes moved, or -1 and *err.
inline long long socket_read(socket_t s, void* buf, std::size_t n, int* err) noexcept {
#if GORO_TSAN || GORO_ASAN
  long long r = ::read(s, buf, n);
#else
  long long r = ::syscall(SYS_read, s, buf, n);
#endif
  if (r < 0) *err = socket_errno();
  return r;
}
inline long long socket_send(socket_t s, const void* buf, std::size_t n, int* err) noexcept {
#if GORO_TSAN || GORO_ASAN
  long long r = ::send(s, buf, n, MSG_NOSIGNAL);
#else
  long long r = ::syscall(SYS_sendto, s, buf, n, MSG_NOSIGNAL, nullptr, 0);
#endif
  if (r < 0) *err = socket_errno();
  return r;
}
inline long long socket_recvfrom(socket_t s, void* buf, std::size_t n, sockaddr* from, sock_len* len,
                                 int* err) noexcept {
  long long r = ::recvfrom(s, buf, n, 0, from, len);
  if (r < 0) *err = socket_errno();
  return r;
}
inline long long socket_sendto(socket_t s, const void* buf, std::size_t n, const sockaddr* to, sock_len len,
                               int* err) noexcept {
  long long r = ::sendto(s, buf, n, MSG_NOSIGNAL, to, len);
  if (r < 0) *err = socket_errno();
  return r;
}

// 0 (connected), EINPROGRESS (wait until writable, then socket_take_error)
// or an errno.
inline int socket_connect(socket_t s, const sockaddr* sa, sock_len len) noexcept {
  return ::connect(s, sa, len) == 0 ? 0 : socket_errno();
}
inline int socket_bind(socket_t s, const sockaddr* sa, sock_len len) noexcept {
  return ::bind(s, sa, len) == 0 ? 0 : socket_errno();
}
inline int socket_listen(socket_t s) noexcept { return ::listen(s, SOMAXCONN) == 0 ? 0 : socket_errno(); }
inline int socket_shutdown_write(socket_t s) noexcept { return ::shutdown(s, SHUT_WR) == 0 ? 0 : socket_errno(); }
// getsockname / getpeername: 0 or an errno.
inline int socket_name(socket_t s, bool peer, sockaddr* sa, sock_len* len) noexcept {
  int r = peer ? ::getpeername(s, sa, len) : ::getsockname(s, sa, len);
  return r == 0 ? 0 : socket_errno();
}
// SO_ERROR (a finished connect's result): 0 or an errno.
inline int socket_take_error(socket_t s) noexcept {
  int e = 0;
  socklen_t len = sizeof e;
  if (::getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &len) != 0) return socket_errno();
  return e;
}
inline void socket_set_reuseaddr(socket_t s) noexcept {
  int one = 1;
  ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
}
inline void socket_set_nodelay(socket_t s) noexcept {
  int one = 1;
  ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// A plain thread's wait, poll(2): 1 ready ('r' readable, 'w' writable, or
// an error / hang-up pending), 0 after timeout_ms, or -errno (EBADF: not
// a descriptor; EINTR).
inline int socket_poll(socket_t s, char mode, int timeout_ms) noexcept {
  if (s < 0) return -EBADF;  // poll(2) skips a negative fd: it would only time out
  pollfd p{s, static_cast<short>(mode == 'r' ? POLLIN : POLLOUT), 0};
  int r = ::poll(&p, 1, timeout_ms);
  if (r < 0) return -socket_errno();
  if (r > 0 && (p.revents & POLLNVAL)) return -EBADF;
  return r;
}

// getaddrinfo's failures, for lookup_host.
inline constexpr int gai_noname = EAI_NONAME;
#ifdef EAI_NODATA
inline constexpr int gai_nodata = EAI_NODATA;
#else
inline constexpr int gai_nodata = EAI_NONAME;
#endif
#ifdef EAI_ADDRFAMILY
inline constexpr int gai_addrfamily = EAI_ADDRFAMILY;
#else
inline constexpr int gai_addrfamily = EAI_NONAME;
#endif
inline constexpr int gai_again = EAI_AGAIN;
inline constexpr int gai_system = EAI_SYSTEM;  // the errno says
inline constexpr int gai_memory = EAI_MEMORY;

// Removes a Unix listener's socket file.
inline void unlink_path(const char* path) noexcept { ::unlink(path); }

}  // namespace goro::detail::os
