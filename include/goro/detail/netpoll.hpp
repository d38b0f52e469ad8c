// The network poller (Go's src/runtime/netpoll.go): one OS poller per
// runtime (os::poller: epoll and an eventfd on Linux, as netpoll_epoll.go),
// created on first use, edge-triggered, with a wake-up that breaks a
// blocking wait (netpollBreak).
//
// Each fd a goroutine waits on has a poll descriptor (Go's pollDesc) with
// two "semaphores", rg (read) and wg (write). Each holds one of
//   pd_nil    nobody waits, no readiness recorded
//   pd_ready  readiness arrived (an edge) and nobody consumed it yet
//   pd_wait   a goroutine is about to park (between its CAS and the commit)
//   a g*      that goroutine is parked, waiting for readiness
// The waiter moves nil -> wait, parks, and on g0 (once off its stack)
// commits wait -> G (netpollblockcommit); if that CAS fails, readiness or
// an unblock came in between and the park is cancelled. Pollers and
// closers move the state to ready (I/O) or nil (close, deadline) and
// ready the G they took out (netpollunblock). Every transition is a CAS,
// so exactly one party readies a given G.
//
// Descriptors are recycled, not freed, while anything may name them:
// from a process-wide free list (Go's pollcache), or from the runtime's
// own pool when it was given an allocator (poll_desc.hpp says when that
// pool's memory goes back), so a poller or timer holding a stale pointer
// reads valid memory; a sequence number (bumped when a descriptor is
// recycled) tags epoll events and deadline timers so stale ones are
// ignored. At worst a stale event marks a descriptor ready spuriously,
// which every caller tolerates (it retries the syscall and waits again on
// EAGAIN).
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

#include "../error.hpp"
#include "../os/os.hpp"
#include "config.hpp"
#include "g.hpp"
#include "goexit.hpp"
#include "m.hpp"
#include "poll_desc.hpp"
#include "spinlock.hpp"
#include "timer_heap.hpp"

namespace goro::detail {

class netpoller {
 public:
  // Readied goroutines returned by one poll at most (two per event).
  static constexpr int max_batch = 128;

  // on_init(arg) runs once the OS poller exists (the scheduler wakes
  // its timer M, which went to sleep on a futex before there was a poller,
  // so that it sleeps in epoll_wait from now on).
  // make_pool(arg): the runtime's descriptor pool, from its allocator
  // (nullptr, or no hook: the process-wide cache).
  // watch(arg): see watch().
  using init_hook = void (*)(void*);
  using pool_hook = pd_pool* (*)(void*);
  netpoller() = default;
  netpoller(init_hook on_init, void* arg, pool_hook make_pool = nullptr, init_hook watch = nullptr) noexcept
      : on_init_(on_init), on_init_arg_(arg), make_pool_(make_pool), watch_(watch) {}
  netpoller(const netpoller&) = delete;
  netpoller& operator=(const netpoller&) = delete;

