// Overflows a goroutine's stack on purpose. argv[1]: "guarded" (default
// 64 KiB stacks, guard regions) or "small" (4 KiB stacks packed without
// guards: caught by the fault handler below the slab or by the canary).
#include <goro/goro.hpp>

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
}  // namespace

int main(int argc, char** argv) {
  bool small = argc > 1 && std::strcmp(argv[1], "small") == 0;
  if (small)
    overflow<goro::policy<goro::stack<4096>>>(32);  // ~16 KiB of frames on a 4 KiB stack
  else
    overflow<goro::default_policy>(100000);  // ~50 MiB of frames on a 64 KiB stack
  return 0;  // not reached
}
