// Stacks: the default slab allocator, guard regions, small packed stacks,
// custom allocators (pool exhaustion reported by go()), and a million live
// goroutines under the default vm.max_map_count.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace {

std::size_t count_mappings() {
  std::ifstream maps("/proc/self/maps");
  std::size_t n = 0;
  std::string line;
  while (std::getline(maps, line)) ++n;
  return n;
}

// Protection string ("rw-p", "---p") of the mapping holding addr.
std::string protection_at(std::uintptr_t addr) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range, prot;
    in >> range >> prot;
    auto dash = range.find('-');
    auto lo = std::stoull(range.substr(0, dash), nullptr, 16);
    auto hi = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (addr >= lo && addr < hi) return prot;
  }
  return "unmapped";
}

// Whether the kernel refuses to read the byte at addr (a guard region,
// PROT_NONE or a MADV_GUARD_INSTALL marker, which /proc/self/maps does not show).
bool unreadable(std::uintptr_t addr) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  bool refused = write(fds[1], reinterpret_cast<const void*>(addr), 1) < 0 && errno == EFAULT;
  close(fds[0]);
  close(fds[1]);
  return refused;
}

// A fixed pool of 8 stacks, as an embedded user might plug in.
struct pool_allocator {
  static constexpr std::size_t size = 16 * 1024;
  static constexpr int count = 8;
  alignas(16) static inline unsigned char memory[count][size];
  static inline std::mutex mu;
  static inline bool used[count];
  static inline std::atomic<int> in_use{0};

  goro::stack_memory allocate(std::size_t n) {
    std::lock_guard<std::mutex> lk(mu);
    if (n > size) throw std::bad_alloc();
    for (int i = 0; i < count; ++i)
      if (!used[i]) {
        used[i] = true;
        in_use.fetch_add(1);
        return {memory[i], size};
      }
    throw std::bad_alloc();
  }
  void deallocate(goro::stack_memory s) noexcept {
    std::lock_guard<std::mutex> lk(mu);
    for (int i = 0; i < count; ++i)
      if (s.lo == memory[i]) {
        used[i] = false;
        in_use.fetch_sub(1);
      }
  }
};
static_assert(goro::stack_allocator<pool_allocator>);

}  // namespace

TEST_CASE("stack: default allocator hands out distinct aligned stacks", "[stack]") {
  goro::default_stack_allocator a;
  std::vector<goro::stack_memory> v;
  for (int i = 0; i < 100; ++i) v.push_back(a.allocate(64 * 1024));
  for (std::size_t i = 0; i < v.size(); ++i) {
    CHECK(reinterpret_cast<std::uintptr_t>(v[i].lo) % 16 == 0);
    CHECK(v[i].size == 64 * 1024);
    for (std::size_t j = i + 1; j < v.size(); ++j) {
      auto a0 = reinterpret_cast<std::uintptr_t>(v[i].lo), b0 = reinterpret_cast<std::uintptr_t>(v[j].lo);
      CHECK((a0 + v[i].size <= b0 || b0 + v[j].size <= a0));
    }
  }
  // Guarded: the 64 KiB right below a stack cannot be read (guard markers
  // where the kernel has MADV_GUARD_INSTALL, else PROT_NONE while the budget lasts).
  for (auto& s : v) {
    auto lo = reinterpret_cast<std::uintptr_t>(s.lo);
    CHECK(unreadable(lo - 1));
    CHECK(unreadable(lo - 64 * 1024));
    CHECK_FALSE(unreadable(lo));
    CHECK_FALSE(unreadable(lo + s.size - 1));
  }
  if (!goro::detail::guard_install_available())
    CHECK(protection_at(reinterpret_cast<std::uintptr_t>(v[0].lo) - 1).substr(0, 3) == "---");
  // Freed stacks are reused.
  void* first = v.back().lo;
  a.deallocate(v.back());
  CHECK(a.allocate(64 * 1024).lo == first);
}

