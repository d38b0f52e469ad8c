// Helpers of the goro::net tests (net_test, net_ext_test, net_go_test),
// some of which differ between Linux and Windows.
#pragma once

#include <catch2/catch.hpp>
#include <goro/net.hpp>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <span>
#include <string>

#if defined(_WIN32)
#include <goro/os/windows/windows_h.hpp>
#else
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#endif

namespace goro_test {

// The process's CPU time in ms (std::clock is wall time on Windows).
inline double cpu_ms() {
#if defined(_WIN32)
  FILETIME c, e, k, u;
  GetProcessTimes(GetCurrentProcess(), &c, &e, &k, &u);
  auto t = [](FILETIME f) { return (static_cast<std::uint64_t>(f.dwHighDateTime) << 32) | f.dwLowDateTime; };
  return static_cast<double>(t(k) + t(u)) / 10'000.0;  // 100 ns units
#else
  return 1000.0 * static_cast<double>(std::clock()) / CLOCKS_PER_SEC;
#endif
}

// Something wait_readable can wait on: a non-blocking pipe on Linux; on
// Windows, whose poller waits on sockets only, a loopback TCP pair.
struct test_pipe {
#if defined(_WIN32)
  goro::net::conn rd, wr;
  test_pipe() {
    auto ln = goro::net::listen_tcp("127.0.0.1:0");
    wr = goro::net::dial_tcp("127.0.0.1:" + std::to_string(ln.port()));
    rd = ln.accept();
    ln.close();
  }
  goro::net::native_socket r() const { return rd.native_handle(); }
  goro::net::native_socket w() const { return wr.native_handle(); }
  bool put(char c) { return wr.write(std::as_bytes(std::span<const char>(&c, 1))), true; }
  int get() {
    char c = 0;
    return rd.read(std::as_writable_bytes(std::span<char>(&c, 1))) == 1 ? c : -1;
  }
#else
  int p[2] = {-1, -1};
  test_pipe() { REQUIRE(pipe2(p, O_NONBLOCK | O_CLOEXEC) == 0); }
  ~test_pipe() {
    close(p[0]);
    close(p[1]);
  }
  int r() const { return p[0]; }
  int w() const { return p[1]; }
  bool put(char c) { return write(p[1], &c, 1) == 1; }
  int get() {
    char c = 0;
    return read(p[0], &c, 1) == 1 ? c : -1;
  }
#endif
};

// "127.0.0.1:<port>": where a dial reaches ln.
inline std::string loopback(const goro::net::listener& ln) { return "127.0.0.1:" + std::to_string(ln.port()); }

// A string as the bytes a read fills.
inline std::span<std::byte> wbytes(std::string& s) {
  return std::as_writable_bytes(std::span<char>(s.data(), s.size()));
}

#if !defined(_WIN32)
// A Unix socket path of this process in /tmp: /tmp/goro-<file>-<pid>-<tag>.sock.
inline std::string unix_sock_path(const char* file, const char* tag) {
  return std::string("/tmp/goro-") + file + "-" + std::to_string(::getpid()) + "-" + tag + ".sock";
}
#endif

// A raw socket's calls the tests make themselves.
inline void close_native(goro::net::native_socket s) {
#if defined(_WIN32)
  closesocket(s);
#else
  close(s);
#endif
}
// SO_LINGER {1, 0}: close sends a reset.
inline void linger_reset(goro::net::native_socket s) {
  linger lg{1, 0};
  setsockopt(s, SOL_SOCKET, SO_LINGER, reinterpret_cast<const char*>(&lg), sizeof lg);
}
// FIONREAD: bytes waiting to be read, or -1.
inline long bytes_available(goro::net::native_socket s) {
#if defined(_WIN32)
  u_long n = 0;
  return ioctlsocket(s, FIONREAD, &n) == 0 ? static_cast<long>(n) : -1;
#else
  int n = 0;
  return ::ioctl(s, FIONREAD, &n) == 0 ? n : -1;
#endif
}

}  // namespace goro_test
