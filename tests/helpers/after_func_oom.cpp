// An after_func fires when its runtime's allocator refuses the goroutine
// it must start (every G record in use, no block for more): goro must say
// what went wrong -- out of memory -- and abort (Go's newproc throws then).
#include <goro/goro.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <new>

namespace {
std::atomic<bool> refuse{false};  // an arena that is full from now on

template <class T>
struct arena {
  using value_type = T;
  arena() noexcept = default;
  template <class U>
  arena(const arena<U>&) noexcept {}  // NOLINT: rebinding
  T* allocate(std::size_t n) {
    if (refuse.load()) throw std::bad_alloc();
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept { std::allocator<T>().deallocate(p, n); }
  template <class U>
  bool operator==(const arena<U>&) const noexcept {
    return true;
  }
};
}  // namespace

int main() {
#if !defined(__cpp_exceptions)
  std::fputs("goro_helper_after_func_oom: built without exceptions\n", stderr);
  return 2;
#else
  goro::basic_runtime<goro::policy<goro::allocator<arena<std::byte>>>> rt({.maxprocs = 1});
  rt.run([] {
    goro::chan<int> never;
    auto t = goro::after_func(std::chrono::milliseconds(50), [] {});
    refuse = true;
    // Every G record in use: the next spawn needs a block the arena refuses.
    for (;;) {
      try {
        goro::go([never]() mutable { (void)never.recv(); });
      } catch (const std::bad_alloc&) {
        break;
      }
    }
    (void)never.recv();  // the after_func fires meanwhile
  });
  return 0;  // not reached
#endif
}
