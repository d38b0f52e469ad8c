// Sockets for goro::net (net_address.hpp, net.hpp, net_udp.hpp,
// detail/net_socket.hpp), beside the OS layer of os.hpp: only the network
// headers include it. Each system's file provides, in goro::detail::os
// (socket_t and invalid_socket come from its poller.hpp):
//   sock_len                            socklen_t / int
//   unix_sockets                        constexpr bool: AF_UNIX streams offered
//   net_startup()                       once before the first socket or lookup
//   socket_errno() -> errno             the failed call's error (WSA codes mapped)
//   errno_text(e) -> const char*        a message strerror lacks (Windows), or nullptr
//   open_socket(family, type, &err), accept_socket(s, sa, &len, &err),
//       dup_socket(s, &err) -> socket_t | invalid_socket   non-blocking, not inherited
//   close_socket(s)
//   socket_read / socket_send / socket_recvfrom / socket_sendto -> bytes | -1 and err
//   socket_connect -> 0 | EINPROGRESS | errno, socket_bind, socket_listen,
//       socket_shutdown_write, socket_name(s, peer, sa, &len), socket_take_error -> 0 | errno
//   socket_set_reuseaddr(s), socket_set_nodelay(s)
//   socket_poll(s, mode, timeout_ms) -> 1 | 0 | -errno   a plain thread's wait
//   gai_noname, gai_nodata, gai_addrfamily, gai_again, gai_system, gai_memory
//   unlink_path(path)
#pragma once

#include "os.hpp"

#if defined(__linux__)
#include "linux/socket.hpp"
#elif defined(_WIN64)
#include "windows/socket.hpp"
#endif