  // The runtime is gone (every M and sysmon joined: no poll in flight):
  // descriptors still registered (sockets outliving their runtime) are
  // detached; a goroutine of another runtime that waits on one registers
  // it again with its own poller. Then, once no other thread uses this
  // poller (pin_owner's protocol: detached, then dead, then drained), its
  // fds are closed and the pools it may have seen events of are let go
  // (poll_desc.hpp).
  ~netpoller() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (poll_desc* pd = list_; pd;) {
        poll_desc* next = pd->next;
        // The links first: once owner is cleared, a goroutine of another
        // runtime may register pd with its own poller (ensure_registered
        // reads owner, then try_open links pd there) and must not see its
        // new links overwritten.
        pd->prev = pd->next = nullptr;
        pd->owner.store(nullptr, std::memory_order_seq_cst);
        // A thread that read owner before the store above has pinned
        // this poller by the time pinning drops (pin_owner).
        while (pd->pinning.load(std::memory_order_seq_cst) != 0) os::yield_thread();
        // A goroutine of another runtime parked on pd (pd_block) would
        // wait for events nobody polls any more: ready it as an event
        // would (a spurious readiness: it retries its call, and on EAGAIN
        // registers pd with its own poller, seeing owner cleared above).
        // pd_ready stays when nobody waits, for one about to (seq_cst:
        // the owner store comes before the semaphore's change).
        for (char mode : {'r', 'w'})
          if (g* gp = unblock(pd, mode, true); gp && gp->sched->poller() != this) gp->sched->ready(gp);
        pd = next;
      }
      list_ = nullptr;
    }
    // No descriptor names this poller now, and none will: only this
    // runtime's goroutines register with it (try_open), and none is left.
    // Those who pinned it finish first; nobody pins it after.
    users_.fetch_or(users_dead, std::memory_order_seq_cst);
    drain_users();
    os_poller_.close();
    while (pool_ref* r = foreign_) {
      foreign_ = r->next;
      pd_pool* pool = r->pool;
      memory_deallocate(pool->memory(), r, sizeof(pool_ref), alignof(pool_ref));
      pool->unref();
    }
    if (pd_pool* own = own_.load(std::memory_order_relaxed)) own->unref();
  }

  // The pool new descriptors of this runtime's goroutines come from:
  // made on first use; nullptr for a runtime on std::allocator. May
  // raise what the allocator raises.
  pd_pool* pool() {
    if (pd_pool* p = own_.load(std::memory_order_acquire)) return p;
    if (!make_pool_) return nullptr;
    std::lock_guard<std::mutex> lk(mu_);
    pd_pool* p = own_.load(std::memory_order_relaxed);
    if (!p) {
      p = make_pool_(on_init_arg_);  // holds the reference this poller drops when destroyed
      own_.store(p, std::memory_order_release);
    }
    return p;
  }

  bool inited() const noexcept { return os_poller_.is_open(); }
  // Goroutines parked on this poller's descriptors (Go's netpollWaiters).
  // May dip below zero for a moment (an unblock can beat the commit's
  // increment).
  std::int32_t waiters() const noexcept { return waiters_.load(std::memory_order_seq_cst); }
  void add_waiter() noexcept { waiters_.fetch_add(1, std::memory_order_seq_cst); }
  void remove_waiter() noexcept { waiters_.fetch_sub(1, std::memory_order_seq_cst); }

  // One poller at a time (Go: sched.lastpoll swapped to 0). An M blocked in
  // epoll_wait holds it, so non-blocking pollers skip while it sleeps.
  bool try_lock() noexcept { return !polling_.exchange(true, std::memory_order_acquire); }
  void unlock() noexcept { polling_.store(false, std::memory_order_release); }
  bool locked() const noexcept { return polling_.load(std::memory_order_relaxed); }
  std::int64_t last_poll() const noexcept { return last_poll_.load(std::memory_order_relaxed); }

  // netpollinit, once: 0, or the errno of the call that failed (EMFILE:
  // no fd left), for the caller to report (the std::error_code& overloads
  // must not throw) and a later call to retry.
  GORO_DECL int init();

 private:
  GORO_DECL int init_locked();

 public:
  // pollOpen: registers pd's fd for both directions, edge-triggered. Adding
  // reports the fd's current readiness at once, so registering after a
  // syscall returned EAGAIN loses no edge.
  GORO_DECL void open(poll_desc* pd);
  // The same, returning the errno instead (EPERM: a regular file).
  GORO_DECL int try_open(poll_desc* pd);

  // A poller that reports readiness once per request (os::poller_arms:
  // Windows' AFD polls) is asked for it here, by the goroutine about to
  // park on pd in `mode` (pd_block); epoll needs nothing. 0 or an errno.
  int arm(poll_desc* pd, char mode) noexcept { return os_poller_.arm(pd->fd, tag(pd), pd->slot, mode); }

  // pollClose: unregisters pd (before its fd is closed).
  GORO_DECL void close(poll_desc* pd) noexcept;

 private:
  GORO_DECL void unlink(poll_desc* pd) noexcept;

 public:
  // netpoll(delay): waits up to timeout_ns (0: just looks; < 0: until an
  // event or brk()), stores the goroutines made runnable in out (room for
  // max_batch) and returns their number. The caller holds try_lock().
  GORO_DECL int poll(long long timeout_ns, g** out) noexcept;

  // A goroutine that no M of this runtime parked now waits on one of its
  // descriptors (pd_block): one of another runtime, or a thread_lane's.
  // Make sure an M of this runtime watches the poller (the hook: an M is
  // started if none sleeps in the poll; it ends up there, waiters() > 0),
  // as none may: an M goes to the poll only when it runs out of work
  // while someone waits, and none of the runtime's Ms may have since.
  void watch() noexcept {
    if (watch_) watch_(on_init_arg_);
  }

  // ---- Other threads' use of a poller through a descriptor ----
  //
  // pd->owner names the poller pd is registered with, but a thread that
  // reads it may not be of that poller's runtime (a goroutine of another
  // runtime parking on a socket registered here, a plain thread closing
  // it, a deadline timer of another runtime): that runtime may be
  // destroyed meanwhile, and this poller with it. Such a thread pins the
  // poller (pin_owner) before it uses it; the pin, when it goes, unpins it.
  // The ordering that makes a pinned poller stay alive:
  //   - pin_owner: pd->pinning += 1, read pd->owner, users_ += 1 (on the
  //     poller read), pd->pinning -= 1. All seq_cst.
  //   - ~netpoller: for each pd on its list, owner = nullptr, then waits
  //     for pd->pinning to be 0; then sets users_dead and waits for
  //     users_'s count to be 0; only then closes its fds and lets the
  //     runtime free it.
  // A pinner that read the poller read owner before ~netpoller cleared it,
  // so its pinning increment comes before that store (seq_cst): the end
  // sees pinning > 0 and waits, or reads the decrement, which comes after
  // the users_ increment: either way users_ counts it before users_dead
  // is set, and the drain waits for its unpin. A pinner that reads owner
  // after the store reads nullptr (or a later owner, which is another
  // poller). So the pinner always has it, or has none; users_dead is
  // checked anyway, and a poller pinned dead counts as none.
  //
  // stop_watch (the runtime's shutdown, before it stops its Ms) sets
  // users_no_watch and drains the same way: a pin that saw it does not
  // watch(), whose hook may start an M (wakep) of a runtime that is
  // joining them; one that did not has watched before its Ms are stopped.
  //
  // A goroutine whose own runtime's poller is pd's owner needs no pin: its
  // runtime cannot end while it runs (or is parked).
  class pin {
   public:
    pin() noexcept = default;
    pin(const pin&) = delete;
    pin& operator=(const pin&) = delete;
    ~pin() {
      if (np_) np_->users_.fetch_sub(1, std::memory_order_seq_cst);
    }
    // The pinned poller, or nullptr (pd registered nowhere, or with a
    // poller whose end has begun).
    netpoller* get() const noexcept { return np_; }
    // netpoller::watch, unless the poller's runtime has begun to stop its Ms.
    void watch() const noexcept {
      if (np_ && may_watch_) np_->watch();
    }

   private:
    friend class netpoller;
    netpoller* np_ = nullptr;
    bool may_watch_ = false;
  };
  // Pins pd's owner into p (see above).
  static void pin_owner(poll_desc* pd, pin& p) noexcept {
    pd->pinning.fetch_add(1, std::memory_order_seq_cst);
    if (netpoller* np = pd->owner.load(std::memory_order_seq_cst)) {
      std::uint32_t v = np->users_.fetch_add(1, std::memory_order_seq_cst);
      if (v & users_dead) {
        np->users_.fetch_sub(1, std::memory_order_seq_cst);
      } else {
        p.np_ = np;
        p.may_watch_ = !(v & users_no_watch);
      }
    }
    pd->pinning.fetch_sub(1, std::memory_order_seq_cst);
  }

  // The runtime's shutdown, before it stops its Ms: no watch() from now on
  // (see pin_owner).
  void stop_watch() noexcept {
    users_.fetch_or(users_no_watch, std::memory_order_seq_cst);
    drain_users();
  }

  // netpollBreak: wakes the M blocked in poll(); one write per sleep.
  void brk() noexcept {
    if (!inited() || wake_sig_.exchange(true, std::memory_order_seq_cst)) return;
    os_poller_.wake();
  }

  // netpollunblock: takes the waiter out of pd's `mode` semaphore, leaving
  // pd_ready (ioready) or pd_nil. Returns the parked G to ready, if any.
  GORO_DECL static g* unblock(poll_desc* pd, char mode, bool ioready) noexcept;

  // Deadline timers' functions (the timer's seq is pd's seq when armed).
  GORO_DECL static void deadline_fired(poll_desc* pd, char mode, std::uintptr_t seq) noexcept;

 private:
  // Waits until nobody has this poller pinned (pin_owner).
  void drain_users() noexcept {
    while ((users_.load(std::memory_order_seq_cst) & users_count) != 0) os::yield_thread();
  }

  static constexpr unsigned ptr_bits = 48;
  static constexpr std::uint64_t ptr_mask = (std::uint64_t{1} << ptr_bits) - 1;
  static constexpr std::uint32_t seq_mask = 0xffff;
  static std::uint64_t tag(poll_desc* pd) noexcept {
    return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(pd)) |
           (static_cast<std::uint64_t>(pd->seq.load(std::memory_order_relaxed) & seq_mask) << ptr_bits);
  }

  // A reference to another runtime's pool, held because one of its
  // descriptors was registered here (from that pool's allocator).
  struct pool_ref {
    pd_pool* pool;
    pool_ref* next;
  };
  // The reference that lets this poller see pd's events (mu_ held): false
  // if the allocator failed.
  GORO_DECL bool hold_pool_locked(poll_desc* pd) noexcept;

  init_hook on_init_ = nullptr;
  void* on_init_arg_ = nullptr;
  pool_hook make_pool_ = nullptr;
  init_hook watch_ = nullptr;
  std::atomic<pd_pool*> own_{nullptr};  // this runtime's pool (one reference)
  pool_ref* foreign_ = nullptr;         // mu_
  os::poller os_poller_;
  std::atomic<bool> wake_sig_{false};  // a break is pending (Go's netpollWakeSig)
  std::atomic<bool> polling_{false};
  std::atomic<std::int32_t> waiters_{0};
  std::atomic<std::int64_t> last_poll_{0};
  std::mutex mu_;  // init, list_
  poll_desc* list_ = nullptr;
  // Pins (pin_owner): a count, and the flags that end them.
  static constexpr std::uint32_t users_dead = 1u << 31, users_no_watch = 1u << 30;
  static constexpr std::uint32_t users_count = users_no_watch - 1;
  std::atomic<std::uint32_t> users_{0};
};

