// The OS layer: everything goro asks of the operating system, behind one
// small interface in namespace goro::detail::os. The scheduler, the
// poller, the stack allocator, sysmon and preemption call only this; a
// port to another system is a new folder beside linux/ providing the same
// names (and an entry in the #if below), not #ifdefs in the runtime.
// Everything is inline (the library is header-only; the futex and clock
// calls sit on hot paths) and noexcept. Go's counterparts: os_linux.go,
// lock_futex.go, netpoll_epoll.go, signal_unix.go, mem_linux.go.
//
// Parking (linux/futex.hpp)
//   futex_wait(atomic<uint32_t>* w, uint32_t expected, long long timeout_ns = -1)
//       sleeps while *w == expected (compared atomically with going to
//       sleep), until futex_wake or timeout_ns (>= 0) passes. May return
//       spuriously: callers re-check and loop.
//   futex_wake(atomic<uint32_t>* w, int count = INT_MAX)
//       wakes up to count sleepers on w. Must be harmless when w's object
//       is already gone (it may not touch *w), and callable from a signal
//       handler (goro::signal's, as Go's sigsend calls notewakeup).
//
// Threads (linux/thread.hpp)
//   thread_handle                       a joinable thread; what preempt_thread signals
//   create_thread(thread_handle*, void* (*fn)(void*), void* arg) -> 0 | errno
//   join_thread(thread_handle)          waits for it to finish
//   current_thread() -> thread_handle
//   set_thread_name(const char*)        names the calling thread (debuggers,
//       /proc, top), cut to the system's limit (15 bytes on Linux)
//   start_daemon_thread(fn, arg, stack_bytes) -> 0 | errno
//       detached, every signal blocked on it (the caller's mask unchanged)
//   yield_thread()                      gives up the CPU (Go's osyield)
//   usable_cpus() -> unsigned >= 1      CPUs the process may run on
//   online_cpus() -> long               CPUs online (<= 0: unknown)
//   process_id() -> long
//   process_wide_barrier() -> bool      a full fence on every thread of the
//       process, as if each ran one; false when the system has none
//
// Clocks (linux/clock.hpp). The precise monotonic clock is
// std::chrono::steady_clock (detail::nanotime), which needs no port.
//   coarse_nanotime() -> int64_t        monotonic, tick granularity, cheap
//   sleep_ns(long long ns)              sleeps the thread at least ~ns
//
// Stack memory (linux/stack_memory.hpp); sizes are multiples of page_size()
//   page_size() -> size_t
//   map_memory(bytes) -> void* | nullptr        zeroed, read-write, committed on touch
//   map_stack_memory(bytes) -> void* | nullptr  the same, no swap reserved
//   unmap_memory(p, bytes)
//   release_pages(p, bytes)             drop the contents, give the pages back;
//       the range stays mapped (and guarded) and reads as zeros again
//   guard_with_marker(p, bytes) -> bool make the range fault without
//       splitting the mapping; only where guard_markers_available()
//   guard_with_protection(p, bytes) -> bool  the same by protection
//       (each call costs mappings: see max_memory_mappings())
//   guard_markers_available() -> bool
//   max_memory_mappings() -> long
//
// Signals and preemption delivery (linux/signals.hpp, linux/signal_context.hpp;
// windows/signals.hpp, windows/preempt.hpp)
//   install_fault_handler<void (*on_fault)(uintptr_t addr) noexcept>()
//       memory faults call on_fault(fault address) on the alternate signal
//       stack (Windows: a vectored exception handler on the guard region's
//       committed zone); if it returns, the previous handler (or the
//       default action) takes the fault. Once per process.
//   install_preempt_handler<bool (*inject)(signal_context*) noexcept>()
//       preempt_thread's signal calls inject(interrupted context) on the
//       alternate signal stack; false passes it to the previous handler
//       (Windows: no handler; measures what preempt_thread needs).
//   preempt_thread<M, bool (*inject_m)(signal_context*, M*) noexcept>(thread_handle, M*)
//       asynchronously interrupts that thread (Linux: the signal, whose
//       handler decides on the thread's own M; Windows: suspends it and
//       calls inject_m(its context, m) on the caller's thread)
//   open_preemption_target() -> thread_handle, close_preemption_target(thread_handle&)
//       the calling thread as preempt_thread needs it (Windows: a real
//       handle with suspend/context rights; closed once unused)
//   pc_preemptible(pc) -> bool         false where the OS layer forbids it
//       (Windows: outside goro's module, or inside goro's assembly)
//   async_preemption_ported             constexpr bool: false where the above
//       is not done yet (a preemption::signal policy then does not compile)
//   preempt_signal                      its signal number (goro::signal refuses it)
//   signal_context                      the interrupted thread's saved state
//   context_pc / context_sp(const signal_context*) -> uintptr_t
//   push_sigreturn_call(ctx, stack_limit, trampoline, fn, arg) -> bool
//       copies the saved state below the interrupted sp (not below
//       stack_limit) and resumes the thread in trampoline (arch/*.S) with
//       fn and arg in its registers; the trampoline calls fn(arg) and
//       returns to the interrupted code with every register restored.
//   thread_altstack                     RAII: an alternate signal stack for
//       the calling thread (kept if the thread has one)
//   signal_action, set_signal_handler(sig, void (*)(int), bool restart, signal_action* saved) -> 0 | errno,
//   restore_signal_handler(sig, const signal_action&), signal_has_handler(sig) -> bool
//       plain handlers for the signal relay (goro::signal) and the dump
//   abort_process()                     [[noreturn]], past the program's SIGABRT handler
//
// File descriptors (linux/fd.hpp): the self-pipe a handler wakes a thread by
//   open_pipe(int fds[2], bool nonblocking) -> 0 | errno
//   wait_readable(fd, timeout_ms) -> bool
//   read_fd / write_fd(fd, buf, n) -> long, close_fd(fd)
//   stderr_fd, write_stderr(buf, n)     async-signal-safe
//
// The poller (linux/poller.hpp), under detail/netpoll.hpp
//   socket_t, invalid_socket            a socket as the system names it (int; SOCKET)
//   poll_slot                           the poller's per-descriptor state (in poll_desc)
//   poller_arms                         constexpr bool: readiness must be asked for per
//       wait (arm) rather than reported once added (false with epoll)
//   poller: open(const char** what) -> 0 | errno, is_open(), close(),
//       add(fd, uint64_t tag != 0, slot&) -> 0 | errno (edge-triggered, both ways),
//       remove(fd, slot&), arm(fd, tag, slot&, 'r' | 'w') -> 0 | errno (the next
//       readiness that way, as one event; only where poller_arms),
//       wait(poll_event*, max, timeout_ns) -> count (< 0: interrupted;
//       0 ns: just look; < 0: no limit), wake() (a wait returns an event
//       tagged 0 until drain_wake()), drain_wake()
//   poll_event, event_tag(e), event_readable(e), event_writable(e)
//
// Sockets (os/socket.hpp, included by goro::net's headers only) list
// theirs there.
#pragma once

#if defined(__linux__)
#include "linux/clock.hpp"
#include "linux/fd.hpp"
#include "linux/futex.hpp"
#include "linux/poller.hpp"
#include "linux/signal_context.hpp"
#include "linux/signals.hpp"
#include "linux/stack_memory.hpp"
#include "linux/thread.hpp"
#elif defined(_WIN64)
// Windows x64 (issue 17): each file says what differs from Linux.
#include "windows/clock.hpp"
#include "windows/fd.hpp"
#include "windows/futex.hpp"
#include "windows/poller.hpp"
#include "windows/preempt.hpp"
#include "windows/signals.hpp"
#include "windows/stack_memory.hpp"
#include "windows/thread.hpp"
#else
#error \
    "goro: no OS layer for this system. A port adds include/goro/os/<system>/ with what os/os.hpp lists: futex_wait/futex_wake, threads, clocks, stack memory, signals and preemption delivery (or an equivalent thread interrupt), the self-pipe, and the poller."
#endif
