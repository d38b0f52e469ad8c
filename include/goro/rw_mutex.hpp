// goro::rw_mutex: Go's sync.RWMutex (src/sync/rwmutex.go), for goroutines
// and plain threads. Lockable and SharedLockable: std::lock_guard,
// std::unique_lock and std::shared_lock work with it.
//
// Writer preference: once a writer waits, new readers block until it has
// had the lock, so a stream of readers cannot starve writers (and, as in
// Go, a reader must not lock_shared recursively while a writer may wait).
//
// State: reader_count_ counts readers holding or entering; a writer
// subtracts max_readers from it, so a negative count tells readers that a
// writer is pending. reader_wait_ counts the readers the pending writer
// still waits for (those that held the lock when it announced itself).
// Writers exclude each other with a goro::mutex. The atomic RMWs are
// acq_rel: a reader's add and a writer's subtract see each other in one
// order (the RMW total order on reader_count_), which is what decides who
// waits for whom; the semaphores carry the hand-offs.
#pragma once

#include <atomic>
#include <cstdint>

#include "detail/inside_blocking.hpp"
#include "detail/sema.hpp"
#include "error.hpp"
#include "sync.hpp"

namespace goro {

class rw_mutex {
 public:
  rw_mutex() = default;
  rw_mutex(const rw_mutex&) = delete;
  rw_mutex& operator=(const rw_mutex&) = delete;

  // Go's RLock. Inside goro::blocking (lock too), one that would wait is a
  // usage_error.
  void lock_shared() {
    if (GORO_UNLIKELY(detail::inside_blocking(detail::current_m()))) {
      if (!try_lock_shared()) detail::raise_inside_blocking("rw_mutex lock_shared");
      return;
    }
    detail::call_point();  // main_return (detail/goexit.hpp)
    if (reader_count_.fetch_add(1, std::memory_order_acq_rel) + 1 < 0)
      wait_handover(reader_sem_, detail::wait_reason::rw_mutex_rlock);  // a writer is pending
  }

  // Go's TryRLock: fails while a writer holds or waits for the lock.
  bool try_lock_shared() noexcept {
    std::int32_t c = reader_count_.load(std::memory_order_relaxed);
    for (;;) {
      if (c < 0) return false;
      if (reader_count_.compare_exchange_weak(c, c + 1, std::memory_order_acquire, std::memory_order_relaxed))
        return true;
    }
  }

  // Go's RUnlock. Without a matching lock_shared: usage_error (the count
  // is restored first).
  void unlock_shared() {
    const std::int32_t r = reader_count_.fetch_sub(1, std::memory_order_acq_rel) - 1;
    if (GORO_LIKELY(r >= 0)) return;
    if (r + 1 == 0 || r + 1 == -max_readers) {
      reader_count_.fetch_add(1, std::memory_order_relaxed);
      detail::raise_usage("rw_mutex::unlock_shared of unlocked rw_mutex");
    }
    // A writer is pending: the last of the readers it waits for lets it in.
    if (reader_wait_.fetch_sub(1, std::memory_order_acq_rel) - 1 == 0) writer_sem_.release();
  }

  // Go's Lock: other writers first, then announce ourselves to readers and
  // wait for those already inside.
  void lock() {
    if (GORO_UNLIKELY(detail::inside_blocking(detail::current_m()))) {
      if (!try_lock()) detail::raise_inside_blocking("rw_mutex lock");
      return;
    }
    w_.lock();  // behind another writer: sync.Mutex.Lock in the dump, as in Go
    const std::int32_t r = reader_count_.fetch_sub(max_readers, std::memory_order_acq_rel);
    if (r != 0 && reader_wait_.fetch_add(r, std::memory_order_acq_rel) + r != 0)
      wait_handover(writer_sem_, detail::wait_reason::rw_mutex_lock);
  }

  // Go's TryLock.
  bool try_lock() noexcept {
    if (!w_.try_lock()) return false;
    std::int32_t zero = 0;
    if (!reader_count_.compare_exchange_strong(zero, -max_readers, std::memory_order_acquire,
                                               std::memory_order_relaxed)) {
      w_.unlock();
      return false;
    }
    return true;
  }

  // Go's Unlock: lets in the readers that queued behind us, then the next
  // writer. Without a matching lock: usage_error (the count is restored).
  void unlock() {
    const std::int32_t r = reader_count_.fetch_add(max_readers, std::memory_order_acq_rel) + max_readers;
    if (GORO_UNLIKELY(r >= max_readers)) {
      reader_count_.fetch_sub(max_readers, std::memory_order_relaxed);
      detail::raise_usage("rw_mutex::unlock of unlocked rw_mutex");
    }
    if (r > 0) reader_sem_.release(static_cast<std::uint64_t>(r));
    w_.unlock();
  }

 private:
  static constexpr std::int32_t max_readers = 1 << 30;

  // Waits for the lock to be handed over by the holder. main_return
  // (detail/main_return.hpp) does not take such a waiter off: the counts
  // already include it, and the holder (itself unwinding) hands the lock
  // over as usual; the goroutine then ends at its next goro call, its
  // guard releasing the lock. `why`: Go 1.20's wait reasons for the two
  // semaphores (sync.RWMutex.RLock, sync.RWMutex.Lock).
  static void wait_handover(detail::sema& s, detail::wait_reason why) noexcept {
    detail::g* gp = detail::current_g();
    if (gp) gp->no_kill = true;
    s.acquire(false, nullptr, nullptr, why);
    if (gp) gp->no_kill = false;
  }

  mutex w_;                                    // held by the writer (pending or holding)
  detail::sema writer_sem_;                    // the writer waits here for departing readers
  detail::sema reader_sem_;                    // readers wait here for the writer
  std::atomic<std::int32_t> reader_count_{0};  // readers in; - max_readers while a writer is pending
  std::atomic<std::int32_t> reader_wait_{0};   // departing readers the pending writer waits for
};

}  // namespace goro
