// Fatal errors print goro's message and abort (checked in child processes).
#include <catch2/catch.hpp>
#include <csignal>
#include <string>

#include "test_util.hpp"

TEST_CASE("death: an exception escaping a goroutine names it and terminates", "[death]") {
  auto r = goro_test::run_helper("uncaught");
  INFO(r.output);
  CHECK(goro_test::aborted(r));
  CHECK_THAT(r.output, Catch::Matchers::Matches("(.|\n)*goro: goroutine [0-9]+: uncaught exception: boom(.|\n)*"));
}

// It said "goro: after_func: could not start the goroutine" and not why.
// Not on Windows: its helper is not built there (tests/helpers/CMakeLists.txt,
// CI time; nothing in it is Windows-specific).
#if !defined(_WIN32)
TEST_CASE("death: an after_func whose goroutine the allocator refuses says out of memory", "[death][alloc]") {
  auto r = goro_test::run_helper("after_func_oom");
  INFO(r.output);
  if (r.exited && r.exit_code == 2) return;  // built without exceptions
  CHECK(goro_test::aborted(r));
  CHECK_THAT(r.output, Catch::Matchers::Contains("goro: out of memory (after_func: its goroutine:"));
}
#endif

#if !GORO_TEST_SANITIZED  // the sanitizers install their own fault handling
TEST_CASE("death: stack overflow into a guard region is reported", "[death][stack]") {
  auto r = goro_test::run_helper("overflow", {"guarded"});
  INFO(r.output);
  CHECK(goro_test::aborted(r));
  CHECK_THAT(r.output, Catch::Matchers::Matches("(.|\n)*goro: goroutine [0-9]+ stack overflow: fault address 0x[0-9a-f]+, "
                                                "stack \\[0x[0-9a-f]+, 0x[0-9a-f]+\\) size 65536(.|\n)*"));
}

// Past the mprotect guard budget (about 8,000 stacks under the default
// vm.max_map_count) stacks used to have no guard and a one-word canary that
// a large frame skips: the frame wrote into the neighbouring stack unseen.
// With MADV_GUARD_INSTALL every stack has a guard region.
TEST_CASE("death: a large frame in goroutine 12,001 hits a guard, not its neighbour", "[death][stack]") {
  auto r = goro_test::run_helper("overflow", {"late"});
  INFO(r.output);
  if (r.exited && r.exit_code == 0 && r.output.find("goro-test: skipped") != std::string::npos) {
#if defined(_WIN32)
    WARN("not applicable on Windows: every stack of 16 KiB or more has a guard region (no mapping budget)");
#else
    WARN("MADV_GUARD_INSTALL unavailable (kernel < 6.13 or qemu-user): stacks past the guard budget have canaries only");
#endif
    return;
  }
  CHECK(goro_test::aborted(r));
  CHECK_THAT(r.output, Catch::Matchers::Matches("(.|\n)*goro: goroutine [0-9]{5} stack overflow: fault address 0x[0-9a-f]+, "
                                                "stack \\[0x[0-9a-f]+, 0x[0-9a-f]+\\) size 65536(.|\n)*"));
}

// The fallback (no guard): a canary of several words at the stack's low
// end, checked when the goroutine switches out, catches an overwrite that
// spares the lowest word.
TEST_CASE("death: the multi-word canary catches an overwrite of a guardless stack", "[death][stack]") {
  auto r = goro_test::run_helper("overflow", {"canary"});
  INFO(r.output);
  CHECK(goro_test::aborted(r));
  CHECK_THAT(r.output, Catch::Matchers::Matches("(.|\n)*goro: goroutine [0-9]+ stack overflow: fault address 0x[0-9a-f]+, "
                                                "stack \\[0x[0-9a-f]+, 0x[0-9a-f]+\\) size 65536(.|\n)*"));
}

TEST_CASE("death: overflow of a small packed stack is reported", "[death][stack]") {
  auto r = goro_test::run_helper("overflow", {"small"});
  INFO(r.output);
  CHECK(goro_test::aborted(r));
  CHECK_THAT(r.output, Catch::Matchers::Matches("(.|\n)*goro: goroutine [0-9]+ stack overflow: fault address 0x[0-9a-f]+, "
                                                "stack \\[0x[0-9a-f]+, 0x[0-9a-f]+\\) size 4096(.|\n)*"));
}

// spawn_options::stack_size and options::main_stack_size: the report names
// the stack's own size (and both have a guard region).
TEST_CASE("death: overflow of a spawn_options stack names its size", "[death][stack]") {
  auto r = goro_test::run_helper("overflow", {"spawn_options"});
  INFO(r.output);
  CHECK(goro_test::aborted(r));
  CHECK_THAT(r.output, Catch::Matchers::Matches("(.|\n)*goro: goroutine [0-9]+ stack overflow: fault address 0x[0-9a-f]+, "
                                                "stack \\[0x[0-9a-f]+, 0x[0-9a-f]+\\) size 262144(.|\n)*"));
}

TEST_CASE("death: overflow of the main goroutine's 8 MiB stack is reported", "[death][stack]") {
  auto r = goro_test::run_helper("overflow", {"main"});
  INFO(r.output);
  CHECK(goro_test::aborted(r));
  CHECK_THAT(r.output, Catch::Matchers::Matches("(.|\n)*goro: goroutine [0-9]+ stack overflow: fault address 0x[0-9a-f]+, "
                                                "stack \\[0x[0-9a-f]+, 0x[0-9a-f]+\\) size 8388608(.|\n)*"));
}
#endif
