// expect-error: goro policy: allocator_type must meet the standard Allocator requirements
// goro::allocator<A> needs a standard Allocator (value_type, allocate(n),
// deallocate(p, n) after a rebind); a type with only a malloc-like member
// is not one.
#include <goro/goro.hpp>

struct not_an_allocator {
  void* allocate(std::size_t n) { return ::operator new(n); }
};

int main() {
  goro::basic_runtime<goro::policy<goro::allocator<not_an_allocator>>> rt;
  return 0;
}