// Stacks freed out of order from several slabs find their own slab again
// (deallocate looks it up by address: whether the stack is guarded, and
// which neighbours it may be released with), through the free lists and
// through the release of stacks past the resident bound.
TEST_CASE("stack: stacks freed out of order from many slabs keep their guards", "[stack]") {
  goro::default_stack_allocator a;
  constexpr std::size_t size = 64 * 1024;
  const int n = goro_test::scale(1200, 600);  // several 16 MiB slabs, past the resident bound (256)
  std::vector<goro::stack_memory> v;
  std::map<void*, bool> guarded;  // as made (a slab past the mprotect budget has none)
  for (int i = 0; i < n; ++i) {
    bool g = false;
    v.push_back(a.allocate(size, g));
    guarded[v.back().lo] = g;
    std::memset(v.back().lo, 0x5a, 64);  // touched: a release must not reach a live stack
  }
  // Free every other one in a scrambled order, release what waits, then check
  // that the live ones kept their contents.
  std::vector<std::size_t> order;
  for (int i = 0; i < n; i += 2) order.push_back(static_cast<std::size_t>(i));
  for (std::size_t i = 0; i < order.size(); ++i) std::swap(order[i], order[(i * 7919 + 13) % order.size()]);
  for (std::size_t i : order) a.deallocate(v[i]);
  a.scavenge();
  for (int i = 1; i < n; i += 2) REQUIRE(static_cast<const unsigned char*>(v[static_cast<std::size_t>(i)].lo)[0] == 0x5a);
  // Reused stacks come back as guarded as they were made.
  std::vector<goro::stack_memory> again;
  for (std::size_t k = 0; k < order.size(); ++k) {
    bool g = false;
    again.push_back(a.allocate(size, g));
    const auto made = guarded.find(again.back().lo);
    REQUIRE(made != guarded.end());
    CHECK(g == made->second);
    if (g) CHECK(unreadable(reinterpret_cast<std::uintptr_t>(again.back().lo) - 1));
  }
  for (auto& s : again) a.deallocate(s);
  for (int i = 1; i < n; i += 2) a.deallocate(v[static_cast<std::size_t>(i)]);
}

TEST_CASE("stack: small packed stacks (2 KiB, 8 KiB) run goroutines", "[stack][policy]") {
  auto work = [](auto& rt) {
    std::atomic<int> sum{0};
    rt.run([&] {
      goro::wait_group wg;
      const int n = goro_test::scale(20000, 500);
      wg.add(n);
      for (int i = 0; i < n; ++i)
        goro::go([&] {
          sum.fetch_add(1);
          goro::yield();
          wg.done();
        });
      wg.wait();
    });
    return sum.load();
  };
  // The deepest goroutine-side path here (20 runs of this workload on 8
  // KiB pattern-filled stacks) used 1,256 bytes at -O2 and 2,984 at clang
  // -O0: unoptimized builds get 4 KiB, sanitized ones neither size.
#if GORO_TEST_SANITIZED
#elif defined(__OPTIMIZE__)
  goro::basic_runtime<goro::policy<goro::stack<2048>>> r2{goro::options{2}};
  CHECK(work(r2) == goro_test::scale(20000, 500));
#else
  goro::basic_runtime<goro::policy<goro::stack<4096>>> r2{goro::options{2}};
  CHECK(work(r2) == goro_test::scale(20000, 500));
#endif
  goro::basic_runtime<goro::policy<goro::stack<8192>>> r8{goro::options{2}};
  CHECK(work(r8) == goro_test::scale(20000, 500));
}

#if !GORO_TEST_SANITIZED && !defined(_WIN32)
// The first call of a lazily bound C library function runs the dynamic
// linker's resolver on the caller's stack (~2.7 KiB with AVX-512): the
// runtime's own calls on goroutine stacks are bound before any goroutine
// runs. The helper's goroutine, on a 2 KiB stack in a fresh process, naps
// in a spinlock held by a plain thread (nanosleep's first call).
TEST_CASE("stack: runtime paths on a 2 KiB stack never bind a library function there", "[stack]") {
  auto r = goro_test::run_helper("tiny_stack");
  INFO(r.output);
  CHECK(r.exited);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("ok") != std::string::npos);
}
#endif

