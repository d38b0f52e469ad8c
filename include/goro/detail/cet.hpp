// Intel CET shadow stacks (SHSTK) and goro's context switch.
//
// The switch resumes a goroutine with an indirect jump, returns across
// stacks, and async preemption ends in an rt_sigreturn with a copied
// frame: none of them keeps a shadow stack consistent, so goro cannot run
// in a process whose shadow stack is enabled. It prevents that instead:
//  - goro's CMake target (and meson dependency) compile every file that
//    includes goro with -fcf-protection=branch on x86-64, so those objects
//    are marked IBT only and the linker, which ANDs the SHSTK bit over all
//    inputs, leaves it off the binary: the kernel and glibc then never
//    enable a shadow stack (tests/cet checks the object's note with readelf).
//    A note emitted by the embedded asm cannot do this: a linker ORs the
//    notes of one object, and the compiler's own note claims SHSTK.
//  - a runtime constructed in a process that has one anyway (goro's headers
//    compiled by another build with -fcf-protection=full) fails with a
//    usage_error saying so, rather than crashing at the first switch.
// See docs/design.md, "Control-flow protection".
#pragma once

#include <atomic>
#include <cstdint>

namespace goro::detail {

// Test hook: makes shadow_stack_active() report an enabled shadow stack.
inline std::atomic<bool> cet_test_force_shstk{false};

// Whether the calling thread runs with a shadow stack. rdsspq is a no-op
// (the register keeps its zero) on CPUs without CET and while shadow stacks
// are disabled, so this needs no kernel or glibc support to answer.
inline bool shadow_stack_active() noexcept {
  if (cet_test_force_shstk.load(std::memory_order_relaxed)) return true;
#if defined(__x86_64__)
  std::uint64_t ssp = 0;
  asm volatile("rdsspq %0" : "+r"(ssp));
  return ssp != 0;
#else
  return false;
#endif
}

}  // namespace goro::detail
