// Poll descriptors (Go's pollDesc) and where they come from: the
// process-wide cache (Go's pollcache) for runtimes on std::allocator and
// for plain threads, or a runtime's own pool when the runtime was given an
// allocator (goro::allocator<A>). The semaphores' protocol is described at
// the top of netpoll.hpp.
//
// Why descriptors are recycled and not freed: a poller may hold a stale
// pointer to one (an epoll event read just before the descriptor was
// unregistered by another thread), and so may a deadline timer being
// deleted. A sequence number, bumped when a descriptor is recycled, tags
// events and timers so stale ones are ignored; the memory itself must stay
// readable. The process-wide cache never frees. A runtime's pool
// (pd_pool) frees its blocks to A only once nothing can name them:
//   - each descriptor it handed out holds a reference until freed (its
//     deadline timers are deleted synchronously before that, so no timer
//     names it afterwards);
//   - the runtime's own poller holds one (the pool's creator) until it is
//     destroyed, after every M and sysmon have been joined: no poll of its
//     is in flight then;
//   - any other poller that ever registered one of its descriptors (a
//     socket made in runtime A, waited on from runtime B) holds one until
//     that poller is destroyed, for the same reason.
// So a stale pointer in any poller or timer always reads memory of a live
// pool, whose descriptors stay descriptors (recycled within the pool, never
// handed back to A while it lives), and sockets may outlive their runtime.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "../error.hpp"
#include "../os/os.hpp"
#include "config.hpp"
#include "memory.hpp"
#include "spinlock.hpp"
#include "timer_heap.hpp"

namespace goro::detail {

class netpoller;
class pd_pool;

inline constexpr std::uintptr_t pd_nil = 0;
inline constexpr std::uintptr_t pd_ready = 1;
inline constexpr std::uintptr_t pd_wait = 2;

// Why a wait ended without readiness (Go's netpollcheckerr).
enum class pd_error { none, closing, timeout };

struct poll_desc {
  os::socket_t fd = os::invalid_socket;
  // The OS poller's own per-descriptor state (empty with epoll; the
  // in-flight AFD polls on Windows), its owner's to touch.
  [[no_unique_address]] os::poll_slot slot;
  // rg / wg: see the top of netpoll.hpp. seq_cst throughout: the waiter's
  // CAS nil -> wait followed by its read of closing / the deadline, and the
  // closer's (setter's) store followed by its read of the semaphore, are a
  // store-load pair on each side (Dekker): one of them must see the other.
  std::atomic<std::uintptr_t> rg{pd_nil};
  std::atomic<std::uintptr_t> wg{pd_nil};
  std::atomic<bool> closing{false};
  std::atomic<std::uint32_t> seq{0};       // +1 when recycled; tags events and timers
  std::atomic<std::int64_t> rd{0}, wd{0};  // deadlines in nanotime(); 0: none
  std::atomic<netpoller*> owner{nullptr};  // the poller the fd is registered with
  // Threads between reading owner and pinning that poller
  // (netpoller::pin_owner): its end waits for none to be left.
  std::atomic<std::uint32_t> pinning{0};
  spinlock lock;                           // registration and deadline setters
  timer rt, wt;                            // deadline timers (sync: del waits for a running one)
  poll_desc* prev = nullptr;               // owner's list / free list (their locks)
  poll_desc* next = nullptr;
  pd_pool* pool = nullptr;  // the pool it belongs to for good; nullptr: the process-wide cache

  std::atomic<std::uintptr_t>& sema(char mode) noexcept { return mode == 'r' ? rg : wg; }
  std::atomic<std::int64_t>& deadline(char mode) noexcept { return mode == 'r' ? rd : wd; }

  pd_error check(char mode) noexcept {
    if (closing.load(std::memory_order_seq_cst)) return pd_error::closing;
    std::int64_t d = deadline(mode).load(std::memory_order_seq_cst);
    if (d != 0 && nanotime() >= d) return pd_error::timeout;
    return pd_error::none;
  }

  // A descriptor leaving a free list for fd.
  void reuse(os::socket_t new_fd) noexcept {
    next = prev = nullptr;
    fd = new_fd;
    rg.store(pd_nil, std::memory_order_relaxed);
    wg.store(pd_nil, std::memory_order_relaxed);
    rd.store(0, std::memory_order_relaxed);
    wd.store(0, std::memory_order_relaxed);
    owner.store(nullptr, std::memory_order_relaxed);
    closing.store(false, std::memory_order_seq_cst);
  }
  // A descriptor going back to a free list: stale events and timers no
  // longer match.
  void retire() noexcept {
    seq.fetch_add(1, std::memory_order_seq_cst);
    fd = os::invalid_socket;
  }
};

// Go's pollcache: descriptors allocated in blocks, recycled, never freed.
class pd_cache {
 public:
  GORO_DECL static poll_desc* alloc(os::socket_t fd);
  // pd must be unregistered, its timers deleted and nobody waiting on it.
  GORO_DECL static void free(poll_desc* pd) noexcept;

