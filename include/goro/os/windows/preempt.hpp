// Asynchronous preemption (policy preemption::signal) on Windows x64, Go's
// way (preemptM, os_windows.go): no signal reaches a Windows thread, so
// sysmon itself suspends the goroutine's thread (SuspendThread), reads its
// registers (GetThreadContext, CONTEXT_CONTROL | CONTEXT_INTEGER), decides
// (the same checks as the Linux handler, detail/async_preempt.hpp), makes
// the goroutine "call" the trampoline goro_v0_1_async_preempt
// (arch/context_win64.S) by writing a frame below its sp and pointing its
// rip there, writes the registers back (SetThreadContext) and resumes it
// (ResumeThread). The decision and the rewrite run on sysmon's thread,
// not on the target's: push_sigreturn_call's name is the Linux one, the
// shared code calls both the same.
//
// Why it is synchronous: SuspendThread only asks; GetThreadContext waits
// until the thread has stopped (Windows and Wine both), so the context
// read is the thread's state from then until ResumeThread, and the
// kernel round trips of both calls order the target's earlier plain
// stores (m->curg, m->after, g::async_scope) before sysmon's reads and
// sysmon's frame writes before the target's next instruction.
//
// While the target is suspended sysmon calls nothing that may take a lock
// the target could hold: no allocation (the process heap's lock), no
// printing, no loader or unwinder calls (RtlLookupFunctionEntry may lock).
// Everything it needs (the module range, the xsave size) is computed once
// in install_preempt_handler, before any preemption.
//
// The frame written below the interrupted sp S (Win64 has no red zone; 8
// bytes each, addresses falling):
//
//   S-8     interrupted rip        (popped by the trampoline's final ret)
//   S-16    interrupted rflags     (popfq)
//   S-24..  rax rcx rdx r8 r9 r10 r11
//   S-80..  rbx rbp rsi rdi r12 r13 r14 r15   (r15 at B = S-136)
//   X       an xsave (or fxsave) area, 64-byte aligned, header zeroed
//   X-32    shadow space; rsp = X-32 at the trampoline (16-byte aligned)
//
// and the registers at the trampoline: rbp = B (its SEH unwind data
// declares rbp the frame register, so RtlVirtualUnwind, hence the
// goroutine dump, walks from the trampoline to the interrupted frame at
// S), rbx = X, r12 = fn, r13 = arg, r14 = 1 when xsave is used. The
// trampoline saves the vector state with xsave (x87, SSE, AVX and AVX-512
// state, upper halves included; fxsave where the system has no XSAVE), calls
// fn(arg), restores it, pops the registers, flags and rip: the
// interrupted instruction runs on with everything as it was.
//
// Limits, as on Linux plus: only a pc inside the module that holds goro's
// code (the executable, or the DLL that includes goro) is preempted, so
// never one in a system DLL or inside a system call (where a rewritten
// context would lose the call's result); the trampoline's ret is not on a
// CET shadow stack (goro claims no shadow-stack compatibility on Windows,
// as for its switch).
#pragma once

#include <cpuid.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "thread.hpp"
#include "windows_h.hpp"

extern "C" {
// goro's assembly (arch/context_win64.S; declared as detail/context.hpp
// and detail/async_preempt.hpp do).
__attribute__((visibility("hidden"))) void* goro_v0_1_switch(void** save_sp, void* to_sp, void* arg);
__attribute__((visibility("hidden"))) void* goro_v0_1_switch_ret(void** save_sp, void* to_sp, void* arg);
__attribute__((visibility("hidden"))) void* goro_v0_1_switch_nofp(void** save_sp, void* to_sp, void* arg);
__attribute__((visibility("hidden"))) void* goro_v0_1_switch_ret_nofp(void** save_sp, void* to_sp, void* arg);
__attribute__((visibility("hidden"))) void goro_v0_1_start();
__attribute__((visibility("hidden"))) void goro_v0_1_async_preempt();
}

