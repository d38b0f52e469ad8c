// goro's error types. Every message starts with "goro: ". Built with
// -fno-exceptions, raising one prints its message and aborts instead.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>

#include "detail/config.hpp"

namespace goro {

// Base of all goro errors.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An API was called where it cannot work (e.g. yield() outside a goroutine).
class usage_error : public error {
 public:
  using error::error;
};

// Send on, or close of, a closed channel.
class channel_closed : public error {
 public:
  using error::error;
};

// All goroutines are asleep.
class deadlock_error : public error {
 public:
  using error::error;
};

// A deadline passed.
class timeout_error : public error {
 public:
  using error::error;
};

namespace detail {

// Prints `msg` on stderr and aborts; used where an error cannot propagate.
// Out of line under separate compilation: the user's files neither build
// the messages nor instantiate the throws.
[[noreturn]] GORO_DECL void fatal(const char* msg) noexcept;
[[noreturn]] GORO_DECL void raise_usage(const char* what);
[[noreturn]] GORO_DECL void raise_system(int err, const char* what);
[[noreturn]] GORO_DECL void raise_bad_alloc();

template <class E>
[[noreturn]] inline void raise(const std::string& msg) {
#if GORO_EXCEPTIONS
  throw E(msg);
#else
  fatal(msg.c_str());
#endif
}


}  // namespace detail
}  // namespace goro

#if GORO_COMPILE_RUNTIME
namespace goro::detail {

[[noreturn]] GORO_DECL void fatal(const char* msg) noexcept {
  std::fputs(msg, stderr);
  std::fputc('\n', stderr);
  std::fflush(stderr);
  std::abort();
}

[[noreturn]] GORO_DECL void raise_usage(const char* what) { raise<usage_error>(std::string("goro: ") + what); }

[[noreturn]] GORO_DECL void raise_system(int err, const char* what) {
#if GORO_EXCEPTIONS
  throw std::system_error(err, std::generic_category(), std::string("goro: ") + what);
#else
  std::fprintf(stderr, "goro: %s: %s\n", what, std::generic_category().message(err).c_str());
  std::abort();
#endif
}

[[noreturn]] GORO_DECL void raise_bad_alloc() {
#if GORO_EXCEPTIONS
  throw std::bad_alloc();
#else
  fatal("goro: out of memory");
#endif
}

}  // namespace goro::detail
#endif  // GORO_COMPILE_RUNTIME
