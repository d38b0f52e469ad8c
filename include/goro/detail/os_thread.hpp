// The threads a runtime starts for itself (its Ms, sysmon, main_return's
// ender): from options::thread_factory when the program gave one, else
// os::create_thread; each named "<options::thread_name>-<role>" from
// inside (SPEC "Engine embedding"). Built with GORO_TESTING, a fault
// injection point: the next testing::fail_thread_creations creations fail
// with EAGAIN, as os::create_thread does at RLIMIT_NPROC or a cgroup's
// pids limit.
#pragma once

#include <cerrno>
#include <cstdio>
#include <functional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "../error.hpp"
#include "../os/os.hpp"
#include "config.hpp"
#include "memory.hpp"
#include "trace.hpp"

#ifdef GORO_TESTING
#include <atomic>
#endif

namespace goro::detail {

#ifdef GORO_TESTING
namespace testing {
inline std::atomic<int> fail_thread_creations{0};
}  // namespace testing
#endif

// What a runtime's options say about its threads.
struct thread_config {
  std::function<std::thread(std::function<void()>)> factory;  // empty: os::create_thread
  std::string name = "goro";
  unsigned max_threads = 10000;      // Ms, the run() caller included while in run() (Go's SetMaxThreads)
  runtime_memory* memory = nullptr;  // the runtime's allocator (its threads' trace buffers); not an option
};

// One thread of a runtime. Lives at a fixed address from start() until
// join() returns (the new thread reads it to learn what to run).
class runtime_thread {
 public:
  runtime_thread() = default;
  runtime_thread(const runtime_thread&) = delete;
  runtime_thread& operator=(const runtime_thread&) = delete;

  // Starts fn(arg) on a new thread named "<cfg.name>-<role>": 0 or an
  // errno (a factory's std::system_error gives its code). A factory that
  // returns a thread not running the function it was given is a fatal
  // usage error: nothing could join or wait for that function.
  int start(const thread_config& cfg, const char* role, void* (*fn)(void*), void* arg) noexcept {
#ifdef GORO_TESTING
    for (int n = testing::fail_thread_creations.load(); n > 0;)
      if (testing::fail_thread_creations.compare_exchange_weak(n, n - 1)) return EAGAIN;
#endif
    std::snprintf(name_, sizeof name_, "%s-%s", cfg.name.c_str(), role);
    fn_ = fn;
    arg_ = arg;
    memory_ = cfg.memory;
    if (!cfg.factory) {
      const int err = os::create_thread(&os_, &trampoline, this);
      kind_ = err == 0 ? kind::os : kind::none;
      return err;
    }
    int err = 0;
    GORO_TRY { std_ = cfg.factory([this] { trampoline(this); }); }
#if GORO_EXCEPTIONS
    catch (const std::system_error& e) {
      err = e.code().value() != 0 ? e.code().value() : EAGAIN;
    } catch (const std::bad_alloc&) {
      err = ENOMEM;
    } catch (...) {
      fatal("goro: options::thread_factory threw (it may throw std::system_error when no thread can be made)");
    }
#endif
    if (err != 0) return err;
    if (!std_.joinable())
      fatal("goro: options::thread_factory returned a std::thread that is not joinable "
            "(it must return the thread that runs the function it was given)");
    kind_ = kind::factory;
    return 0;
  }

  bool started() const noexcept { return kind_ != kind::none; }

  // Waits for the thread to finish (not from the thread itself).
  void join() noexcept {
    if (kind_ == kind::os) os::join_thread(os_);
    if (kind_ == kind::factory) std_.join();
    kind_ = kind::none;
  }

 private:
  // The thread works for the runtime while fn runs: its trace buffer, if
  // it makes one, comes from the runtime's allocator and goes back before
  // join() can return (a factory's thread may live on, pooled).
  static void* trampoline(void* self_arg) {
    auto* self = static_cast<runtime_thread*>(self_arg);
    os::set_thread_name(self->name_);
    tracing::thread_runtime_memory = self->memory_;
    void* r = self->fn_(self->arg_);
    tracing::thread_runtime_memory = nullptr;
    tracing::release_thread_buffer();
    return r;
  }

  enum class kind : unsigned char { none, os, factory };
  kind kind_ = kind::none;
  char name_[32] = {};
  void* (*fn_)(void*) = nullptr;
  void* arg_ = nullptr;
  runtime_memory* memory_ = nullptr;
  os::thread_handle os_{};
  std::thread std_;
};

}  // namespace goro::detail
