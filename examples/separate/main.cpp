// Separate compilation (docs/api.md, "Separate compilation"): this file
// includes goro with -DGORO_SEPARATE_COMPILATION, so it compiles only the
// calls it makes; the runtime is compiled once, in goro_impl.cpp.
//
//   g++ -std=c++20 -O2 -DGORO_SEPARATE_COMPILATION -c main.cpp goro_impl.cpp
//   g++ main.o goro_impl.o -pthread -o separate
#include <goro/goro.hpp>

#include <cstdio>

int main() {
  int total = goro::run([] {
    goro::chan<int> results;
    for (int i = 1; i <= 10; ++i) goro::go([&results, i] { results.send(i * i); });
    int sum = 0;
    for (int i = 0; i < 10; ++i) sum += results.recv().value();
    return sum;
  });
  std::printf("sum of squares 1..10 = %d\n", total);
  return total == 385 ? 0 : 1;
}
