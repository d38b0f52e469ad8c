// Stacks for the goroutine dump on Windows x64 (detail/unwind.hpp's
// interface). The system's table-driven unwinder does it: each function
// compiled for Win64 has unwind data (.pdata/.xdata), which
// RtlLookupFunctionEntry finds and RtlVirtualUnwind applies to a CONTEXT.
// A parked goroutine's walk starts from the registers its switch saved
// (context.hpp's switch_frame, context_win64.S) and ends at the null
// return address goro_v0_1_start pushed below its entry's frame. The
// goroutine is not resumed and its stack is only read; the caller keeps it
// from running meanwhile (dump.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "../os/windows/windows_h.hpp"
#include "config.hpp"
#include "context.hpp"

namespace goro::detail {

inline constexpr std::size_t max_dump_frames = 64;

struct backtrace_buf {
  std::uintptr_t pc[max_dump_frames];
  std::size_t n = 0;
};

// The return addresses of the frames of a goroutine switched out with its
// saved stack pointer at sp, innermost first (its entry's frame last).
inline void backtrace_from(const void* sp, backtrace_buf& out) noexcept {
  const auto* f = static_cast<const switch_frame*>(sp);
  CONTEXT c{};
  c.Rip = reinterpret_cast<DWORD64>(f->resume);
  c.Rsp = reinterpret_cast<DWORD64>(sp) + sizeof(switch_frame);
  c.Rbx = f->rbx;
  c.Rbp = f->rbp;
  c.Rsi = f->rsi;
  c.Rdi = f->rdi;
  c.R12 = f->r12;
  c.R13 = f->r13;
  c.R14 = f->r14;
  c.R15 = f->r15;
  // The frames' own bounds, as the system unwinder checks them.
  const DWORD64 lo = f->stack_limit, hi = f->stack_base;
  out.n = 0;
  while (c.Rip != 0 && out.n < max_dump_frames && c.Rsp >= lo && c.Rsp < hi) {
    out.pc[out.n++] = static_cast<std::uintptr_t>(c.Rip);
    DWORD64 image = 0;
    PRUNTIME_FUNCTION fn = RtlLookupFunctionEntry(c.Rip, &image, nullptr);
    if (!fn) {
      // A leaf function (no unwind data): its return address is at rsp.
      c.Rip = *reinterpret_cast<const DWORD64*>(c.Rsp);
      c.Rsp += 8;
      continue;
    }
    void* handler_data = nullptr;
    DWORD64 establisher = 0;
    RtlVirtualUnwind(UNW_FLAG_NHANDLER, image, c.Rip, fn, &c, &handler_data, &establisher, nullptr);
  }
}

// The calling thread's own frames, innermost first (this one excluded).
GORO_NOINLINE inline void backtrace_self(backtrace_buf& out) noexcept {
  void* pcs[max_dump_frames];
  const USHORT n = RtlCaptureStackBackTrace(1, static_cast<DWORD>(max_dump_frames), pcs, nullptr);
  out.n = 0;
  for (USHORT i = 0; i < n; ++i) out.pc[out.n++] = reinterpret_cast<std::uintptr_t>(pcs[i]);
}

}  // namespace goro::detail