TEST_CASE("stack: a custom pool allocator; exhaustion is reported by go()", "[stack][policy]") {
  using pool_policy = goro::policy<goro::stacks<pool_allocator>, goro::stack<pool_allocator::size>>;
  {
    goro::basic_runtime<pool_policy> rt{goro::options{1}};
    rt.run([] {
      goro::wait_group release, started;
      release.add(1);
      // main holds one stack; 7 more goroutines fill the pool
      started.add(7);
      for (int i = 0; i < 7; ++i)
        goro::go([&] {
          started.done();
          release.wait();
        });
      started.wait();
      CHECK(pool_allocator::in_use.load() == 8);
      CHECK_THROWS_AS(goro::go([] {}), std::bad_alloc);
      CHECK(goro::num_goroutine() == 8);  // the failed spawn left nothing behind
      release.done();
    });
  }
  CHECK(pool_allocator::in_use.load() == 0);  // every stack went back to the pool
}

TEST_CASE("stack: 1,000,000 goroutines alive at once under the default map limit", "[stack][million]") {
  // qemu-user: 200,000 (35 s for the million there; the x86-64 run checks it).
  const int n = goro_test::scale(1'000'000, 2'000, 200'000);
  goro::runtime rt{goro::options{2}};
  std::size_t maps_at_peak = 0;
  rt.run([&] {
    goro::wait_group release, started, finished;
    release.add(1);
    started.add(n);
    finished.add(n);
    for (int i = 0; i < n; ++i)
      goro::go([&] {
        started.done();
        release.wait();
        finished.done();
      });
    started.wait();  // every goroutine has run and holds its stack
    CHECK(goro::num_goroutine() == static_cast<std::size_t>(n) + 1);
    maps_at_peak = count_mappings();
    release.done();
    finished.wait();
  });
  INFO("mappings at peak: " << maps_at_peak);
  CHECK(maps_at_peak < 65530);
}

#if !GORO_TEST_SANITIZED  // the sanitizers' shadow of the stacks stays resident
namespace {
std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

__attribute__((noinline)) void touch_32k() {
  volatile char buf[32 * 1024];
  for (std::size_t i = 0; i < sizeof buf; i += 512) buf[i] = 1;
}
}  // namespace

// A burst of goroutines that each use 32 KiB of stack: once they have
// exited, the stacks beyond a bounded cache go back to the kernel
// (MADV_DONTNEED) instead of keeping the burst's peak resident forever.
// Lazily: sysmon releases them once the frees have stopped for 1 ms (at
// most 100 ms after they began), so the check waits up to 2 s for it.
TEST_CASE("stack: a burst's stack memory is returned after it", "[stack][rss]") {
  const int n = 20'000;
  goro::runtime rt{goro::options{2}};
  std::size_t before = 0, peak = 0, after = 0;
  rt.run([&] {
    before = resident_bytes();
    goro::wait_group release, started, finished;
    release.add(1);
    started.add(n);
    finished.add(n);
    for (int i = 0; i < n; ++i)
      goro::go([&] {
        touch_32k();
        started.done();
        release.wait();
        finished.done();
      });
    started.wait();
    peak = resident_bytes();
    release.done();
    finished.wait();
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    do {
      goro::sleep_for(std::chrono::milliseconds(5));
      after = resident_bytes();
    } while (after >= before + (peak - before) / 4 && std::chrono::steady_clock::now() < give_up);
  });
  const double mib = 1024.0 * 1024.0;
  INFO("RSS before the burst " << before / mib << " MiB, at its peak " << peak / mib << " MiB, after it " << after / mib
                               << " MiB (" << n << " goroutines x 32 KiB)");
  REQUIRE(peak > before + static_cast<std::size_t>(n) * 16 * 1024);  // the burst was resident
  // What stays: G records, the per-P caches and the allocator's bounded resident cache.
  CHECK(after < before + (peak - before) / 4);
}
#endif

namespace {
// ~1 KiB per frame; the buffer's bytes are volatile stores (not elided).
__attribute__((noinline)) int deep(int depth) {
  volatile char frame[1000];
  for (auto& c : frame) c = static_cast<char>(depth | 1);
  if (depth == 0) return frame[0];
  return deep(depth - 1) + frame[7];
}
}  // namespace