// netpollblock: the calling goroutine waits for readiness on pd in `mode`.
// True: I/O is ready; false: woken by a close or a deadline (or spuriously).
GORO_DECL bool pd_block(poll_desc* pd, char mode);

// poll_runtime_pollWait: waits until ready, closing or past the deadline.
GORO_DECL pd_error pd_wait_g(poll_desc* pd, char mode);

// The scheduler's side of the poller, kept out of sched.hpp: S is
// scheduler<Policy> (this is its friend), M and P its M and P records.
template <class S>
struct netpoll_sched {
  using M = typename S::m;
  using P = typename S::p;

  // The poller now exists: the timer M (if any) sleeps on its futex; wake
  // it so that it goes back to sleep in epoll_wait (wake_for_timer takes
  // it off the idle list; with no timer M it calls wakep, harmless).
  static void on_init(void* arg) { static_cast<S*>(arg)->wake_for_timer(1); }

  // netpoller::watch's hook: with no timer M (none sleeps in the poll, nor
  // on its note with a deadline), start an M; finding no work with
  // waiters() > 0 it becomes the timer M, blocked in the poll. A timer M
  // there already sees the events (or, taken off the idle list meanwhile,
  // comes back to stopm and the poll).
  static void watch(void* arg) {
    S& s = *static_cast<S*>(arg);
    if (s.timer_m_until_.until() == 0) s.wakep();
  }

