// mutex: the "last unlocker deletes" pattern. An unlock() that has waiters
// to wake still works on the mutex after it released the locked bit (Go's
// unlockSlow); meanwhile other parties may lock, unlock and destroy it.
// A test hook holds the unlocker in exactly that window, so the race is
// deterministic: the destruction must wait for the unlock in flight, and
// the storage must not be written after it.
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

namespace hook {
inline std::atomic<bool> armed{false};
inline std::atomic<bool> entered{false};
inline void in_window() {
  if (!armed.exchange(false)) return;
  entered = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
}
}  // namespace hook
#define GORO_TEST_HOOK_MUTEX_UNLOCKED() hook::in_window()

#include <catch2/catch.hpp>
#include <goro/goro.hpp>

using namespace std::chrono_literals;

namespace {
template <class Pred>
bool wait_until(Pred p, std::chrono::milliseconds limit = 5000ms) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!p()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}
}  // namespace

TEST_CASE("mutex: the last unlocker may destroy it while an earlier unlock is still waking", "[mutex][lifetime]") {
  // The mutex lives in raw storage that is poisoned right after its
  // destruction; a late write from the first unlock() shows up there.
  alignas(goro::mutex) static unsigned char buf[sizeof(goro::mutex)];
  unsigned char poison[sizeof(goro::mutex)];
  std::memset(poison, 0x08, sizeof poison);  // as a state: unlocked, waiters > 0
  auto* m = new (buf) goro::mutex;
  std::atomic<int> refs{3};  // x, y and the main thread each drop one under the lock
  std::atomic<bool> x_locked{false}, x_done{false}, y_deleted{false};

  std::thread x([&] {
    m->lock();
    x_locked = true;
    std::this_thread::sleep_for(100ms);  // y queues as a waiter meanwhile
    refs.fetch_sub(1);
    hook::armed = true;
    m->unlock();  // has a waiter to wake: held in the window by the hook
    x_done = true;
  });
  std::thread y([&] {
    while (!x_locked) std::this_thread::sleep_for(1ms);
    m->lock();
    const bool last = refs.fetch_sub(1) == 1;
    m->unlock();
    if (last) {
      m->~mutex();
      std::memcpy(buf, poison, sizeof buf);
      y_deleted = true;
    }
  });
  REQUIRE(wait_until([] { return hook::entered.load(); }));
  m->lock();  // free now: x's unlock released it and is still in its slow path
  refs.fetch_sub(1);
  m->unlock();  // wakes y, which drops the last reference and destroys m

  const bool finished = wait_until([&] { return x_done.load() && y_deleted.load(); });
  CHECK(finished);
  CHECK(std::memcmp(buf, poison, sizeof buf) == 0);  // nobody wrote to the destroyed mutex
  if (finished) {
    x.join();
    y.join();
  } else {
    x.detach();  // stuck on the poisoned storage; the process ends with the test run
    y.detach();
  }
}