namespace goro::detail::os {

inline constexpr bool async_preemption_ported = true;

// The interrupted thread's state, as GetThreadContext returns it.
using signal_context = CONTEXT;

inline std::uintptr_t context_pc(const signal_context* c) noexcept { return static_cast<std::uintptr_t>(c->Rip); }
inline std::uintptr_t context_sp(const signal_context* c) noexcept { return static_cast<std::uintptr_t>(c->Rsp); }

// What install_preempt_handler measures once: the bounds of the module
// that holds goro's code, those of goro's assembly functions (never
// preempted), and the xsave area's size (0: fxsave, 512 bytes).
struct preempt_setup {
  // goro's assembly functions: the four switches, start, async_preempt.
  static constexpr std::size_t asm_functions = 6;
  std::uintptr_t module_lo = 0, module_hi = 0;
  std::uintptr_t asm_lo[asm_functions] = {}, asm_hi[asm_functions] = {};
  std::size_t xsave_size = 0;
};

inline preempt_setup& preempt_config() noexcept {
  static preempt_setup s;
  return s;
}

// The size of the xsave area for the components the OS enabled (CPUID
// leaf 0xD, EBX), or 0 when the OS does not use XSAVE (CPUID.1:ECX.OSXSAVE).
inline std::size_t measure_xsave_size() noexcept {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0;
  __cpuid_count(0xd, 0, a, b, c, d);
  return b >= 576 ? b : 0;
}

// Whether pc lies in the module that holds goro's code (see the limits
// above). Reads only what install_preempt_handler stored.
inline bool pc_preemptible(std::uintptr_t pc) noexcept {
  const preempt_setup& s = preempt_config();
  if (pc < s.module_lo || pc >= s.module_hi) return false;
  for (std::size_t i = 0; i < preempt_setup::asm_functions; ++i)
    if (pc >= s.asm_lo[i] && pc < s.asm_hi[i]) return false;
  return true;
}

// The [begin, end) of the function starting at rva in the module at base,
// from the module's exception directory (the RUNTIME_FUNCTION table the
// .seh_proc directives of arch/context_win64.S fill): read directly, as
// RtlLookupFunctionEntry may take a lock. False when there is none.
inline bool function_bounds(std::uintptr_t base, const IMAGE_NT_HEADERS* nt, std::uintptr_t fn, std::uintptr_t* lo,
                            std::uintptr_t* hi) noexcept {
  const IMAGE_DATA_DIRECTORY& dir = nt->OptionalHeader.DataDirectory[IMAGE_DIRECTORY_ENTRY_EXCEPTION];
  if (dir.VirtualAddress == 0 || fn < base) return false;
  const auto* table = reinterpret_cast<const RUNTIME_FUNCTION*>(base + dir.VirtualAddress);
  const std::size_t n = dir.Size / sizeof(RUNTIME_FUNCTION);
  const std::uintptr_t rva = fn - base;
  for (std::size_t i = 0; i < n; ++i) {
    if (table[i].BeginAddress == rva) {
      *lo = fn;
      *hi = base + table[i].EndAddress;
      return true;
    }
  }
  return false;
}

// Writes the frame above (header comment) below the interrupted sp and
// points the context at `trampoline`, which calls fn(arg) and resumes the
// interrupted code. False, leaving everything untouched, when the frame
// would reach below stack_limit. Runs on sysmon's thread with the target
// suspended: plain stores into the target's stack, no call that locks.
inline bool push_sigreturn_call(signal_context* c, std::uintptr_t stack_limit, std::uintptr_t trampoline,
                                std::uintptr_t fn, std::uintptr_t arg) noexcept {
  const std::size_t xsave = preempt_config().xsave_size;
  const std::size_t save_size = xsave ? xsave : 512;
  const std::uintptr_t sp = static_cast<std::uintptr_t>(c->Rsp);
  if (sp & 7) return false;  // not a sp any Win64 code runs with
  const std::uintptr_t b = sp - 136;
  const std::uintptr_t x = (b - save_size) & ~std::uintptr_t{63};
  const std::uintptr_t t = x - 32;
  if (t < stack_limit) return false;
  auto* w = reinterpret_cast<std::uint64_t*>(b);
  const std::uint64_t regs[17] = {c->R15, c->R14, c->R13, c->R12, c->Rdi, c->Rsi, c->Rbp,    c->Rbx, c->R11,
                                  c->R10, c->R9,  c->R8,  c->Rdx, c->Rcx, c->Rax, c->EFlags, c->Rip};
  for (std::size_t i = 0; i < 17; ++i) w[i] = regs[i];
  // xrstor faults on a header with reserved bytes set: zero the area.
  std::memset(reinterpret_cast<void*>(x), 0, save_size);
  c->Rsp = t;
  c->Rip = trampoline;
  c->Rbp = b;
  c->Rbx = x;
  c->R12 = fn;
  c->R13 = arg;
  c->R14 = xsave ? 1 : 0;
  return true;
}

// Measures what preemption needs (the module holding goro's code, the
// xsave size) before the first preemption. Windows has no handler to
// install: Inject runs on sysmon's thread (preempt_thread). Call once per
// process.
template <bool (*Inject)(signal_context*) noexcept>
inline void install_preempt_handler() noexcept {
  // Any address in this module: an inline function of goro's, emitted here.
  const void* anchor = reinterpret_cast<const void*>(&measure_xsave_size);
  preempt_setup& s = preempt_config();
  s.xsave_size = measure_xsave_size();
  HMODULE mod = nullptr;
  if (GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                         static_cast<LPCWSTR>(anchor), &mod) &&
      mod) {
    const auto base = reinterpret_cast<std::uintptr_t>(mod);
    const auto* dos = reinterpret_cast<const IMAGE_DOS_HEADER*>(base);
    const auto* nt = reinterpret_cast<const IMAGE_NT_HEADERS*>(base + static_cast<std::uintptr_t>(dos->e_lfanew));
    const void* fns[preempt_setup::asm_functions] = {reinterpret_cast<const void*>(&goro_v0_1_switch),
                          reinterpret_cast<const void*>(&goro_v0_1_switch_ret),
                          reinterpret_cast<const void*>(&goro_v0_1_switch_nofp),
                          reinterpret_cast<const void*>(&goro_v0_1_switch_ret_nofp),
                          reinterpret_cast<const void*>(&goro_v0_1_start),
                          reinterpret_cast<const void*>(&goro_v0_1_async_preempt)};
    bool found = true;
    for (std::size_t i = 0; i < preempt_setup::asm_functions; ++i)
      found = found && function_bounds(base, nt, reinterpret_cast<std::uintptr_t>(fns[i]), &s.asm_lo[i], &s.asm_hi[i]);
    // Without the bounds of goro's assembly nothing is preempted (the
    // module range stays empty): signal mode then acts as cooperative.
    if (found) {
      s.module_lo = base;
      s.module_hi = base + nt->OptionalHeader.SizeOfImage;
    }
  }
}

