// OS threads: creating, joining and naming the calling thread, yielding,
// counting CPUs, and the process-wide memory barrier (Go's newosproc /
// osyield / getproccount, os_linux.go). Threads are pthreads.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

namespace goro::detail::os {

// A joinable handle of a thread (also what preempt_thread signals).
using thread_handle = pthread_t;

// Starts fn(arg) on a new joinable thread with the default stack: 0 or an
// errno (EAGAIN at RLIMIT_NPROC or a cgroup's pids limit).
inline int create_thread(thread_handle* t, void* (*fn)(void*), void* arg) noexcept {
  return pthread_create(t, nullptr, fn, arg);
}

// Waits for t to finish (it must have been created joinable, and not be
// the calling thread).
inline void join_thread(thread_handle t) noexcept { pthread_join(t, nullptr); }

// The calling thread.
inline thread_handle current_thread() noexcept { return pthread_self(); }

// Names the calling thread (comm in /proc/self/task/*/comm, gdb's `info
// threads`), cut to Linux's 15 bytes: pthread_setname_np refuses longer.
inline void set_thread_name(const char* name) noexcept {
  char cut[16];
  std::size_t n = 0;
  for (; name[n] != '\0' && n < sizeof cut - 1; ++n) cut[n] = name[n];
  cut[n] = '\0';
  pthread_setname_np(pthread_self(), cut);
}

// Starts fn(arg) on a detached thread with a stack of stack_bytes that
// blocks every signal (process-directed signals then go to the program's
// threads, and a signal relay's own thread is never the one interrupted):
// 0 or an errno. The calling thread's mask is unchanged afterwards.
inline int start_daemon_thread(void* (*fn)(void*), void* arg, std::size_t stack_bytes) noexcept {
  sigset_t all, prev;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &prev);  // the new thread inherits the mask
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stack_bytes);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  const int err = pthread_create(&t, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &prev, nullptr);
  return err;
}

// Gives the CPU to another runnable thread, if any (Go's osyield).
inline void yield_thread() noexcept { sched_yield(); }

// CPUs this process may run on (its affinity mask), else those online;
// at least 1 (Go's getproccount).
inline unsigned usable_cpus() noexcept {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<unsigned>(n);
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<unsigned>(n) : 1u;
}

// CPUs online in the machine (may be 0 or less if unknown).
inline long online_cpus() noexcept { return sysconf(_SC_NPROCESSORS_ONLN); }

// This process's id (a forked child has a new one).
inline long process_id() noexcept { return static_cast<long>(getpid()); }

// A full memory barrier on every thread of the process (the asymmetric
// half of the goroutine dump's pin protocol): membarrier(2), private
// expedited when it can be registered, else global. False if the kernel
// offers none.
inline bool process_wide_barrier() noexcept {
  constexpr int cmd_global = 1, cmd_private_expedited = 8, cmd_register_private_expedited = 16;
  static const bool registered = syscall(SYS_membarrier, cmd_register_private_expedited, 0, 0) == 0;
  if (registered && syscall(SYS_membarrier, cmd_private_expedited, 0, 0) == 0) return true;
  return syscall(SYS_membarrier, cmd_global, 0, 0) == 0;
}

}  // namespace goro::detail::os
