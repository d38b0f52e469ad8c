// expect-error: goro policy: stack_allocator
// A stack allocator needs allocate(size) -> goro::stack_memory and a
// noexcept deallocate(goro::stack_memory).
#include <goro/goro.hpp>

struct not_an_allocator {
  void* allocate(std::size_t n) { return ::operator new(n); }
};

int main() {
  goro::basic_runtime<goro::policy<goro::stacks<not_an_allocator>>> rt;
  return 0;
}
