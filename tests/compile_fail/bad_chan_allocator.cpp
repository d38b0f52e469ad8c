// expect-error: goro::chan<T, Alloc>: Alloc::value_type must be T
// As for the standard containers, a channel's allocator allocates its
// element type.
#include <goro/goro.hpp>

int main() {
  goro::chan<int, std::allocator<long>> c(4);
  return 0;
}