  // netpoller::pool's hook: for a runtime given an allocator, a pool of
  // descriptors from (a copy of) it; the process-wide cache otherwise.
  static pd_pool* make_pool(void* arg) {
    using A = typename S::rt_allocator;
    if constexpr (is_std_allocator<A>) {
      (void)arg;
      return nullptr;
    } else {
      return pd_pool_of<A>::make(static_cast<S*>(arg)->ra_.get());
    }
  }

  // find_runnable's poll (Go: netpoll(0) in findRunnable): only when some
  // goroutine waits on I/O and no other M polls. Returns one G to run now;
  // the others are injected.
  static g* ready(S& s, M* mm) {
    GORO_CHAOS_POINT("netpoll.ready");
    if (s.poller_.waiters() <= 0 || !s.poller_.try_lock()) return nullptr;
    g* gs[netpoller::max_batch];
    int n = s.poller_.poll(0, gs);
    s.poller_.unlock();
    n = keep_own(s, gs, n);
    if (n == 0) return nullptr;
    gs[0]->status.store(g_status::runnable, std::memory_order_relaxed);
    mm->pp->unparks.inc();
    inject(s, mm->pp, gs + 1, n - 1);
    return gs[0];
  }

  // injectglist: one G per idle P goes to the global queue (an M is woken
  // for them: wakep, and spinners chain), the rest to pp's run queue (all
  // to the global queue without a P). Gs of another runtime (a descriptor
  // registered here, waited on from there) go back to their own.
  static void inject(S& s, P* pp, g** gs, int n) {
    n = keep_own(s, gs, n);
    if (n <= 0) return;
    GORO_CHAOS_POINT("netpoll.inject");
    int to_global = pp ? std::min<int>(n, static_cast<int>(s.npidle_.load(std::memory_order_seq_cst))) : n;
    if (to_global > 0) {
      typename S::sched_lock lk(s);
      for (int i = 0; i < to_global; ++i) {
        gs[i]->status.store(g_status::runnable, std::memory_order_relaxed);
        s.globq_.push_back(gs[i]);
      }
    }
    // Not gs[0..to_global) from here on: once queued, another M may run
    // (and finish, and recycle) them.
    for (int i = to_global; i < n; ++i) {
      gs[i]->status.store(g_status::runnable, std::memory_order_relaxed);
      pp->runq.put(gs[i], false, [&s](g** batch, std::uint32_t k) { s.glob_put_batch(batch, k); });
    }
    s.unparks_.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    GORO_CHAOS_POINT("netpoll.inject_wakep");
    // Unconditionally, as Go's injectglist ends: a P may have gone idle
    // after npidle_ was read above, with Gs now in pp's queue and nobody
    // spinning; wakep's fence pairs with that M's re-check (see wakep).
    s.wakep();
  }