// SPEC "Engine embedding": goro::go(spawn_options{.stack_size}, f) sizes one
// goroutine's stack, in power-of-two classes.
TEST_CASE("stack: spawn_options::stack_size gives one goroutine a larger or smaller stack", "[stack][spawn_options]") {
  goro::runtime rt{goro::options{2}};
  std::size_t big = 0, tiny = 0, odd = 0, plain = 0;
  int depth_result = 0;
  rt.run([&] {
    goro::wait_group wg;
    wg.add(4);
    // A 1 MiB recursion in a goroutine spawned with a 2 MiB stack (the
    // policy's 64 KiB would overflow).
    goro::go(goro::spawn_options{.stack_size = 2 << 20}, [&] {
      big = goro::detail::current_g()->stack.size;
      depth_result = deep(1024);
      wg.done();
    });
    goro::go(goro::spawn_options{.stack_size = 4096}, [&] {
      tiny = goro::detail::current_g()->stack.size;
      wg.done();
    });
    goro::go(goro::spawn_options{.stack_size = 5000}, [&] {  // rounded up to its class, 8 KiB
      odd = goro::detail::current_g()->stack.size;
      wg.done();
    });
    goro::go(goro::spawn_options{}, [&] {  // 0: the policy's
      plain = goro::detail::current_g()->stack.size;
      wg.done();
    });
    wg.wait();
  });
  CHECK(big == (2u << 20));
  CHECK(depth_result != 0);
  CHECK(tiny == 4096);
  CHECK(odd == 8192);
  CHECK(plain == goro::default_policy::stack_size);
}

TEST_CASE("stack: spawn_options from outside the runtime (rt.go) and a reused record", "[stack][spawn_options]") {
  goro::runtime rt{goro::options{1}};
  std::atomic<std::size_t> sized{0}, after{0};
  goro::wait_group wg;
  wg.add(1);
  rt.go(goro::spawn_options{.stack_size = 1 << 20}, [&] {
    sized = goro::detail::current_g()->stack.size;
    wg.done();
  });
  wg.wait();
  // The record goes back to the free list; the next plain spawn gets the
  // policy's stack, not the previous request.
  for (int i = 0; i < 64; ++i) {
    wg.add(1);
    rt.go([&] {
      after = goro::detail::current_g()->stack.size;
      wg.done();
    });
    wg.wait();
    REQUIRE(after.load() == goro::default_policy::stack_size);
  }
  CHECK(sized.load() == (1u << 20));
}

TEST_CASE("stack: spawn_options::stack_size outside [2 KiB, 1 GiB] is a usage error", "[stack][spawn_options]") {
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    CHECK_THROWS_WITH(goro::go(goro::spawn_options{.stack_size = 100}, [] {}),
                      Catch::Matchers::Contains("spawn_options::stack_size must be between 2048 bytes and 1 GiB, got 100"));
    CHECK_THROWS_AS(goro::go(goro::spawn_options{.stack_size = std::size_t{2} << 30}, [] {}), goro::usage_error);
    CHECK(goro::num_goroutine() == 1);  // nothing was left behind
  });
}

TEST_CASE("stack: a custom allocator is asked for the spawn_options size (and may refuse)", "[stack][spawn_options][policy]") {
  using pool_policy = goro::policy<goro::stacks<pool_allocator>, goro::stack<pool_allocator::size>>;
  {
    goro::basic_runtime<pool_policy> rt{goro::options{1}};
    rt.run([] {
      CHECK_THROWS_AS(goro::go(goro::spawn_options{.stack_size = 4 * pool_allocator::size}, [] {}), std::bad_alloc);
      CHECK(goro::num_goroutine() == 1);  // the refused spawn left nothing behind
      goro::wait_group wg;
      wg.add(1);
      goro::go(goro::spawn_options{.stack_size = pool_allocator::size}, [&] { wg.done(); });
      wg.wait();
    });
  }
  CHECK(pool_allocator::in_use.load() == 0);  // every stack went back to the pool
}

TEST_CASE("stack: a custom allocator refusing main's stack: run() throws bad_alloc, the runtime stays usable",
          "[stack][policy]") {
  // main's stack was taken as main started, with this thread already the
  // runtime's M: the bad_alloc left it so, and the destructor aborted
  // ("runtime destroyed from inside one of its own goroutines").
  using pool_policy = goro::policy<goro::stacks<pool_allocator>, goro::stack<pool_allocator::size>>;
  {
    goro::basic_runtime<pool_policy> rt{goro::options{1}};
    pool_allocator pool;
    std::vector<goro::stack_memory> taken;
    for (int i = 0; i < pool_allocator::count; ++i) taken.push_back(pool.allocate(pool_allocator::size));
    bool ran = false;
    CHECK_THROWS_AS(rt.run([&] { ran = true; }), std::bad_alloc);
    CHECK_FALSE(ran);
    for (goro::stack_memory s : taken) pool.deallocate(s);
    rt.run([&] {
      goro::chan<int> c(1);
      goro::go([c]() mutable { c.send(1); });
      ran = *c.recv() == 1;
    });
    CHECK(ran);
  }
  CHECK(pool_allocator::in_use.load() == 0);
}