// A handle sysmon can suspend the calling thread with (Windows' thread
// pseudo-handle means "the calling thread" wherever it is used, and
// _beginthreadex's handle is not made for every M: the run() caller's
// thread is the program's own). Released by close_preemption_target once
// nothing can preempt through it any more.
inline thread_handle open_preemption_target() noexcept {
  HANDLE h = nullptr;
  if (!DuplicateHandle(
          GetCurrentProcess(), GetCurrentThread(), GetCurrentProcess(), &h,
          THREAD_SUSPEND_RESUME | THREAD_GET_CONTEXT | THREAD_SET_CONTEXT | THREAD_QUERY_LIMITED_INFORMATION, FALSE, 0))
    h = nullptr;  // then this M is never preempted asynchronously
  return {h, GetCurrentThreadId()};
}

inline void close_preemption_target(thread_handle& t) noexcept {
  if (t.handle) CloseHandle(t.handle);
  t.handle = nullptr;
}

// Preempts the goroutine thread t runs, if Inject(context, m) says so and
// rewrote the context (Go's preemptM). t's handle must still be open (the
// caller holds the scheduler's m_record_lock_); the thread may run
// something else by now, or have ended (SuspendThread then fails).
template <class M, bool (*Inject)(signal_context*, M*) noexcept>
inline void preempt_thread(thread_handle t, M* m) noexcept {
  if (!t.handle || t.id == GetCurrentThreadId()) return;
  if (SuspendThread(t.handle) == static_cast<DWORD>(-1)) return;
  CONTEXT c;
  std::memset(&c, 0, sizeof c);
  c.ContextFlags = CONTEXT_CONTROL | CONTEXT_INTEGER;
  // GetThreadContext returns once the thread has stopped: from here on it
  // runs nothing until ResumeThread.
  if (GetThreadContext(t.handle, &c) && Inject(&c, m)) SetThreadContext(t.handle, &c);
  ResumeThread(t.handle);
}

}  // namespace goro::detail::os