  // Readies the Gs of other runtimes through their own scheduler (a
  // descriptor registered here, waited on from there: rare) and packs
  // this runtime's to the front. Returns how many are this runtime's.
  static int keep_own(S& s, g** gs, int n) {
    int k = 0;
    for (int i = 0; i < n; ++i) {
      if (gs[i]->sched == &s)
        gs[k++] = gs[i];
      else
        gs[i]->sched->ready(gs[i]);
    }
    return k;
  }

  // The timer M's sleep (stopm): in epoll_wait until `until` (INT64_MAX:
  // no timer) once the poller exists, else on its note. Returns whether
  // the note was woken (see stopm). Only the timer M sleeps here, so a
  // waker that takes the timer M off the idle list wakes its note, then
  // breaks the poll (brk); the note is looked at before epoll_wait, and a
  // break that comes after that leaves the eventfd readable, so no wake-up
  // is lost. (The waker must not read the M after waking it: the run()
  // caller's M may leave and be freed at once.) Readied Gs go to the
  // global queue; this M takes an idle P for them itself (as Go's
  // findRunnable does after netpoll) by handing itself the P as a waker
  // would.
  static bool sleep(S& s, M* mm, std::int64_t until, std::int64_t now) {
    GORO_CHAOS_POINT("netpoll.sleep");
    long long ns = until == INT64_MAX ? -1 : (until - now > 0 ? until - now : 0);
    if (!s.poller_.inited() || !s.poller_.try_lock()) {
      // Another M is polling for a moment: look again soon.
      if (s.poller_.inited() && (ns < 0 || ns > 1'000'000)) ns = 1'000'000;
      return mm->park_note.sleep_for(ns < 0 ? INT64_MAX / 2 : ns);
    }
    g* gs[netpoller::max_batch];
    int n = 0;
    // Publish, fence, then read the note (Dekker with wake_idle_m).
    s.poll_sleeper_.store(mm, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!mm->park_note.is_woken()) n = s.poller_.poll(ns, gs);
    s.poll_sleeper_.store(nullptr, std::memory_order_relaxed);
    s.poller_.unlock();
    n = keep_own(s, gs, n);
    if (n > 0) {
      bool took_p = false;
      {
        typename S::sched_lock lk(s);
        for (int i = 0; i < n; ++i) {
          gs[i]->status.store(g_status::runnable, std::memory_order_relaxed);
          s.globq_.push_back(gs[i]);
        }
        if (mm->in_idle_list && !s.should_leave(mm)) {
          if (P* pp = s.pidle_get(lk)) {
            s.m_idle_remove(lk, mm);
            mm->nextp = pp;
            mm->park_note.wake();
            took_p = true;
          }
        }
      }
      s.unparks_.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
      GORO_CHAOS_POINT("netpoll.sleep_wakep");
      if (n > (took_p ? 1 : 0)) s.wakep();
    }
    return mm->park_note.is_woken();
  }

