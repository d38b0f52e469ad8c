// Compile-time scheduler policies. A policy is a struct with the fields of
// default_policy; goro::policy<options...> applies options left to right on
// default_policy. basic_runtime checks every field at compile time and an
// invalid one is a static_assert that names it.
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <ratio>
#include <type_traits>

#include "clock.hpp"
#include "stack.hpp"

namespace goro {

enum class preemption {
  none,         // no sysmon preemption
  cooperative,  // the preempt flag is honoured at runtime calls and preempt_point()
  signal,       // also SIGURG + async preemption inside goro::async_preemptible scopes
};

// What a context switch does with the FP control state: MXCSR and the
// x87 control word on x86-64, FPCR on AArch64, frm on RISC-V (never the
// exception flags, which the ABIs make caller-saved).
enum class fp_control {
  per_goroutine,  // each goroutine keeps its own across switches and migration (fesetround stays its own)
  shared,         // the switch leaves them alone: a goroutine sees its thread's, as in Go; ~2-5 ns less per switch
};

struct default_policy {
  // Slots in each P's local run queue (Go: 256). Power of two >= 2.
  static constexpr std::size_t local_queue_capacity = 256;
  // Every Nth schedule tick a P takes from the global queue first, so the
  // global queue cannot starve behind busy local queues (Go: 61).
  static constexpr std::uint32_t global_poll_interval = 61;
  // Share of a victim's queue one steal takes, rounded up (Go: half).
  using steal_fraction = std::ratio<1, 2>;
  // Clock that times the preemption slice.
  using preemption_clock = std::chrono::steady_clock;
  // A goroutine running this long without a schedule tick is preempted (Go: 10 ms).
  static constexpr std::chrono::nanoseconds time_slice{10'000'000};
  static constexpr preemption preempt = preemption::cooperative;
  // Bytes of stack per goroutine (fixed size; stacks do not grow).
  static constexpr std::size_t stack_size = 64 * 1024;
  using stack_allocator = goro::default_stack_allocator;
  // Every allocation the runtime makes besides stacks (G, P and M records,
  // free lists, timer heaps, the global run queue, out-of-line closures,
  // select's scratch arrays): a standard Allocator, rebound per type,
  // thread-safe; the runtime keeps one copy (docs/policies.md, "Allocator").
  using allocator_type = std::allocator<std::byte>;
  // FP control state across context switches (docs/policies.md, "FP control").
  static constexpr fp_control fp_mode = fp_control::per_goroutine;
};

// ---- options for goro::policy<...> ----
template <std::size_t N>
struct queue_capacity {
  template <class B>
  struct apply : B {
    static constexpr std::size_t local_queue_capacity = N;
  };
};
template <std::uint32_t N>
struct global_poll {
  template <class B>
  struct apply : B {
    static constexpr std::uint32_t global_poll_interval = N;
  };
};
template <std::intmax_t Num, std::intmax_t Den>
struct steal {
  template <class B>
  struct apply : B {
    using steal_fraction = std::ratio<Num, Den>;
  };
};
template <class Clock>
struct preempt_clock {
  template <class B>
  struct apply : B {
    using preemption_clock = Clock;
  };
};
template <std::int64_t Microseconds>
struct slice_us {
  template <class B>
  struct apply : B {
    static constexpr std::chrono::nanoseconds time_slice{Microseconds * 1000};
  };
};
template <preemption Mode>
struct preemption_mode {
  template <class B>
  struct apply : B {
    static constexpr preemption preempt = Mode;
  };
};
template <fp_control Mode>
struct fp_control_mode {
  template <class B>
  struct apply : B {
    static constexpr fp_control fp_mode = Mode;
  };
};

template <std::size_t Bytes>
struct stack {
  template <class B>
  struct apply : B {
    static constexpr std::size_t stack_size = Bytes;
  };
};
template <class Allocator>
struct stacks {
  template <class B>
  struct apply : B {
    using stack_allocator = Allocator;
  };
};

// allocator_type = A: the runtime's allocations go through A (docs/policies.md).
template <class A>
struct allocator {
  template <class B>
  struct apply : B {
    using allocator_type = A;
  };
};

// The standard Allocator requirements the runtime relies on: value_type,
// copies, and allocate / deallocate through std::allocator_traits after a
// rebind (the runtime asks for its record types and for raw aligned units).
template <class A>
concept runtime_allocator =
    requires { typename A::value_type; } && std::is_nothrow_copy_constructible_v<A> &&
    requires(typename std::allocator_traits<A>::template rebind_alloc<std::max_align_t> a, std::size_t n) {
      { a.allocate(n) } -> std::same_as<typename std::allocator_traits<decltype(a)>::pointer>;
      a.deallocate(a.allocate(n), n);
    };

namespace detail {
template <class Base, class... Options>
struct apply_options {
  using type = Base;
};
template <class Base, class First, class... Rest>
struct apply_options<Base, First, Rest...> {
  using type = typename apply_options<typename First::template apply<Base>, Rest...>::type;
};

template <class T>
struct is_ratio : std::false_type {};
template <std::intmax_t N, std::intmax_t D>
struct is_ratio<std::ratio<N, D>> : std::true_type {};

inline constexpr std::size_t min_stack_size = 2048;

// Each check is evaluated only when the field exists, so a policy missing a
// field gets exactly one message naming it.
template <class P>
constexpr bool check_policy() {
  if constexpr (!requires { P::local_queue_capacity; }) {
    static_assert(requires { P::local_queue_capacity; }, "goro policy: missing field local_queue_capacity");
  } else {
    constexpr auto c = P::local_queue_capacity;
    static_assert(c >= 2 && (c & (c - 1)) == 0 && c <= (std::size_t{1} << 24),
                  "goro policy: local_queue_capacity must be a power of two between 2 and 2^24");
  }
  if constexpr (!requires { P::global_poll_interval; }) {
    static_assert(requires { P::global_poll_interval; }, "goro policy: missing field global_poll_interval");
  } else {
    static_assert(P::global_poll_interval >= 1, "goro policy: global_poll_interval must be >= 1");
  }
  if constexpr (!requires { typename P::steal_fraction; }) {
    static_assert(requires { typename P::steal_fraction; }, "goro policy: missing field steal_fraction");
  } else {
    using f = typename P::steal_fraction;
    if constexpr (!is_ratio<f>::value) {
      static_assert(is_ratio<f>::value, "goro policy: steal_fraction must be a std::ratio");
    } else {
      static_assert(f::num > 0 && f::num <= f::den, "goro policy: steal_fraction must be in (0, 1]");
    }
  }
  if constexpr (!requires { typename P::preemption_clock; }) {
    static_assert(requires { typename P::preemption_clock; }, "goro policy: missing field preemption_clock");
  } else {
    static_assert(clock_like<typename P::preemption_clock>,
                  "goro policy: preemption_clock must model goro::clock_like (rep, period, duration, "
                  "time_point, is_steady, static now())");
  }
  if constexpr (!requires { P::time_slice; }) {
    static_assert(requires { P::time_slice; }, "goro policy: missing field time_slice");
  } else {
    static_assert(std::chrono::nanoseconds(P::time_slice).count() > 0, "goro policy: time_slice must be positive");
  }
  if constexpr (!requires { P::preempt; }) {
    static_assert(requires { P::preempt; }, "goro policy: missing field preempt");
  } else {
    static_assert(std::is_same_v<std::remove_cv_t<decltype(P::preempt)>, preemption>,
                  "goro policy: preempt must be a goro::preemption");
  }
  if constexpr (!requires { P::stack_size; }) {
    static_assert(requires { P::stack_size; }, "goro policy: missing field stack_size");
  } else {
    static_assert(P::stack_size >= min_stack_size, "goro policy: stack_size must be at least 2048 bytes");
  }
  if constexpr (!requires { typename P::stack_allocator; }) {
    static_assert(requires { typename P::stack_allocator; }, "goro policy: missing field stack_allocator");
  } else {
    static_assert(goro::stack_allocator<typename P::stack_allocator>,
                  "goro policy: stack_allocator must model goro::stack_allocator (default-constructible; "
                  "stack_memory allocate(size_t); void deallocate(stack_memory) noexcept)");
  }
  // allocator_type is optional (SPEC's default_policy listing predates it):
  // a hand-written policy without it gets std::allocator (policy_allocator_t).
  if constexpr (requires { typename P::allocator_type; }) {
    static_assert(goro::runtime_allocator<typename P::allocator_type>,
                  "goro policy: allocator_type must meet the standard Allocator requirements (value_type; "
                  "nothrow copies; allocate(n) / deallocate(p, n) through std::allocator_traits after a rebind)");
  }
  // fp_mode is optional too (SPEC's listing predates it): per_goroutine.
  if constexpr (requires { P::fp_mode; }) {
    static_assert(std::is_same_v<std::remove_cv_t<decltype(P::fp_mode)>, fp_control>,
                  "goro policy: fp_mode must be a goro::fp_control");
  }
  return true;
}

// The policy's allocator_type, or std::allocator<std::byte> for a policy
// written without one.
template <class P>
struct policy_allocator {
  using type = std::allocator<std::byte>;
};
template <class P>
  requires requires { typename P::allocator_type; }
struct policy_allocator<P> {
  using type = typename P::allocator_type;
};
}  // namespace detail

template <class P>
using policy_allocator_t = typename detail::policy_allocator<P>::type;

// The policy's fp_mode, or fp_control::per_goroutine for a policy written
// without one.
template <class P>
inline constexpr fp_control policy_fp_control_v = [] {
  if constexpr (requires { P::fp_mode; }) {
    return P::fp_mode;
  } else {
    return fp_control::per_goroutine;
  }
}();

// default_policy with the given options applied left to right.
template <class... Options>
using policy = typename detail::apply_options<default_policy, Options...>::type;

}  // namespace goro
