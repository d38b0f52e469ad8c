// Test seams: a hook that a GORO_TESTING build calls at one point of a
// protocol, so that a test can hold a thread in the window it wants to
// exercise (a runtime destroyed there, a concurrent add, a slow lookup).
// Each seam is declared next to its call site, in namespace
// detail::testing, with a comment naming the window and its test:
//
//   namespace testing { inline test_seam<int> wakep_seam; }
//   ...
//   testing::wakep_seam(0);              // at the point
//   detail::testing::wakep_seam = &f;    // in the test; nullptr clears it
//
// Without GORO_TESTING a seam is an empty object whose call does nothing,
// so the point costs nothing in user builds.
#pragma once

#include <atomic>

namespace goro::detail {

#ifdef GORO_TESTING
template <class... Args>
class test_seam {
 public:
  using hook = void (*)(Args...);
  constexpr test_seam() noexcept = default;
  test_seam(const test_seam&) = delete;
  test_seam& operator=(const test_seam&) = delete;

  // Sets (or with nullptr clears) the hook; any thread, any time.
  test_seam& operator=(hook f) noexcept {
    store(f);
    return *this;
  }
  void store(hook f) noexcept { hook_.store(f); }

  // The point: calls the hook, if one is set.
  void operator()(Args... args) const {
    if (hook f = hook_.load()) f(args...);
  }

 private:
  std::atomic<hook> hook_{nullptr};
};
#else
template <class... Args>
class test_seam {
 public:
  constexpr void operator()(Args...) const noexcept {}
};
#endif

}  // namespace goro::detail
