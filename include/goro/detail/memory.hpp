// The runtime's allocator (the policy's allocator_type, goro::allocator<A>)
// as the runtime's parts see it. scheduler<Policy> uses A itself, rebound
// per record type, for what it owns directly (P, M and G records, its
// lists). The parts that are not templates on the policy (timer heaps, the
// global run queue, a goroutine's out-of-line closure, select's scratch
// arrays) reach it through runtime_memory: raw bytes with an alignment,
// behind one virtual call. A null runtime_memory* means std::allocator:
// the runtime hands out none for the default, so the default pays a null
// test beside the allocation it guards (never an indirect call) and the
// rest compiles as it did before the option existed.
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>

#include "../error.hpp"
#include "config.hpp"

namespace goro::detail {

class runtime_memory {
 public:
  // May raise std::bad_alloc (or whatever A raises).
  virtual void* allocate(std::size_t bytes, std::size_t align) = 0;
  virtual void deallocate(void* p, std::size_t bytes, std::size_t align) noexcept = 0;

 protected:
  ~runtime_memory() = default;
};

inline void* memory_allocate(runtime_memory* m, std::size_t bytes, std::size_t align) {
  if (m) return m->allocate(bytes, align);
  if (align > __STDCPP_DEFAULT_NEW_ALIGNMENT__) return ::operator new(bytes, std::align_val_t(align));
  return ::operator new(bytes);
}
inline void memory_deallocate(runtime_memory* m, void* p, std::size_t bytes, std::size_t align) noexcept {
  if (m) return m->deallocate(p, bytes, align);
#if defined(__cpp_sized_deallocation)
  if (align > __STDCPP_DEFAULT_NEW_ALIGNMENT__) return ::operator delete(p, bytes, std::align_val_t(align));
  ::operator delete(p, bytes);
#else  // clang without -fsized-deallocation declares no sized delete
  (void)bytes;
  if (align > __STDCPP_DEFAULT_NEW_ALIGNMENT__) return ::operator delete(p, std::align_val_t(align));
  ::operator delete(p);
#endif
}

// A standard allocator over a runtime_memory (nullptr: the global operator
// new), for the std containers of the non-template parts.
template <class T>
class memory_allocator {
 public:
  using value_type = T;
  // The allocator moves with the storage (a container given the runtime's
  // memory after construction takes it by assignment).
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  memory_allocator() noexcept = default;
  explicit memory_allocator(runtime_memory* m) noexcept : m_(m) {}
  template <class U>
  memory_allocator(const memory_allocator<U>& o) noexcept : m_(o.resource()) {}  // NOLINT: rebinding

  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) raise_bad_alloc();
    return static_cast<T*>(memory_allocate(m_, n * sizeof(T), alignof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { memory_deallocate(m_, p, n * sizeof(T), alignof(T)); }
  runtime_memory* resource() const noexcept { return m_; }

  template <class U>
  friend bool operator==(const memory_allocator& a, const memory_allocator<U>& b) noexcept {
    return a.m_ == b.resource();
  }

 private:
  runtime_memory* m_ = nullptr;
};

template <class A>
inline constexpr bool is_std_allocator = false;
template <class T>
inline constexpr bool is_std_allocator<std::allocator<T>> = true;

// A rebound to T.
template <class A, class T>
using rebind_t = typename std::allocator_traits<A>::template rebind_alloc<T>;

// Raw storage of one alignment: what policy_memory asks A for.
template <std::size_t Align>
struct alignas(Align) memory_unit {
  unsigned char bytes[Align];
};

// runtime_memory over a copy of A (the runtime's one copy). Bytes are
// asked of A as arrays of memory_unit<align> (A rebound to it), so A sees
// typed requests with the alignment they need.
template <class A>
class policy_memory final : public runtime_memory {
 public:
  explicit policy_memory(const A& a) : a_(a) {}
  const A& get() const noexcept { return a_; }

  void* allocate(std::size_t bytes, std::size_t align) override {
    return with_unit(align, [&]<std::size_t U>() -> void* {
      rebind_t<A, memory_unit<U>> a(a_);
      using traits = std::allocator_traits<decltype(a)>;
      return std::to_address(traits::allocate(a, units(bytes, U)));
    });
  }
  void deallocate(void* p, std::size_t bytes, std::size_t align) noexcept override {
    with_unit(align, [&]<std::size_t U>() {
      rebind_t<A, memory_unit<U>> a(a_);
      using traits = std::allocator_traits<decltype(a)>;
      using ptr = typename traits::pointer;
      traits::deallocate(a, std::pointer_traits<ptr>::pointer_to(*static_cast<memory_unit<U>*>(p)), units(bytes, U));
    });
  }

 private:
  static std::size_t units(std::size_t bytes, std::size_t u) noexcept { return (bytes + u - 1) / u; }
  // Calls f.template operator()<U>() with U the unit for `align`: 16 (or
  // max_align_t's) up to 4096, the largest alignment the runtime uses is a
  // cache line.
  template <class F>
  static decltype(auto) with_unit(std::size_t align, F&& f) {
    constexpr std::size_t base = alignof(std::max_align_t);
    if (align <= base) return f.template operator()<base>();
    if (align <= 32) return f.template operator()<32>();
    if (align <= 64) return f.template operator()<64>();
    if (align <= 128) return f.template operator()<128>();
    if (align <= 256) return f.template operator()<256>();
    return f.template operator()<4096>();
  }

  [[no_unique_address]] A a_;
};

// The runtime's one copy of A, and runtime_memory over it; for
// std::allocator an empty member whose memory() is nullptr.
template <class A>
class runtime_allocator_holder {
 public:
  explicit runtime_allocator_holder(const A& a) : m_(a) {}
  const A& get() const noexcept { return m_.get(); }
  runtime_memory* memory() noexcept { return &m_; }

 private:
  policy_memory<A> m_;
};
template <class T>
class runtime_allocator_holder<std::allocator<T>> {
 public:
  explicit runtime_allocator_holder(const std::allocator<T>&) noexcept {}
  std::allocator<T> get() const noexcept { return {}; }
  runtime_memory* memory() noexcept { return nullptr; }
};

// Deleter of records made by allocate_record / allocate_records: destroys
// them and gives their storage back to (a copy of) A. Empty for a
// stateless A, so the owning pointers are as big as plain ones.
template <class A>
struct record_delete {
  using traits = std::allocator_traits<A>;
  using T = typename traits::value_type;
  [[no_unique_address]] A a;
  std::size_t n = 1;
  void operator()(T* p) noexcept {
    for (std::size_t i = n; i-- > 0;) traits::destroy(a, p + i);
    traits::deallocate(a, std::pointer_traits<typename traits::pointer>::pointer_to(*p), n);
  }
};
template <class T, class A>
using record_ptr = std::unique_ptr<T, record_delete<rebind_t<A, T>>>;
template <class T, class A>
using record_array_ptr = std::unique_ptr<T[], record_delete<rebind_t<A, T>>>;

// n records of T from A, default-initialized (as `new T[n]`: a record's
// members have their initializers, its arrays are left as they are; a
// block of 128 G records is not zeroed). Value-initialized (as
// `std::make_unique<T>()`) with Value. May raise what A or T's
// constructor raises, leaking nothing.
template <class T, class A, bool Value = false>
record_array_ptr<T, A> allocate_records(const A& a, std::size_t n) {
  using RA = rebind_t<A, T>;
  using traits = std::allocator_traits<RA>;
  RA ra(a);
  T* p = std::to_address(traits::allocate(ra, n));
  auto make = [](T* at) {
    if constexpr (Value)
      ::new (static_cast<void*>(at)) T();
    else
      ::new (static_cast<void*>(at)) T;
  };
  std::size_t i = 0;
  if constexpr (std::is_nothrow_default_constructible_v<T>) {
    for (; i < n; ++i) make(p + i);
    return record_array_ptr<T, A>(p, record_delete<RA>{ra, n});
  }
  GORO_TRY {
    for (; i < n; ++i) make(p + i);
  }
  GORO_CATCH_ALL {
    while (i-- > 0) traits::destroy(ra, p + i);
    traits::deallocate(ra, std::pointer_traits<typename traits::pointer>::pointer_to(*p), n);
    GORO_RETHROW;
  }
  return record_array_ptr<T, A>(p, record_delete<RA>{ra, n});
}
// One value-initialized record of T from A (as std::make_unique<T>()).
template <class T, class A>
record_ptr<T, A> allocate_record(const A& a) {
  using RA = rebind_t<A, T>;
  return record_ptr<T, A>(allocate_records<T, A, true>(a, 1).release(), record_delete<RA>{RA(a), 1});
}

}  // namespace goro::detail