 private:
  GORO_DECL static pd_cache& get();
  std::mutex mu_;
  poll_desc* free_ = nullptr;
  std::vector<poll_desc*> blocks_;
};

// A runtime's own descriptors (see the top of this file for when its
// memory may go): blocks from the runtime's allocator, through a copy of
// it the pool holds (pd_pool_of), so the pool may outlive the runtime.
// Reference-counted; created holding the creator's reference.
class pd_pool {
 public:
  pd_pool(const pd_pool&) = delete;
  pd_pool& operator=(const pd_pool&) = delete;

  // A descriptor for fd, holding a reference to the pool. May raise what
  // the allocator raises.
  GORO_DECL poll_desc* alloc(os::socket_t fd);
  // pd (this pool's) must be unregistered, its timers deleted and nobody
  // waiting on it. Drops its reference.
  GORO_DECL void free(poll_desc* pd) noexcept;

  void ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void unref() noexcept {
    // acq_rel: every user's writes to the descriptors happen before the
    // blocks go back to the allocator.
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy();
  }
  // The allocator's bytes (for the pollers' bookkeeping of references).
  runtime_memory* memory() const noexcept { return mem_; }

 protected:
  explicit pd_pool(runtime_memory* mem) noexcept : mem_(mem) {}
  ~pd_pool() = default;
  // Returns every block to the allocator (nothing references the pool).
  GORO_DECL void release_blocks() noexcept;
  // release_blocks, then the pool's own storage (pd_pool_of).
  virtual void destroy() noexcept = 0;

 private:
  static constexpr std::size_t block_descs = 64;
  struct block {
    block* next = nullptr;
    poll_desc descs[block_descs];
  };

  std::mutex mu_;  // free_, blocks_
  poll_desc* free_ = nullptr;
  block* blocks_ = nullptr;
  std::atomic<std::size_t> refs_{1};
  runtime_memory* mem_;
};

// A pd_pool over its own copy of A; made from A too.
template <class A>
class pd_pool_of final : public pd_pool {
  using self_alloc = rebind_t<A, pd_pool_of>;
  using traits = std::allocator_traits<self_alloc>;

 public:
  // A new pool holding one reference. May raise what A raises.
  static pd_pool* make(const A& a) {
    self_alloc sa(a);
    pd_pool_of* p = std::to_address(traits::allocate(sa, 1));
    return ::new (static_cast<void*>(p)) pd_pool_of(a);  // noexcept: copying an allocator does not throw
  }

  // mem_ points at m_ before m_ is built; nothing reads it until make returns.
  explicit pd_pool_of(const A& a) noexcept : pd_pool(&m_), m_(a) {}

 private:
  void destroy() noexcept override {
    release_blocks();
    self_alloc sa(m_.get());  // a copy: m_ goes with *this
    auto storage = std::pointer_traits<typename traits::pointer>::pointer_to(*this);
    this->~pd_pool_of();
    traits::deallocate(sa, storage, 1);
  }

  policy_memory<A> m_;
};

}  // namespace goro::detail

#if GORO_COMPILE_RUNTIME
namespace goro::detail {

GORO_DECL poll_desc* pd_cache::alloc(os::socket_t fd) {
  pd_cache& c = get();
  poll_desc* pd;
  {
    std::lock_guard<std::mutex> lk(c.mu_);
    if (!c.free_) {
      constexpr int block = 64;
      auto* b = new (std::nothrow) poll_desc[block];
      if (!b) raise_bad_alloc();
      c.blocks_.push_back(b);
      for (int i = 0; i < block; ++i) {
        b[i].next = c.free_;
        c.free_ = &b[i];
      }
    }
    pd = c.free_;
    c.free_ = pd->next;
  }
  pd->reuse(fd);
  return pd;
}

GORO_DECL void pd_cache::free(poll_desc* pd) noexcept {
  pd->retire();
  pd_cache& c = get();
  std::lock_guard<std::mutex> lk(c.mu_);
  pd->next = c.free_;
  c.free_ = pd;
}

GORO_DECL pd_cache& pd_cache::get() {
  static pd_cache* c = new pd_cache;  // never destroyed: descriptors outlive everything
  return *c;
}

GORO_DECL poll_desc* pd_pool::alloc(os::socket_t fd) {
  poll_desc* pd;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!free_) {
      void* raw = memory_allocate(mem_, sizeof(block), alignof(block));  // may raise
      auto* b = ::new (raw) block;
      b->next = blocks_;
      blocks_ = b;
      for (poll_desc& d : b->descs) {
        d.pool = this;
        d.next = free_;
        free_ = &d;
      }
    }
    pd = free_;
    free_ = pd->next;
  }
  ref();
  pd->reuse(fd);
  return pd;
}

GORO_DECL void pd_pool::free(poll_desc* pd) noexcept {
  pd->retire();
  {
    std::lock_guard<std::mutex> lk(mu_);
    pd->next = free_;
    free_ = pd;
  }
  unref();  // after the unlock: it may destroy mu_
}

GORO_DECL void pd_pool::release_blocks() noexcept {
  for (block* b = blocks_; b;) {
    block* next = b->next;
    b->~block();
    memory_deallocate(mem_, b, sizeof(block), alignof(block));
    b = next;
  }
  blocks_ = nullptr;
  free_ = nullptr;
}

}  // namespace goro::detail
#endif  // GORO_COMPILE_RUNTIME
