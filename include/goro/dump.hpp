// Seeing inside: the goroutine dump (Go's runtime.Stack(buf, true)).
//
// goro::goroutine_dump() describes every goroutine of every runtime in the
// process, as Go prints them:
//
//   goroutine 7 [chan receive, 3 minutes]:
//   wait_for_reply(goro::chan<int>&) +0x2a
//           /src/app/serve.cpp:12
//   ...
//   created by serve()
//           /src/app/serve.cpp:30
//
// goro::goroutines() returns the same as data. Wait reasons are recorded
// where goroutines park (detail/wait_reason.hpp); stacks come from the C++
// unwinder started at a parked goroutine's saved context (detail/
// unwind.hpp), so no frame pointers are needed; names come from the
// program's own symbol tables (detail/symbolize.hpp); with -g, files and
// lines, and a frame of its own for each call the compiler inlined, from
// its DWARF (detail/debug_frames.hpp; ELF and, MinGW-w64's, PE files).
//
// Consistency: the dump pins each waiting goroutine (g::dump_pin), runs
// membarrier() and then reads the goroutine's status; an M about to resume
// a goroutine sets its status to running and then checks the pin
// (dump_resume_check in g.hpp). This is the one place that owns that
// "publish, then check" pair: the membarrier makes the dumper's pin store
// visible to, or the M's status store visible from, every other thread, so
// a goroutine whose stack is being read never runs meanwhile. A running
// goroutine shows `running` and the M it runs on, without frames (except
// the one calling the dump, which unwinds itself). A record the dump did
// not pin may exit and be reused by a spawn while it is read: its id,
// runtime and creator are relaxed atomics for that (set_dump_field in g.hpp).
//
// Also here: SIGQUIT prints the dump on stderr and exits with status 2
// (unless the program had its own SIGQUIT handler, or GORO_DEBUG=sigquit=0),
// and the check that every GORO_DEBUG key is understood.
#pragma once
//
// This header declares the public calls; detail/dump_impl.hpp holds the
// runtime side (compiled once under GORO_SEPARATE_COMPILATION).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "detail/config.hpp"

namespace goro {

struct goroutine_info {
  std::uint64_t id = 0;
  std::string state;        // "waiting", "runnable" or "running"
  std::string wait_reason;  // what the dump shows in brackets: "chan receive", ..., "runnable", "running"
  std::chrono::nanoseconds waiting_for{0};  // since the wait began (waiting, or in a blocking call)
  std::vector<std::string> frames;          // innermost first: "function +0xOFF", "function (inlined)" (-g)
  std::vector<std::string> files;           // per frame: "/path/file.cpp:123" (-g), or empty
  std::string created_by;                   // the function that called go(); empty for main
  std::string created_by_file;              // the file:line of that go() call (-g), or empty
  bool locked_to_thread = false;            // inside goro::lock_os_thread(): ", locked to thread" in the dump
};

// Every goroutine of every runtime in the process, as data (sorted by id).
GORO_DECL std::vector<goroutine_info> goroutines();

// Every goroutine of every runtime in the process, in Go's format.
GORO_DECL std::string goroutine_dump();

namespace detail {

// The pc of the calling code (the function go() is inlined into), for
// "created by": no call, no frame pointer needed.
GORO_ALWAYS_INLINE const void* current_pc() noexcept {
  const void* pc;
#if defined(__x86_64__)
  asm volatile("leaq 0(%%rip), %0" : "=r"(pc));
#elif defined(__aarch64__)
  asm volatile("adr %0, ." : "=r"(pc));
#elif defined(__riscv)
  asm volatile("auipc %0, 0" : "=r"(pc));
#else
  pc = nullptr;
#endif
  return pc;
}

}  // namespace detail
}  // namespace goro

#if GORO_COMPILE_RUNTIME
#include "detail/dump_impl.hpp"
#endif
