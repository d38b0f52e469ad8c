// File descriptors of the C runtime (_pipe, _read, _write, _open): the
// pipe on which the goroutine dump's thread waits, the tracer's output
// file, and writes to standard error. The contract is linux/fd.hpp's.
#pragma once

#include <fcntl.h>
#include <io.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstddef>

#include "windows_h.hpp"

namespace goro::detail::os {

// fds[0] the read end, fds[1] the write end, neither inherited by child
// processes; with `nonblocking`, reads of an empty pipe fail at once
// (PIPE_NOWAIT, the only non-blocking mode anonymous pipes have): 0 or an errno.
inline int open_pipe(int fds[2], bool nonblocking) noexcept {
  if (_pipe(fds, 4096, _O_BINARY | _O_NOINHERIT) != 0) return errno;
  if (nonblocking) {
    DWORD mode = PIPE_READMODE_BYTE | PIPE_NOWAIT;
    for (int i = 0; i < 2; ++i) {
      if (!SetNamedPipeHandleState(reinterpret_cast<HANDLE>(_get_osfhandle(fds[i])), &mode, nullptr, nullptr)) {
        _close(fds[0]);
        _close(fds[1]);
        return EINVAL;
      }
    }
  }
  return 0;
}

// Waits until the pipe fd has bytes to read, at most timeout_ms (< 0: no
// limit); false on a timeout. Anonymous pipes cannot be waited on with a
// timeout on Windows, so this looks (PeekNamedPipe) every 100 ms: fine for
// its one user here, the dump thread, which wakes once a second anyway and
// whose pipe nothing writes on Windows (no SIGQUIT); not for anything
// latency-sensitive.
inline bool wait_readable(int fd, int timeout_ms) noexcept {
  const HANDLE h = reinterpret_cast<HANDLE>(_get_osfhandle(fd));
  const ULONGLONG start = GetTickCount64();
  for (;;) {
    DWORD avail = 0;
    if (!PeekNamedPipe(h, nullptr, 0, nullptr, &avail, nullptr)) return true;  // broken: a read reports it
    if (avail > 0) return true;
    DWORD slice = 100;
    if (timeout_ms >= 0) {
      const ULONGLONG waited = GetTickCount64() - start;
      if (waited >= static_cast<ULONGLONG>(timeout_ms)) return false;
      if (static_cast<ULONGLONG>(timeout_ms) - waited < slice) slice = static_cast<DWORD>(timeout_ms - waited);
    }
    Sleep(slice);
  }
}

// _read / _write: the bytes moved, or -1 with errno set.
inline long read_fd(int fd, void* buf, std::size_t n) noexcept {
  return static_cast<long>(_read(fd, buf, static_cast<unsigned>(n)));
}
inline long write_fd(int fd, const void* buf, std::size_t n) noexcept {
  return static_cast<long>(_write(fd, buf, static_cast<unsigned>(n)));
}

// 0 or an errno.
inline int close_fd(int fd) noexcept { return _close(fd) == 0 ? 0 : errno; }

// Creates (or truncates) the file at path (in the C runtime's code page)
// for writing, in binary mode (no "\n" -> "\r\n": the tracer writes binary),
// not inherited: a descriptor, or -1 with errno set.
inline int create_file(const char* path) noexcept {
  return _open(path, _O_WRONLY | _O_CREAT | _O_TRUNC | _O_BINARY | _O_NOINHERIT, _S_IREAD | _S_IWRITE);
}

inline constexpr int stderr_fd = 2;

// Writes n bytes to standard error (no retry).
inline void write_stderr(const char* buf, std::size_t n) noexcept {
  (void)_write(stderr_fd, buf, static_cast<unsigned>(n));
}

}  // namespace goro::detail::os
