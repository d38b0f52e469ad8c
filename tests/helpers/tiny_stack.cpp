// A goroutine on a 2 KiB stack takes the first path into a C library
// function the runtime calls on goroutine stacks: a spinlock whose holder
// (a plain thread) keeps it for 100 ms, so the waiter goes from pauses to
// sched_yield to naps (nanosleep). In a fresh process nothing has called
// nanosleep yet, and with lazy binding its first call runs the dynamic
// linker's resolver, which reserves room for the whole vector register
// file on the caller's stack (~2.7 KiB with AVX-512): on a 2 KiB stack it
// wrote up to ~1.8 KiB below the stack, into the neighbouring one (in
// stack_test's 2 KiB case under load it hit the canary instead). The
// runtime binds such functions before any goroutine runs
// (detail::resolve_runtime_symbols). Then timers, channels, select, a
// contended mutex and a spawn, each first used on a 2 KiB stack.
//
// The stacks come from an allocator that puts a 4 KiB red zone below
// each 2 KiB stack (8 KiB in an unoptimized build); the helper prints "ok" and exits 0 when every red
// zone is intact and the goroutine finished.
#include <goro/goro.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

namespace {

// Never expected (4 slots, at most 3 goroutines alive): no exception, so
// the helper also builds with -fno-exceptions.
[[noreturn]] void out_of_stacks() {
  std::fputs("goro-test: the red-zone allocator ran out\n", stderr);
  std::abort();
}

struct red_zone_allocator {
  // Unoptimized, the runtime's own paths alone take up to ~3 KiB.
#if defined(__OPTIMIZE__)
  static constexpr std::size_t red = 4096, size = 2048;
#else
  static constexpr std::size_t red = 4096, size = 8192;
#endif
  static constexpr int count = 4;
  struct slot {
    alignas(64) unsigned char red_zone[red];
    unsigned char stack[size];
  };
  static inline slot slots[count];
  static inline bool used[count];
  static inline std::mutex mu;

  static void init() {
    for (auto& s : slots) std::memset(s.red_zone, 0x5a, red);
  }
  static std::size_t damaged() {
    std::size_t n = 0;
    for (auto& s : slots)
      for (unsigned char c : s.red_zone) n += c != 0x5a;
    return n;
  }
  goro::stack_memory allocate(std::size_t n) {
    if (n > size) {  // the main goroutine's stack
      void* p = std::aligned_alloc(4096, n);
      if (!p) out_of_stacks();
      return {p, n};
    }
    std::lock_guard<std::mutex> lk(mu);
    for (int i = 0; i < count; ++i)
      if (!used[i]) {
        used[i] = true;
        return {slots[i].stack, size};
      }
    out_of_stacks();
  }
  void deallocate(goro::stack_memory s) noexcept {
    std::lock_guard<std::mutex> lk(mu);
    for (int i = 0; i < count; ++i)
      if (s.lo == slots[i].stack) {
        used[i] = false;
        return;
      }
    std::free(s.lo);
  }
};
static_assert(goro::stack_allocator<red_zone_allocator>);

// The lock taken a few hundred bytes down the goroutine's stack, as the
// runtime's own paths do (gosched -> global queue -> its lock).
__attribute__((noinline)) void lock_deep(goro::detail::spinlock& lock, int depth) {
  volatile char frame[96];
  for (auto& c : frame) c = 1;
  if (depth > 0) {
    lock_deep(lock, depth - 1);
  } else {
    lock.lock();  // naps: the holder is busy for 100 ms
    lock.unlock();
  }
  (void)frame[0];
}

// Runs fn a few hundred bytes down the goroutine's stack.
template <class F>
__attribute__((noinline)) void at_depth(int depth, F&& fn) {
  volatile char frame[96];
  for (auto& c : frame) c = 1;
  if (depth > 0) {
    at_depth(depth - 1, fn);
  } else {
    fn();
  }
  (void)frame[0];
}

}  // namespace

int main() {
  red_zone_allocator::init();
  goro::detail::spinlock lock;
  std::atomic<bool> held{false};
  std::thread holder([&] {
    lock.lock();
    held.store(true);
    // Busy, not sleep_for: that would bind nanosleep on this big stack.
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    while (std::chrono::steady_clock::now() < until) {
    }
    lock.unlock();
  });
  int got = 0;
  {
    using policy = goro::policy<goro::stacks<red_zone_allocator>, goro::stack<red_zone_allocator::size>>;
    goro::basic_runtime<policy> rt{goro::options{1}};
    rt.run([&] {
      goro::wait_group wg;
      wg.add(1);
      goro::go([&] {
        while (!held.load()) goro::yield();
        lock_deep(lock, 3);  // ~500 bytes of frames, then the lock
        got = 1;
        goro::yield();  // switches out: the canary is checked
        wg.done();
      });
      wg.wait();
      // The runtime's other goroutine-side paths, each first taken on a
      // 2 KiB stack a few frames down: timers, blocking channel
      // operations, select with a timeout, a contended mutex, spawning.
      goro::chan<int> ch(1);  // buffered: if the select times out, the second send still completes
      goro::mutex mu;
      wg.add(2);
      goro::go([&] {
        at_depth(2, [&] {
          goro::sleep_for(std::chrono::milliseconds(1));
          ch.send(1);
          goro::select(goro::on_recv(ch, [](std::optional<int>) {}),
                       goro::on_recv(goro::after(std::chrono::milliseconds(1)), [](auto) {}));
          std::lock_guard<goro::mutex> lk(mu);
          goro::yield();  // holding it: the other goroutine blocks on it
        });
        wg.done();
      });
      goro::go([&] {
        at_depth(2, [&] {
          (void)ch.recv();
          ch.send(2);
          std::lock_guard<goro::mutex> lk(mu);
          goro::go([&] { wg.done(); });
        });
      });
      wg.wait();
      got += 1;
    });
  }
  holder.join();
  const std::size_t damaged = red_zone_allocator::damaged();
  if (damaged != 0) {
    std::printf("goro-test: %zu bytes below the 2 KiB stacks were overwritten\n", damaged);
    return 1;
  }
  std::puts(got == 2 ? "ok" : "goro-test: a goroutine did not finish");
  return got == 2 ? 0 : 1;
}
