// The goroutine dump's symbolizers (detail/symbolize.hpp for ELF,
// symbolize_pe.hpp for Windows' PE modules) on this program itself, built
// with -g (tests/CMakeLists.txt, meson.build): names, file:line, the calls
// the compiler inlined as frames of their own, and "created by". It runs
// on every platform the suite runs on, Windows under Wine included.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <goro/goro.hpp>
#include <string>

namespace {

// Frames are read for every build but ThreadSanitizer's (see dump.hpp).
constexpr bool frames_expected = !GORO_TSAN;

int recv_line = 0;  // the line of the lambda's recv
int go_line = 0;    // the line of the go() call in spawn_receiver

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A lambda goroutine (its recv inlined into it, it into goro's closure at
// -O2), created by a function with a frame of its own.
// The lines are counted: clang-format must not join the lambda's.
// clang-format off
[[gnu::noinline]] void spawn_receiver(goro::chan<int> c) {
  recv_line = __LINE__ + 3;
  go_line = __LINE__ + 1;
  goro::go([c]() mutable {
    (void)c.recv();
  });
  asm volatile("" ::: "memory");
}
// clang-format on

}  // namespace

TEST_CASE("symbolize: a goroutine's lambda and its creator, with their lines (-g)", "[dump][symbolize]") {
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::chan<int> c;
    spawn_receiver(c);
    goro::goroutine_info gi;
    for (int i = 0; i < 5000 && gi.id == 0; ++i) {  // until it has parked in recv (bounded)
      for (const auto& x : goro::goroutines())
        if (x.wait_reason == "chan receive") gi = x;
      if (gi.id == 0) goro::sleep_for(std::chrono::milliseconds(1));
    }
    c.send(1);
    REQUIRE(gi.id != 0);
    std::string all;
    for (std::size_t i = 0; i < gi.frames.size(); ++i)
      all += gi.frames[i] + " @ " + (i < gi.files.size() ? gi.files[i] : std::string()) + "\n";
    INFO(all << "created by " << gi.created_by << " @ " << gi.created_by_file);
    CHECK(gi.created_by.find("spawn_receiver") != std::string::npos);
    if (!frames_expected) return;
    // "created by" the go() call's line in spawn_receiver.
    CHECK(ends_with(gi.created_by_file, "symbolize_test.cpp:" + std::to_string(go_line)));
    // The lambda's frame (inlined into goro's closure, or its own at -O0)
    // at the line of its recv; nothing of goro's closure or runtime.
    bool lambda = false;
    for (std::size_t i = 0; i < gi.frames.size(); ++i) {
      CHECK(gi.frames[i].find("set_closure") == std::string::npos);
      CHECK(gi.frames[i].find("goro::detail::") == std::string::npos);
      lambda = lambda || (gi.frames[i].find("operator()") != std::string::npos && i < gi.files.size() &&
                          ends_with(gi.files[i], "symbolize_test.cpp:" + std::to_string(recv_line)));
    }
    CHECK(lambda);
  });
}