  // sysmon's poll (Go: sysmon polls if nobody did for 10 ms): readied Gs
  // go to the global queue. Returns true if it readied any.
  static bool sysmon(S& s, std::int64_t now) {
    if (s.poller_.waiters() <= 0 || now - s.poller_.last_poll() < 10'000'000 || !s.poller_.try_lock()) return false;
    g* gs[netpoller::max_batch];
    int n = s.poller_.poll(0, gs);
    s.poller_.unlock();
    inject(s, nullptr, gs, n);
    return n > 0;
  }
};

}  // namespace goro::detail

#if GORO_COMPILE_RUNTIME
namespace goro::detail {

GORO_DECL int netpoller::init() {
  if (inited()) return 0;
  if (int err = init_locked()) return err;
  if (on_init_) on_init_(on_init_arg_);
  return 0;
}

GORO_DECL int netpoller::init_locked() {
  std::lock_guard<std::mutex> lk(mu_);
  if (inited()) return 0;
  last_poll_.store(nanotime(), std::memory_order_relaxed);  // published with the poller
  const char* what = nullptr;
  return os_poller_.open(&what);
}

GORO_DECL void netpoller::open(poll_desc* pd) {
  if (int err = try_open(pd)) raise_system(err, "epoll_ctl(ADD)");
}

GORO_DECL int netpoller::try_open(poll_desc* pd) {
  if (int err = init()) return err;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!hold_pool_locked(pd)) return ENOMEM;
    pd->prev = nullptr;
    pd->next = list_;
    if (list_) list_->prev = pd;
    list_ = pd;
  }
  pd->owner.store(this, std::memory_order_seq_cst);
  if (int err = os_poller_.add(pd->fd, tag(pd), pd->slot)) {
    unlink(pd);  // no remove: on EEXIST the registration is someone else's
    return err;
  }
  return 0;
}

GORO_DECL bool netpoller::hold_pool_locked(poll_desc* pd) noexcept {
  pd_pool* pool = pd->pool;
  if (!pool || pool == own_.load(std::memory_order_relaxed)) return true;  // never freed / ours
  for (pool_ref* r = foreign_; r; r = r->next)
    if (r->pool == pool) return true;
  void* raw = nullptr;
  GORO_TRY { raw = memory_allocate(pool->memory(), sizeof(pool_ref), alignof(pool_ref)); }
  GORO_CATCH_ALL { return false; }
  pool->ref();
  foreign_ = ::new (raw) pool_ref{pool, foreign_};
  return true;
}

