// OS threads: creating, joining and naming the calling thread, yielding,
// counting CPUs, and the process-wide memory barrier (Go's newosproc /
// osyield / getproccount, os_windows.go). Threads are Win32 threads
// started with the C runtime's _beginthreadex (which sets up the runtime's
// per-thread state, as CreateThread does not for the older msvcrt).
#pragma once

#include <process.h>

#include <bit>
#include <cerrno>
#include <cstddef>
#include <new>

#include "windows_h.hpp"

namespace goro::detail::os {

// A thread: `handle` is the joinable handle of one create_thread started
// (null for current_thread(): a pseudo-handle would mean "the calling
// thread" wherever it is used); `id` names the thread system-wide (what a
// future SuspendThread-based preemption opens, issue 17).
struct thread_handle {
  HANDLE handle = nullptr;
  DWORD id = 0;
};

struct thread_start {
  void* (*fn)(void*);
  void* arg;
};

inline unsigned __stdcall thread_trampoline(void* p) {
  const thread_start s = *static_cast<thread_start*>(p);
  delete static_cast<thread_start*>(p);
  s.fn(s.arg);
  return 0;
}

// Starts fn(arg) on a new thread with `stack_bytes` of stack (0: the
// executable's default, 2 MiB with MinGW-w64's linker): 0 or an errno.
inline int start_thread(thread_handle* t, void* (*fn)(void*), void* arg, std::size_t stack_bytes) noexcept {
  auto* s = new (std::nothrow) thread_start{fn, arg};
  if (!s) return ENOMEM;
  unsigned id = 0;
  const auto h = _beginthreadex(nullptr, static_cast<unsigned>(stack_bytes), &thread_trampoline, s,
                                stack_bytes ? STACK_SIZE_PARAM_IS_A_RESERVATION : 0, &id);
  if (h == 0) {
    const int err = errno ? errno : EAGAIN;
    delete s;
    return err;
  }
  *t = {reinterpret_cast<HANDLE>(h), static_cast<DWORD>(id)};
  return 0;
}

// Starts fn(arg) on a new joinable thread with the default stack: 0 or an
// errno (EAGAIN when the system has no resources for one more).
inline int create_thread(thread_handle* t, void* (*fn)(void*), void* arg) noexcept {
  return start_thread(t, fn, arg, 0);
}

// Waits for t to finish and releases its handle (t must come from
// create_thread, and not be the calling thread).
inline void join_thread(thread_handle t) noexcept {
  WaitForSingleObject(t.handle, INFINITE);
  CloseHandle(t.handle);
}

// The calling thread (its id; no handle, see thread_handle).
inline thread_handle current_thread() noexcept { return {nullptr, GetCurrentThreadId()}; }

// Names the calling thread for debuggers and profilers with
// SetThreadDescription (Windows 10 1607+), looked up at run time so that
// older systems (and Wine versions without it) simply keep threads
// unnamed. The name is ASCII in goro; at most 63 characters are kept.
inline void set_thread_name(const char* name) noexcept {
  using set_description_fn = HRESULT(WINAPI*)(HANDLE, PCWSTR);
  static const auto set_description = [] {
    HMODULE k = GetModuleHandleW(L"kernel32.dll");
    FARPROC f = k ? GetProcAddress(k, "SetThreadDescription") : nullptr;
    return reinterpret_cast<set_description_fn>(reinterpret_cast<void*>(f));
  }();
  if (!set_description) return;
  wchar_t wide[64];
  std::size_t n = 0;
  for (; name[n] != '\0' && n < 63; ++n) wide[n] = static_cast<unsigned char>(name[n]);
  wide[n] = L'\0';
  set_description(GetCurrentThread(), wide);
}

// Starts fn(arg) on a detached thread with a stack of stack_bytes: 0 or an
// errno. (Linux also blocks every signal on it; Windows delivers no
// asynchronous signals to arbitrary threads, so there is nothing to block.)
inline int start_daemon_thread(void* (*fn)(void*), void* arg, std::size_t stack_bytes) noexcept {
  thread_handle t;
  const int err = start_thread(&t, fn, arg, stack_bytes);
  if (err == 0) CloseHandle(t.handle);  // detached: nobody joins it
  return err;
}

// A pointer per thread that is handed to `at_exit` when a thread that set
// it (non-null) ends: a fiber-local storage slot, whose callback Windows and
// Wine run as the thread ends, before the loader's thread-detach
// notifications. What the Windows layer uses instead of a thread_local
// object with a destructor, which is not safe here: with MinGW-w64's
// emulated TLS, libstdc++ runs thread_local destructors from a winpthreads
// key destructor, and winpthreads (MinGW-w64 10 to 12) runs key destructors
// in creation order, emutls's first, which frees the thread's thread_local
// storage: the destructors then ran on freed memory (issue 17: an M's
// destructor closing a handle read from it, or releasing a shared_ptr read
// from it, now and then broke winpthreads' key lock, and a program hung in
// exit()). The value must not point into thread_local storage either: a
// winpthreads thread (std::thread) runs the key destructors, and frees
// that storage, before it ends. A slot is made once and never freed (one
// of at least 128 per process); where none was left, usable() is false,
// get() null and set() false.
class thread_exit_slot {
 public:
  explicit thread_exit_slot(void(WINAPI* at_exit)(void*)) noexcept : index_(FlsAlloc(at_exit)) {}
  thread_exit_slot(const thread_exit_slot&) = delete;
  thread_exit_slot& operator=(const thread_exit_slot&) = delete;

  bool usable() const noexcept { return index_ != FLS_OUT_OF_INDEXES; }
  void* get() const noexcept { return usable() ? FlsGetValue(index_) : nullptr; }
  bool set(void* value) noexcept { return usable() && FlsSetValue(index_, value); }

 private:
  DWORD index_;
};

// Gives the CPU to another ready thread on this processor, if any (Go's
// osyield on Windows).
inline void yield_thread() noexcept { SwitchToThread(); }

// CPUs this process may run on (its affinity mask: at most 64, one
// processor group, as Go's getproccount), else those active; at least 1.
inline unsigned usable_cpus() noexcept {
  DWORD_PTR process = 0, system = 0;
  if (GetProcessAffinityMask(GetCurrentProcess(), &process, &system) && process != 0)
    return static_cast<unsigned>(std::popcount(static_cast<unsigned long long>(process)));
  const DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
  return n > 0 ? static_cast<unsigned>(n) : 1u;
}

// CPUs active in the machine, every processor group (0 if unknown).
inline long online_cpus() noexcept { return static_cast<long>(GetActiveProcessorCount(ALL_PROCESSOR_GROUPS)); }

// This process's id.
inline long process_id() noexcept { return static_cast<long>(GetCurrentProcessId()); }

// A full memory barrier on every thread of the process: FlushProcessWriteBuffers
// (an IPI to each processor running one of its threads; what membarrier is
// on Linux). Always available.
inline bool process_wide_barrier() noexcept {
  FlushProcessWriteBuffers();
  return true;
}

}  // namespace goro::detail::os
