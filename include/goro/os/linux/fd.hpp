// File descriptors: the self-pipe through which a signal handler wakes a
// thread (the signal relay, the goroutine dump), the tracer's output file,
// and plain reads and writes on them and on standard error.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace goro::detail::os {

// fds[0] the read end, fds[1] the write end, both close-on-exec (and
// non-blocking with `nonblocking`): 0 or an errno.
inline int open_pipe(int fds[2], bool nonblocking) noexcept {
  return ::pipe2(fds, O_CLOEXEC | (nonblocking ? O_NONBLOCK : 0)) == 0 ? 0 : errno;
}

// Waits until fd is readable, at most timeout_ms (< 0: no limit). False on
// a timeout or an interruption (EINTR).
inline bool wait_readable(int fd, int timeout_ms) noexcept {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) > 0;
}

// read(2) / write(2): the bytes moved, or -1 with errno set.
// Async-signal-safe.
inline long read_fd(int fd, void* buf, std::size_t n) noexcept { return static_cast<long>(::read(fd, buf, n)); }
inline long write_fd(int fd, const void* buf, std::size_t n) noexcept { return static_cast<long>(::write(fd, buf, n)); }

// 0 or an errno (the last write-back error of a file, for instance).
inline int close_fd(int fd) noexcept { return ::close(fd) == 0 ? 0 : errno; }

// Creates (or truncates) the file at path for writing, close-on-exec,
// mode 0666 less the umask: a descriptor, or -1 with errno set.
inline int create_file(const char* path) noexcept {
  return ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
}

inline constexpr int stderr_fd = STDERR_FILENO;

// Writes n bytes to standard error, async-signal-safely (no retry).
inline void write_stderr(const char* buf, std::size_t n) noexcept {
  ssize_t r = ::write(stderr_fd, buf, n);
  (void)r;
}

}  // namespace goro::detail::os