GORO_DECL void netpoller::close(poll_desc* pd) noexcept {
  os_poller_.remove(pd->fd, pd->slot);
  unlink(pd);
}

GORO_DECL void netpoller::unlink(poll_desc* pd) noexcept {
  std::lock_guard<std::mutex> lk(mu_);
  if (pd->owner.load(std::memory_order_relaxed) != this) return;  // detached meanwhile
  (pd->prev ? pd->prev->next : list_) = pd->next;
  if (pd->next) pd->next->prev = pd->prev;
  pd->prev = pd->next = nullptr;
  pd->owner.store(nullptr, std::memory_order_seq_cst);
}

GORO_DECL int netpoller::poll(long long timeout_ns, g** out) noexcept {
  if (!os_poller_.is_open()) return 0;
  if (timeout_ns >= 1'000'000'000'000LL) timeout_ns = 1'000'000'000'000LL;  // ~17 min: the caller loops
  os::poll_event evs[max_batch / 2];
  int n = os_poller_.wait(evs, max_batch / 2, timeout_ns);
  last_poll_.store(nanotime(), std::memory_order_relaxed);
  int k = 0;
  for (int i = 0; i < n; ++i) {
    std::uint64_t d = os::event_tag(evs[i]);
    if (d == 0) {             // the wake-up (no descriptor has address 0)
      if (timeout_ns != 0) {  // only the sleeper consumes a break
        os_poller_.drain_wake();
        wake_sig_.store(false, std::memory_order_seq_cst);
      }
      continue;
    }
    auto* pd = reinterpret_cast<poll_desc*>(static_cast<std::uintptr_t>(d & ptr_mask));
    if ((pd->seq.load(std::memory_order_relaxed) & seq_mask) != (d >> ptr_bits)) continue;  // recycled
    if (os::event_readable(evs[i]))
      if (g* gp = unblock(pd, 'r', true)) out[k++] = gp;
    if (os::event_writable(evs[i]))
      if (g* gp = unblock(pd, 'w', true)) out[k++] = gp;
  }
  return k;
}

GORO_DECL g* netpoller::unblock(poll_desc* pd, char mode, bool ioready) noexcept {
  auto& s = pd->sema(mode);
  std::uintptr_t old = s.load(std::memory_order_seq_cst);
  for (;;) {
    if (old == pd_ready) return nullptr;
    if (old == pd_nil && !ioready) return nullptr;
    std::uintptr_t nw = ioready ? pd_ready : pd_nil;
    if (s.compare_exchange_weak(old, nw, std::memory_order_seq_cst)) break;
  }
  if (old == pd_nil || old == pd_wait) return nullptr;  // pd_wait: the commit's CAS fails, the park is cancelled
  g* gp = reinterpret_cast<g*>(old);
  // gp is parked, so its runtime (and own) lives; pd's owner may be
  // another runtime's poller, in its end: pinned (pin_owner).
  netpoller* own = gp->sched->poller();
  netpoller* np = pd->owner.load(std::memory_order_seq_cst);
  pin p;
  if (np && np != own) {
    pin_owner(pd, p);
    np = p.get();
  }
  if (np) np->remove_waiter();
  // The commit counted gp on its own runtime's poller too when that was
  // not pd's owner (pd_block); the owner is the same now, or gone (its
  // runtime destroyed), or gp's own (registered there since): each way
  // gp's own poller gets back what the commit added.
  if (own && own != np) own->remove_waiter();
  return gp;
}

GORO_DECL void netpoller::deadline_fired(poll_desc* pd, char mode, std::uintptr_t seq) noexcept {
  if (pd->seq.load(std::memory_order_seq_cst) != seq) return;
  if (g* gp = unblock(pd, mode, false)) gp->sched->ready(gp);
}

