// tracked_allocator: the runtime's memory and a channel's through an
// engine-style tracked allocator (goro::allocator<A>, chan<T, Alloc>), and
// every byte back once they are gone. Exits 0 on success.
#include <goro/goro.hpp>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <memory>

// An engine's tracked allocator: counts the bytes live per category. Copies
// (and rebound copies) share the category; it is thread-safe because the
// counters are atomics and the memory comes from std::allocator.
struct memory_category {
  const char* name;
  std::atomic<std::size_t> live{0}, peak{0};
};
inline memory_category goro_memory{"goro runtime"};

template <class T>
struct tracked {
  using value_type = T;
  memory_category* cat = &goro_memory;

  tracked() noexcept = default;
  explicit tracked(memory_category* c) noexcept : cat(c) {}
  template <class U>
  tracked(const tracked<U>& o) noexcept : cat(o.cat) {}

  T* allocate(std::size_t n) {
    std::size_t now = cat->live.fetch_add(n * sizeof(T)) + n * sizeof(T);
    for (std::size_t p = cat->peak.load(); p < now && !cat->peak.compare_exchange_weak(p, now);) {
    }
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    cat->live.fetch_sub(n * sizeof(T));
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const tracked<U>& o) const noexcept {
    return cat == o.cat;
  }
};

// Every allocation of this runtime except stacks (those come from the
// policy's stack_allocator) goes through tracked<>.
using engine_policy = goro::policy<goro::allocator<tracked<std::byte>>>;

int main() {
  memory_category channels{"channels"};
  {
    goro::basic_runtime<engine_policy> rt;
    rt.run([&] {
      // The channel's buffer and shared state: from its own allocator.
      goro::chan<int, tracked<int>> results(64, tracked<int>(&channels));
      for (int i = 0; i < 64; ++i) goro::go([results, i]() mutable { results.send(i * i); });
      long sum = 0;
      for (int i = 0; i < 64; ++i) sum += *results.recv();
      std::printf("tracked_allocator: sum=%ld, runtime %zu B live (peak %zu B), channels %zu B live\n", sum,
                  goro_memory.live.load(), goro_memory.peak.load(), channels.live.load());
    });
  }
  // The runtime and the channel are gone: everything came back.
  std::printf("tracked_allocator: after: runtime %zu B, channels %zu B\n", goro_memory.live.load(),
              channels.live.load());
  return goro_memory.live.load() == 0 && channels.live.load() == 0 && goro_memory.peak.load() > 0 &&
                 channels.peak.load() > 0
             ? 0
             : 1;
}