// Counts what a runtime asks of its stack allocator, per size.
struct counting_stack_allocator {
  static inline std::mutex mu;
  static inline std::vector<std::size_t> sizes;  // one entry per allocate
  static inline std::atomic<int> in_use{0};
  goro::default_stack_allocator inner;

  goro::stack_memory allocate(std::size_t n) {
    goro::stack_memory s = inner.allocate(n);
    std::lock_guard<std::mutex> lk(mu);
    sizes.push_back(n);
    in_use.fetch_add(1);
    return s;
  }
  void deallocate(goro::stack_memory s) noexcept {
    in_use.fetch_sub(1);
    inner.deallocate(s);
  }
  static std::size_t asked(std::size_t n) {
    std::lock_guard<std::mutex> lk(mu);
    return static_cast<std::size_t>(std::count(sizes.begin(), sizes.end(), n));
  }
};
static_assert(goro::stack_allocator<counting_stack_allocator>);

TEST_CASE("stack: spawn_options stacks are reused through the P's cache, and all returned", "[stack][spawn_options][policy]") {
  using counting_policy = goro::policy<goro::stacks<counting_stack_allocator>>;
  counting_stack_allocator::sizes.clear();
  {
    goro::basic_runtime<counting_policy> rt{goro::options{1}};
    rt.run([] {
      // One at a time, alternating two classes: each exit leaves its stack
      // in the P's cache of other classes for the next spawn of its class.
      for (int i = 0; i < 200; ++i) {
        goro::wait_group wg;
        wg.add(1);
        goro::go(goro::spawn_options{.stack_size = std::size_t{i % 2 ? 32u : 256u} * 1024}, [&] { wg.done(); });
        wg.wait();
      }
      // More alive at once than the cache holds: still correct.
      goro::wait_group wg;
      goro::chan<int> gate;
      wg.add(40);
      for (int i = 0; i < 40; ++i)
        goro::go(goro::spawn_options{.stack_size = 32 * 1024}, [&] {
          (void)gate.recv();
          wg.done();
        });
      gate.close();
      wg.wait();
    });
    CHECK(counting_stack_allocator::asked(256 * 1024) <= 2);
    CHECK(counting_stack_allocator::asked(32 * 1024) <= 41);
  }
  CHECK(counting_stack_allocator::in_use.load() == 0);  // the caches went back at destruction
}

TEST_CASE("stack: rt.go from outside with spawn_options gets the size from a custom allocator", "[stack][spawn_options][policy]") {
  using counting_policy = goro::policy<goro::stacks<counting_stack_allocator>>;
  goro::basic_runtime<counting_policy> rt{goro::options{1}};
  std::atomic<std::size_t> sized{0};
  goro::wait_group wg;
  wg.add(1);
  rt.go(goro::spawn_options{.stack_size = 512 * 1024}, [&] {
    sized = goro::detail::current_g()->stack.size;
    wg.done();
  });
  wg.wait();
  CHECK(sized.load() == 512u * 1024);
}

// The main goroutine gets a thread's 8 MiB by default (options::main_stack_size).
TEST_CASE("stack: a 4 MiB recursion in the main goroutine by default; main_stack_size sets it", "[stack][main_stack]") {
  int r = 0;
  std::size_t main_size = 0;
  goro::run([&] {
    main_size = goro::detail::current_g()->stack.size;
    r = deep(4 * 1024);
  });
  CHECK(r != 0);
  CHECK(main_size == (8u << 20));

  goro::options o;
  o.maxprocs = 1;
  o.main_stack_size = 16 << 20;
  goro::run([&] { main_size = goro::detail::current_g()->stack.size; }, o);
  CHECK(main_size == (16u << 20));

  o.main_stack_size = 4096;
  CHECK_THROWS_WITH(goro::runtime(o), Catch::Matchers::Contains("main_stack_size must be between 64 KiB and 1 GiB"));
}