GORO_DECL bool pd_block(poll_desc* pd, char mode) {
  auto& s = pd->sema(mode);
  for (;;) {
    std::uintptr_t v = pd_ready;
    if (s.compare_exchange_strong(v, pd_nil, std::memory_order_seq_cst)) return true;
    if (v == pd_nil) {
      if (s.compare_exchange_strong(v, pd_wait, std::memory_order_seq_cst)) break;
      continue;
    }
    if (v != pd_ready) raise_usage("two goroutines wait on one fd in the same direction (read or write) at once");
  }
  // Re-check after announcing the wait: a close or deadline that came
  // before our CAS is seen here (see poll_desc's memory-order note).
  bool wait = pd->check(mode) == pd_error::none;
  if constexpr (os::poller_arms) {
    // Ask for the readiness only now: the request reports it if it is
    // there already, so none is lost since the caller's EAGAIN. If the
    // request cannot be made, the caller retries its call (which fails
    // with the socket's error, or asks again).
    if (wait) {
      netpoller::pin p;  // pd's owner may be another runtime's poller, in its end
      netpoller::pin_owner(pd, p);
      if (netpoller* np = p.get())
        if (np->arm(pd, mode) != 0) {
          s.store(pd_nil, std::memory_order_seq_cst);
          return true;
        }
    }
  }
  if (wait) {
    struct commit_args {
      std::atomic<std::uintptr_t>* s;
      g* gp;
      poll_desc* pd;
      char mode;
    } a{&s, current_g(), pd, mode};
    // main_return (main_return.hpp): the runtime ending this goroutine
    // takes it out of the semaphore as a close would (unblock), unless
    // readiness got there first.
    a.gp->unlink_wait = [](void* arg) noexcept {
      auto* c = static_cast<commit_args*>(arg);
      return netpoller::unblock(c->pd, c->mode, false) != nullptr;
    };
    a.gp->unlink_arg = &a;
    // netpollblockcommit, on g0: wait -> G. Reads everything it needs
    // before the CAS: once it succeeds the G may be readied, run and
    // return (its frame, holding `a`, is then gone).
    park(
        current_m(),
        [](void* arg) {
          auto* c = static_cast<commit_args*>(arg);
          auto* sp = c->s;
          auto* gp = c->gp;
          netpoller* np = c->pd->owner.load(std::memory_order_seq_cst);
          std::uintptr_t expect = pd_wait;
          netpoller* own = gp->sched->poller();
          // Another runtime's poller may be in its end (that runtime
          // destroyed meanwhile): pinned before the CAS, used after it,
          // unpinned on return (pin_owner). Ours lives: we run in it.
          netpoller::pin p;
          if (np && np != own) {
            netpoller::pin_owner(c->pd, p);
            np = p.get();
          }
          GORO_CHAOS_POINT("netpoll.commit");
          if (!sp->compare_exchange_strong(expect, reinterpret_cast<std::uintptr_t>(gp), std::memory_order_seq_cst))
            return false;  // readiness / unblock came first: resume at once
          if (np) np->add_waiter();
          if (np != own && own) {
            // pd is registered with another runtime's poller (a socket
            // made or first waited on there). Our runtime counts us too,
            // as a goroutine the network can wake (checkdead, shutdown),
            // and the owner, whose Ms may all sleep on their notes (none
            // of its goroutines waited on I/O), gets one to watch it
            // (unless it is stopping them: its end readies us then).
            own->add_waiter();
            p.watch();
          } else if (np && gp->sched->runtime() != gp->sched) {
            np->watch();  // a thread_lane's goroutine: no M of np's runtime parked it
          }
          return true;
        },
        &a, wait_reason::io_wait);
    current_g()->unlink_wait = nullptr;
  }
  std::uintptr_t old = s.exchange(pd_nil, std::memory_order_seq_cst);
  if (old > pd_wait) fatal("goro: internal error: poll descriptor corrupted");
  return old == pd_ready;
}

GORO_DECL pd_error pd_wait_g(poll_desc* pd, char mode) {
  call_point();  // main_return (goexit.hpp)
  pd_error e = pd->check(mode);
  if (e != pd_error::none) return e;
  while (!pd_block(pd, mode)) {
    exit_if_killed(current_g());  // main_return (goexit.hpp)
    e = pd->check(mode);
    if (e != pd_error::none) return e;
  }
  return pd_error::none;
}

}  // namespace goro::detail
#endif  // GORO_COMPILE_RUNTIME
