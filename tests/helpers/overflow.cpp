// Overflows a goroutine's stack on purpose. argv[1]:
//   "guarded" (default): 64 KiB stacks with guard regions, deep recursion;
//   "small": 4 KiB stacks packed without guards: caught by the fault
//     handler below the slab or by the canary;
//   "late": one large frame (96 KiB on a 64 KiB stack) in a goroutine
//     spawned after 12,000 live ones, past the mprotect guard budget of the
//     default vm.max_map_count: it must hit a guard (MADV_GUARD_INSTALL),
//     not write silently into the neighbouring stack;
//   "canary": no guards at all (the fallback when the kernel lacks
//     MADV_GUARD_INSTALL and the mprotect budget is spent); a goroutine
//     overwrites words 1-3 at the low end of its stack, leaving word 0:
//     the multi-word canary catches it when the goroutine switches out.
//   "spawn_options": a goroutine spawned with a 256 KiB stack
//     (spawn_options::stack_size) recurses without end: the report names
//     its size;
//   "main": the main goroutine (8 MiB by default, options::main_stack_size)
//     recurses without end: it has a guard too.
#include <goro/goro.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace {
// Each frame holds a buffer the compiler cannot drop: every byte is a
// volatile store (a memset through const_cast is not, and clang elides it).
__attribute__((noinline)) int recurse(int depth) {
  volatile char frame[512];
  for (auto& c : frame) c = static_cast<char>(depth | 1);
  if (depth == 0) return frame[0];
  return recurse(depth - 1) + frame[7];
}

// One frame larger than the stack; only its two ends are written, so the
// lowest byte lands about 32 KiB below the stack without touching the
// stack's low end (where the canary is). The array's address escapes
// (the empty asm): clang otherwise lays out only the two bytes it touches.
__attribute__((noinline)) int large_frame() {
  volatile char big[96 * 1024];
  asm volatile("" : : "r"(big) : "memory");
  big[sizeof big - 1] = 1;
  big[0] = 2;
  return big[0] + big[sizeof big - 1];
}

template <class Policy>
void overflow(int depth) {
  goro::basic_runtime<Policy> rt{goro::options{1}};
  rt.run([depth] {
    goro::wait_group wg;
    wg.add(1);
    goro::go([&wg, depth] {
      volatile int r = recurse(depth);
      (void)r;
      wg.done();
    });
    wg.wait();
  });
}

void sized(bool in_main) {
  goro::runtime rt{goro::options{1}};
  rt.run([in_main] {
    if (in_main) {
      volatile int r = recurse(1 << 30);
      (void)r;
      return;
    }
    goro::wait_group wg;
    wg.add(1);
    goro::go(goro::spawn_options{.stack_size = 256 * 1024}, [&wg] {
      volatile int r = recurse(1 << 30);
      (void)r;
      wg.done();
    });
    wg.wait();
  });
}

void late() {
  // The budget the default vm.max_map_count (65,530) gives, whatever this
  // machine's limit: about 8,000 guarded 64 KiB stacks.
  auto& budget = goro::detail::guard_budget();
  budget.store(std::min<long>(budget.load(), 65530 / 8));
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    constexpr int live = 12000;
    goro::wait_group release, started;
    release.add(1);
    started.add(live);
    for (int i = 0; i < live; ++i)
      goro::go([&] {
        started.done();
        release.wait();
      });
    started.wait();  // each holds its own stack now
    goro::wait_group done;
    done.add(1);
    goro::go([&] {
      volatile int r = large_frame();
      (void)r;
      done.done();
    });
    done.wait();
    release.done();
  });
  std::puts("goro-test: the large frame went unnoticed");
}

void canary() {
  goro::detail::guard_install_test_disable.store(true);
  goro::detail::guard_budget().store(0);
  goro::runtime rt{goro::options{1}};
  rt.run([] {
    goro::wait_group wg;
    wg.add(1);
    goro::go([&wg] {
      auto* lo = static_cast<volatile std::uint64_t*>(goro::detail::current_g()->stack.lo);
      for (int i = 1; i < 4; ++i) lo[i] = 0x0123456789abcdefull;
      goro::yield();
      wg.done();
    });
    wg.wait();
  });
  std::puts("goro-test: the overwrite went unnoticed");
}
}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "guarded";
  if (std::strcmp(mode, "small") == 0) {
    overflow<goro::policy<goro::stack<4096>>>(32);  // ~16 KiB of frames on a 4 KiB stack
  } else if (std::strcmp(mode, "late") == 0) {
    if (!goro::detail::guard_install_available()) {
      // Without MADV_GUARD_INSTALL only ~8,000 stacks get a guard; a frame
      // that skips the canary past those is a documented limitation.
      std::puts("goro-test: skipped: MADV_GUARD_INSTALL is unavailable");
      return 0;
    }
    late();
  } else if (std::strcmp(mode, "canary") == 0) {
    canary();
  } else if (std::strcmp(mode, "spawn_options") == 0 || std::strcmp(mode, "main") == 0) {
    sized(std::strcmp(mode, "main") == 0);
  } else {
    overflow<goro::default_policy>(100000);  // ~50 MiB of frames on a 64 KiB stack
  }
  return 0;
}
