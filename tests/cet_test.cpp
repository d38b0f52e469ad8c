// CET shadow stacks: goro's switch does not keep one, so a runtime refuses
// to start in a process that has one enabled (include/goro/detail/cet.hpp).
// That the build leaves SHSTK off is checked by ctest cet.no_shstk_marking.
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <string>

TEST_CASE("cet: this test binary runs without a shadow stack", "[cet]") {
  // Built by goro's CMake target, which drops the SHSTK marking: even on a
  // CPU and kernel that enforce shadow stacks, none is enabled here.
  CHECK_FALSE(goro::detail::shadow_stack_active());
  goro::runtime rt{goro::options{1}};
  CHECK(rt.run([] { return 7; }) == 7);
}

TEST_CASE("cet: a runtime constructed under an enabled shadow stack is a usage_error", "[cet]") {
  goro::detail::cet_test_force_shstk.store(true);
  std::string what;
  try {
    goro::runtime rt{goro::options{1}};
  } catch (const goro::usage_error& e) {
    what = e.what();
  }
  goro::detail::cet_test_force_shstk.store(false);
  CHECK(what.rfind("goro: runtime: CET shadow stacks are enabled", 0) == 0);
  CHECK(what.find("-fcf-protection=branch") != std::string::npos);
  goro::runtime rt{goro::options{1}};  // and nothing was left behind
  CHECK(rt.run([] { return 1; }) == 1);
}
