// goro::group: Go's errgroup (golang.org/x/sync/errgroup) -- a set of
// goroutines working on one task, the first failure winning.
//
//   goro::group g(ctx);                  // or goro::group g; (background)
//   g.set_limit(8);                      // at most 8 tasks at once
//   for (auto& url : urls)
//     g.go([&, url] { return fetch(g.ctx(), url); });   // void or std::error_code
//   if (std::error_code ec = g.wait()) ...              // an exception is rethrown
//
// A task fails by returning a non-zero std::error_code or by throwing; the
// first failure is kept (later ones are dropped) and cancels ctx(), which
// the other tasks watch. ctx() is also cancelled when wait() returns. A
// cancelled parent context cancels ctx() but is not itself a failure: it is
// the tasks that decide what to return then.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include "chan.hpp"
#include "context.hpp"
#include "detail/config.hpp"
#include "detail/goexit.hpp"
#include "detail/spinlock.hpp"
#include "error.hpp"
#include "runtime.hpp"
#include "sync.hpp"

namespace goro {

class group {
 public:
  group() : group(background()) {}
  GORO_DECL explicit group(context parent);
  group(const group&) = delete;
  group& operator=(const group&) = delete;

  // Its tasks refer to it: a group that still has tasks waits for them
  // (their failure, if any, is dropped) rather than vanish under them.
  GORO_DECL ~group();

  // Runs f() in a new goroutine (of the calling goroutine's runtime). f
  // returns void or std::error_code. With a limit set, blocks while that
  // many tasks are running (Go's errgroup.Go).
  template <class F>
  void go(F&& f) {
    check_task<F>();
    // Before the slot: a plain thread at the limit blocked on it (for good
    // with set_limit(0)) before goro::go raised this.
    detail::require_goroutine("group::go()");
    if (sem_) sem_.send(std::monostate{});
    spawn(std::forward<F>(f));
  }

  // Runs f() like go() if that does not block (the limit is not reached);
  // false otherwise, and f is not run (Go's TryGo).
  template <class F>
  bool try_go(F&& f) {
    check_task<F>();
    detail::require_goroutine("group::try_go()");  // the same answer at the limit as below it
    if (sem_ && !sem_.try_send(std::monostate{})) return false;
    spawn(std::forward<F>(f));
    return true;
  }

  // At most n tasks at once; n < 0: no limit (the default). Changing it
  // while tasks run is a usage_error (Go panics).
  GORO_DECL void set_limit(int n);

  // Waits for every task, cancels ctx(), and returns the first failure: an
  // error code is returned, an exception rethrown; {} if none failed. Any
  // number of waits, in turn or at once, report the same failure.
  GORO_DECL std::error_code wait();

  // The group's context: cancelled by the first failure, by the parent,
  // or when wait() returns.
  context ctx() const noexcept { return ctx_; }

 private:
  template <class F>
  static void check_task() {
    using R = std::invoke_result_t<std::decay_t<F>&>;
    static_assert(std::is_void_v<R> || std::is_same_v<R, std::error_code>,
                  "goro::group: a task returns void or std::error_code");
  }

  // A task's hold on the group (a wait_group count, its slot), carried by
  // its closure: released when that goes -- after the task ran, or unrun
  // (a go() that threw; a goroutine discarded because main returned).
  class task_hold {
   public:
    explicit task_hold(group* g) noexcept : g_(g) {}
    task_hold(task_hold&& o) noexcept : g_(std::exchange(o.g_, nullptr)) {}
    task_hold& operator=(task_hold&&) = delete;
    ~task_hold() {
      if (g_) g_->release();
    }

   private:
    group* g_;
  };

  template <class F>
  void spawn(F&& f) {
    wg_.add(1);
    active_.fetch_add(1, std::memory_order_acq_rel);
    task_hold hold(this);
    goro::go([this, hold = std::move(hold), fn = std::decay_t<F>(std::forward<F>(f))]() mutable { run(fn); });
  }

