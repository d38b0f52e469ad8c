// Fatal errors print goro's message and abort (checked in child processes).
#include <catch2/catch.hpp>
#include <csignal>

#include "test_util.hpp"

TEST_CASE("death: an exception escaping a goroutine names it and terminates", "[death]") {
  auto r = goro_test::run_helper("uncaught");
  INFO(r.output);
  CHECK(r.signaled);
  CHECK(r.signal == SIGABRT);
  CHECK_THAT(r.output, Catch::Matchers::Matches("(.|\n)*goro: goroutine [0-9]+: uncaught exception: boom(.|\n)*"));
}

#if !GORO_TEST_SANITIZED  // the sanitizers install their own fault handling
TEST_CASE("death: stack overflow into a guard region is reported", "[death][stack]") {
  auto r = goro_test::run_helper("overflow", {"guarded"});
  INFO(r.output);
  CHECK(r.signaled);
  CHECK(r.signal == SIGABRT);
  CHECK_THAT(r.output, Catch::Matchers::Matches("(.|\n)*goro: goroutine [0-9]+ stack overflow: fault address 0x[0-9a-f]+, "
                                                "stack \\[0x[0-9a-f]+, 0x[0-9a-f]+\\) size 65536(.|\n)*"));
}

TEST_CASE("death: overflow of a small packed stack is reported", "[death][stack]") {
  auto r = goro_test::run_helper("overflow", {"small"});
  INFO(r.output);
  CHECK(r.signaled);
  CHECK(r.signal == SIGABRT);
  CHECK_THAT(r.output, Catch::Matchers::Matches("(.|\n)*goro: goroutine [0-9]+ stack overflow: fault address 0x[0-9a-f]+, "
                                                "stack \\[0x[0-9a-f]+, 0x[0-9a-f]+\\) size 4096(.|\n)*"));
}
#endif
