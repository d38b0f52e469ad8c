// Creating the runtime's own OS threads (Ms, sysmon), with a fault
// injection point for tests: built with GORO_TESTING defined, the next
// testing::fail_thread_creations creations fail with EAGAIN, as
// os::create_thread does at RLIMIT_NPROC or a cgroup's pids limit. Without
// GORO_TESTING it is os::create_thread.
#pragma once

#include <cerrno>

#include "../os/os.hpp"

#ifdef GORO_TESTING
#include <atomic>
#endif

namespace goro::detail {

#ifdef GORO_TESTING
namespace testing {
inline std::atomic<int> fail_thread_creations{0};
}  // namespace testing
#endif

// os::create_thread(t, fn, arg): 0 or an errno.
inline int create_os_thread(os::thread_handle* t, void* (*fn)(void*), void* arg) noexcept {
#ifdef GORO_TESTING
  for (int n = testing::fail_thread_creations.load(); n > 0;)
    if (testing::fail_thread_creations.compare_exchange_weak(n, n - 1)) return EAGAIN;
#endif
  return os::create_thread(t, fn, arg);
}

}  // namespace goro::detail
