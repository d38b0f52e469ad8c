// The chaos build's stall monitor (include/goro/detail/stall_monitor.hpp,
// docs/testing.md) reports a lost wake-up and a stuck scheduler by aborting
// with the scheduler's state, and stays quiet when the scheduler is fine.
// The subject is tests/helpers/stall.cpp, built with GORO_CHAOS in every
// preset; GORO_CHAOS_FAULT=drop_wakep makes wakep do nothing.
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <string>

#include "test_util.hpp"

namespace {

goro_test::child_result run_stall(const char* mode, const char* fault) {
  // The child inherits the environment: set it around the spawn.
  setenv("GORO_CHAOS_SEED", "off", 1);  // no delays: only the fault, if any
  setenv("GORO_STALL_PROGRESS_MS", "500", 1);
  if (fault)
    setenv("GORO_CHAOS_FAULT", fault, 1);
  else
    unsetenv("GORO_CHAOS_FAULT");
  auto r = goro_test::run_helper("stall", {mode});
  unsetenv("GORO_CHAOS_FAULT");
  unsetenv("GORO_STALL_PROGRESS_MS");
  unsetenv("GORO_CHAOS_SEED");
  return r;
}

}  // namespace

TEST_CASE("stall monitor: a lost wake-up (wakep dropped) aborts with the scheduler's state", "[stall_monitor]") {
  auto r = run_stall("lost_wakeup", "drop_wakep");
  INFO(r.output);
  CHECK(r.signaled);
  CHECK(r.signal == SIGABRT);
  CHECK(r.output.find("goro: stall monitor: a P stayed idle while queued work or a due timer went unserved") !=
        std::string::npos);
  CHECK(r.output.find("idle Ps 1") != std::string::npos);
  CHECK(r.output.find("P1: idle") != std::string::npos);
  CHECK(r.output.find("P0: running, run queue 1") != std::string::npos);
}

TEST_CASE("stall monitor: a queued goroutine behind a hog at 1 proc is reported as no progress", "[stall_monitor]") {
  auto r = run_stall("hog", nullptr);
  INFO(r.output);
  CHECK(r.signaled);
  CHECK(r.signal == SIGABRT);
  CHECK(r.output.find("goro: stall monitor: work was queued but no P made progress") != std::string::npos);
  CHECK(r.output.find("P0: running, run queue 1") != std::string::npos);
}

TEST_CASE("stall monitor: quiet when every wake-up happens", "[stall_monitor]") {
  for (int i = 0; i < 5; ++i) {
    auto r = run_stall("lost_wakeup", nullptr);
    INFO(r.output);
    REQUIRE(r.exited);
    REQUIRE(r.exit_code == 0);
  }
}