  // A task's end: its slot, its count, then done (the last touch of the
  // group). In a destructor: main returning must not end the goroutine here.
  void release() {
    detail::no_unwind_scope scope;
    if (sem_) (void)sem_.try_recv();  // frees a slot: tasks hold one each
    active_.fetch_sub(1, std::memory_order_acq_rel);
    wg_.done();
  }

  // One task: its failure recorded (its end, also when it unwinds through
  // goro::exit(), which is not a failure, releases the closure's hold:
  // Go's Goexit runs the deferred done).
  template <class F>
  void run(F& closure_fn) {
    F fn(std::move(closure_fn));  // destroyed before the hold's done(): its captures go before wait() returns
#if GORO_EXCEPTIONS
    try {
      invoke_task(fn);
    } catch (const detail::goexit_unwind&) {
      throw;
    } catch (...) {
      fail({}, std::current_exception());
    }
#else
    invoke_task(fn);
#endif
  }

  template <class F>
  void invoke_task(F& fn) {
    if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
      fn();
    } else {
      std::error_code ec = fn();
      if (ec) fail(ec, {});
    }
  }

  // The first failure wins and cancels ctx() (Go's errOnce).
  GORO_DECL void fail(std::error_code ec, std::exception_ptr e);

  context ctx_;
  cancel_func cancel_;
  wait_group wg_;
  chan<std::monostate> sem_ = nullptr;  // nil: no limit; else one slot per running task
  std::atomic<std::int64_t> active_{0};
  detail::spinlock lock_;
  bool failed_ = false;  // guarded by lock_
  std::error_code err_;  // guarded by lock_ until wg_.wait() returns
  std::exception_ptr exc_;
  int uncaught_ = std::uncaught_exceptions();  // at construction: ~group tells an exception's unwinding
};

}  // namespace goro

#if GORO_COMPILE_RUNTIME
#include <string>

namespace goro {

GORO_DECL group::group(context parent) {
  auto [c, cancel] = with_cancel(std::move(parent));
  ctx_ = std::move(c);
  cancel_ = std::move(cancel);
}

GORO_DECL group::~group() {
  // Destroyed by an exception (no wait() reached): nobody will read the
  // result, and tasks watching ctx() would otherwise keep this waiting.
  if (std::uncaught_exceptions() > uncaught_) cancel_();
  // noexcept: main returning must not end this goroutine in here
  // (std::terminate); the tasks it waits for end then, and so does it,
  // at its next goro call after this.
  detail::no_unwind_scope scope;
  wg_.wait();
  cancel_();
}

GORO_DECL void group::set_limit(int n) {
  if (const std::int64_t n_active = active_.load(std::memory_order_acquire); n_active != 0)  // Go's message
    detail::raise_usage(
        ("group::set_limit: modify limit while " + std::to_string(n_active) + " tasks in the group are still active")
            .c_str());
  if (n < 0)
    sem_ = nullptr;
  else
    sem_ = chan<std::monostate>(static_cast<std::size_t>(n));
}

GORO_DECL std::error_code group::wait() {
  wg_.wait();
  cancel_();
  // Only read from here on (the tasks are done): every wait(), later or
  // concurrent, reports the same failure, as Go's Wait returns its error
  // each time. Taking the exception out made a second wait() say {}, and
  // concurrent waits raced on exc_.
#if GORO_EXCEPTIONS
  if (exc_) std::rethrow_exception(exc_);
#endif
  return err_;
}

GORO_DECL void group::fail(std::error_code ec, std::exception_ptr e) {
  {
    std::lock_guard<detail::spinlock> lk(lock_);
    if (failed_) return;
    failed_ = true;
    err_ = ec;
    exc_ = std::move(e);
  }
  cancel_();
}

}  // namespace goro
#endif  // GORO_COMPILE_RUNTIME
