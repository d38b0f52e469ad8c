// External Ms: plain threads as deadlock detection sees them (SPEC,
// Runtime, "Deadlock detection"). Go counts the extra M a cgo callback runs
// on as a running M, so checkdead never fires while one can still call in.
// Here any plain thread may wake a goroutine (a channel send, wait_group
// done, mutex unlock, rt.go...), and goro objects belong to no runtime, so
// the accounting is process-wide:
//
// - extm_live: plain threads that have used a goro object and not exited
//   (registered at their first call that reaches the runtime: blocking on
//   an object or a socket, waking or starting a goroutine, adding a timer;
//   dropped at thread exit), plus the outside-timer thread while it has
//   timers and the signal thread while signals are relayed (extm_hold).
//   While one is live, no runtime is declared deadlocked. A call that
//   stays inside the object (a send into a buffer nobody waits on) is
//   not seen: checking for a plain thread there would cost every
//   goroutine's channel operation a thread-local read.
// - extm_epoch: bumped by each such call, by any wake or spawn into a
//   runtime from a thread that is not one of its Ms, and by each external
//   M's exit. A deadlock is confirmed only after a grace period in which it
//   did not move: that covers a thread's window before its first call (the
//   runtime cannot know the thread exists) and the exit of the last one.
//
// Only plain-thread paths touch these (after current_m() said so); a
// goroutine's own channel and sync operations never do.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "config.hpp"
#include "m.hpp"
#include "note.hpp"
#include "spinlock.hpp"
#include "test_seam.hpp"

namespace goro::detail {

// How long a suspected deadlock must last, with no external activity, before
// run() throws (SPEC: between 100 ms and 1 s).
inline constexpr std::int64_t deadlock_grace_ns = 250'000'000;

// A test seam (test_seam.hpp; tests/deadlock_plain_thread_test.cpp):
// called on the run() caller's thread with no lock held, when a deadlock
// has lasted the grace period and is about to be confirmed: a test makes a
// plain thread's first call land exactly in that window.
namespace testing {
inline test_seam<> deadlock_confirm_hook;
}  // namespace testing

inline std::atomic<std::uint32_t> extm_live{0};
inline std::atomic<std::uint64_t> extm_epoch{0};

// Runtimes waiting for an external M to exit (a suspected deadlock with
// extm_live > 0): their run() caller's M sleeps on `n` until then.
struct extm_watcher {
  note* n = nullptr;
  extm_watcher* next = nullptr;
};
inline spinlock extm_watch_lock;
inline extm_watcher* extm_watchers = nullptr;  // guarded by extm_watch_lock

inline void extm_watch(extm_watcher* w) noexcept {
  extm_watch_lock.lock();
  w->next = extm_watchers;
  extm_watchers = w;
  extm_watch_lock.unlock();
}
inline void extm_unwatch(extm_watcher* w) noexcept {
  extm_watch_lock.lock();
  for (extm_watcher** pw = &extm_watchers; *pw; pw = &(*pw)->next) {
    if (*pw == w) {
      *pw = w->next;
      break;
    }
  }
  extm_watch_lock.unlock();
}

// An external M went away: bump the epoch (the grace period restarts), then
// wake every watcher (under the lock: a watcher unlinks itself before its
// note can go away). Dekker with the watcher, which links itself and then
// reads extm_live (seq_cst both sides): either it sees the decrement, or
// this sees it linked.
inline void extm_drop() noexcept {
  extm_epoch.fetch_add(1, std::memory_order_seq_cst);
  extm_live.fetch_sub(1, std::memory_order_seq_cst);
  extm_watch_lock.lock();
  for (extm_watcher* w = extm_watchers; w; w = w->next) w->n->wake();
  extm_watch_lock.unlock();
}

inline thread_local bool extm_registered = false;
inline thread_local bool extm_internal = false;  // a runtime's own thread (sysmon, outside timers): never counted

// Its destructor reads nothing of its own: with MinGW-w64's emulated TLS it
// runs after the thread's thread_local storage was freed (os/windows/thread.hpp).
struct extm_exit {
  ~extm_exit() { extm_drop(); }
};

GORO_NOINLINE inline void extm_register() noexcept {
  extm_registered = true;
  extm_live.fetch_add(1, std::memory_order_seq_cst);
  static thread_local extm_exit at_exit;  // dropped when the thread exits
  (void)at_exit;
}

// A plain thread (current_m() == nullptr) reaches the runtime: it counts as
// a live external M from now on, and this is external activity.
inline void extm_plain_op() noexcept {
  if (GORO_UNLIKELY(!extm_registered) && !extm_internal) extm_register();
  extm_epoch.fetch_add(1, std::memory_order_seq_cst);
}

// A wake or spawn into a runtime from a thread that is not one of its Ms
// (a plain thread, another runtime's M, a runtime's own helper thread).
// m: the caller's current_m().
inline void extm_outside_op(const m_base* m) noexcept {
  if (m == nullptr)
    extm_plain_op();
  else
    extm_epoch.fetch_add(1, std::memory_order_seq_cst);
}
inline void extm_outside_op() noexcept { extm_outside_op(current_m()); }

// Marks the calling thread as one of a runtime's own (not an external M).
inline void extm_mark_internal() noexcept { extm_internal = true; }

// For its lifetime the calling thread acts for a runtime, not as an
// external M: its wakes count as external activity (the epoch) but do not
// register it. The kill pass of main_return.hpp readies goroutines from the
// ender thread or from the thread destroying the runtime; that thread was
// then counted live until it exited, and no other runtime's deadlock was
// reported meanwhile.
struct extm_internal_scope {
  const bool was = extm_internal;
  extm_internal_scope() noexcept { extm_internal = true; }
  ~extm_internal_scope() { extm_internal = was; }
  extm_internal_scope(const extm_internal_scope&) = delete;
  extm_internal_scope& operator=(const extm_internal_scope&) = delete;
};

// Whether the calling thread counts in extm_live (run() reads it for its
// own thread, which is no external M while inside run()).
inline bool extm_counted_here() noexcept { return extm_registered; }

// The thread_lanes (lane.hpp) the calling thread owns, each a live
// external M (extm_hold) for its whole life -- except while this thread is
// inside run(): it cannot pump them then, so run()'s checkdead discounts
// them as it does the thread's own count. Shared: a lane destroyed on
// another thread still uncounts itself here.
using lane_count = std::atomic<std::uint32_t>;
inline const std::shared_ptr<lane_count>& lanes_owned_here() {
  static thread_local const std::shared_ptr<lane_count> n = std::make_shared<lane_count>(0);
  return n;
}

// Counts (+1) or uncounts (-1) one of the runtime's own helper threads as
// an external M while it may still wake a goroutine: the outside-timer
// thread while it has timers pending (a plain thread's after()), the
// signal thread while a signal::notify registration exists.
inline void extm_hold(bool hold) noexcept {
  if (hold) {
    extm_epoch.fetch_add(1, std::memory_order_seq_cst);
    extm_live.fetch_add(1, std::memory_order_seq_cst);
  } else {
    extm_drop();
  }
}

}  // namespace goro::detail
