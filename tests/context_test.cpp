// context: Go's context package (cancellation flowing down a tree, deadlines,
// done() in select, propagateCancel's registration rules).
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "test_util.hpp"

using namespace std::chrono_literals;
using goro_test::scale;

// Rounds of the stress cases that start a thread each round: fewer under
// qemu-user and Wine, where starting a thread costs about a millisecond
// (at the full count context_test took 100 s under qemu-aarch64 in CI).
constexpr int thread_rounds(int normal, int sanitized, int slow) {
#if defined(_WIN32)
  (void)normal;
  (void)sanitized;
  return slow;
#else
  return scale(normal, sanitized, slow);
#endif
}

namespace {

// True if ctx.done() is closed now (never blocks).
bool is_done(const goro::context& ctx) {
  bool closed = false;
  goro::select(goro::on_recv(ctx.done(), [&](std::optional<std::monostate> v) { closed = !v; }),
               goro::on_default([] {}));
  return closed;
}

}  // namespace

TEST_CASE("context: background is never done and has no deadline", "[context]") {
  goro::run([] {
    goro::context bg = goro::background();
    CHECK(bg.err() == goro::cancel_reason::none);
    CHECK(!bg.deadline());
    CHECK(bg.done() == nullptr);  // the nil channel: never ready
    CHECK(!is_done(bg));
    CHECK(bg == goro::context{});
  });
}

TEST_CASE("context: with_cancel closes done, sets err, and is idempotent", "[context]") {
  goro::run([] {
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    CHECK(ctx.err() == goro::cancel_reason::none);
    CHECK(!is_done(ctx));
    std::atomic<int> woken{0}, bad{0};  // Catch's CHECK is not thread-safe: count in goroutines
    goro::wait_group wg;
    for (int i = 0; i < 5; ++i) {
      wg.add(1);
      goro::go([&, c = ctx] {
        if (c.done().recv()) bad.fetch_add(1);  // blocks until closed
        if (c.err() != goro::cancel_reason::canceled) bad.fetch_add(1);
        woken.fetch_add(1);
        wg.done();
      });
    }
    for (int i = 0; i < 20; ++i) goro::yield();
    CHECK(woken.load() == 0);
    cancel();
    cancel();  // idempotent
    wg.wait();
    CHECK(woken.load() == 5);
    CHECK(bad.load() == 0);
    CHECK(is_done(ctx));
    CHECK(ctx.err() == goro::cancel_reason::canceled);
  });
}

TEST_CASE("context: cancellation flows to every descendant before cancel returns, never up", "[context]") {
  goro::run([] {
    auto [root, cancel_root] = goro::with_cancel(goro::background());
    auto [a, cancel_a] = goro::with_cancel(root);
    auto [b, cancel_b] = goro::with_cancel(a);
    auto [c, cancel_c] = goro::with_timeout(b, 1h);
    auto [sib, cancel_sib] = goro::with_cancel(root);

    cancel_b();  // the middle: b and c, not a, root or sib
    CHECK(b.err() == goro::cancel_reason::canceled);
    CHECK(c.err() == goro::cancel_reason::canceled);
    CHECK(is_done(c));
    CHECK(a.err() == goro::cancel_reason::none);
    CHECK(root.err() == goro::cancel_reason::none);
    CHECK(sib.err() == goro::cancel_reason::none);

    cancel_root();
    CHECK(a.err() == goro::cancel_reason::canceled);
    CHECK(sib.err() == goro::cancel_reason::canceled);
    CHECK(is_done(a));
    CHECK(is_done(sib));

    // A child made from a cancelled parent is cancelled at once.
    auto [late, cancel_late] = goro::with_cancel(root);
    CHECK(late.err() == goro::cancel_reason::canceled);
    CHECK(is_done(late));
    cancel_a(), cancel_c(), cancel_sib(), cancel_late();
  });
}

TEST_CASE("context: deadline fires deadline_exceeded, and children report the parent's reason", "[context]") {
  goro::run([] {
    auto start = std::chrono::steady_clock::now();
    auto [ctx, cancel] = goro::with_timeout(goro::background(), 30ms);
    auto [child, cancel_child] = goro::with_cancel(ctx);
    REQUIRE(ctx.deadline());
    CHECK(*ctx.deadline() >= start + 30ms);
    CHECK(child.deadline() == ctx.deadline());  // inherited
    CHECK(!child.done().recv());                // blocks until the parent's timer fires
    CHECK(std::chrono::steady_clock::now() - start >= 30ms);
    CHECK(ctx.err() == goro::cancel_reason::deadline_exceeded);
    CHECK(child.err() == goro::cancel_reason::deadline_exceeded);
    cancel();  // after the fact: the reason stays
    CHECK(ctx.err() == goro::cancel_reason::deadline_exceeded);
    cancel_child();
  });
}

TEST_CASE("context: a child's deadline is never later than its parent's", "[context]") {
  goro::run([] {
    auto now = std::chrono::steady_clock::now();
    auto [parent, cancel_parent] = goro::with_deadline(goro::background(), now + 10h);
    auto [later, cancel_later] = goro::with_deadline(parent, now + 20h);
    auto [sooner, cancel_sooner] = goro::with_timeout(parent, 1h);
    REQUIRE(later.deadline());
    CHECK(*later.deadline() == *parent.deadline());
    REQUIRE(sooner.deadline());
    CHECK(*sooner.deadline() < *parent.deadline());
    // A deadline already past: done at once.
    auto [past, cancel_past] = goro::with_deadline(parent, now - 1s);
    CHECK(past.err() == goro::cancel_reason::deadline_exceeded);
    CHECK(parent.err() == goro::cancel_reason::none);
    // A huge timeout saturates instead of overflowing.
    auto [forever, cancel_forever] = goro::with_timeout(goro::background(), std::chrono::nanoseconds::max());
    CHECK(forever.err() == goro::cancel_reason::none);
    cancel_parent(), cancel_later(), cancel_sooner(), cancel_past(), cancel_forever();
    CHECK(later.err() == goro::cancel_reason::canceled);
  });
}

TEST_CASE("context: done() in select against a work channel", "[context]") {
  goro::run([] {
    auto [ctx, cancel] = goro::with_timeout(goro::background(), 20ms);
    goro::chan<int> work;  // nobody sends
    bool timed_out = false;
    goro::select(goro::on_recv(work, [](std::optional<int>) {}),
                 goro::on_recv(ctx.done(), [&](std::optional<std::monostate>) { timed_out = true; }));
    CHECK(timed_out);
    CHECK(ctx.err() == goro::cancel_reason::deadline_exceeded);
    cancel();
  });
}

TEST_CASE("context: cancelling releases the registration and the timer at once", "[context]") {
  goro::run([] {
    auto [parent, cancel_parent] = goro::with_cancel(goro::background());
    // Many timed children of a long-lived parent, each cancelled and
    // dropped: each must leave the parent's list (and its timer the heap)
    // as it goes, or cancelling the parent below would touch freed states.
    for (int i = 0; i < 1000; ++i) {
      auto [c, cancel] = goro::with_timeout(parent, 1h);
      cancel();
      CHECK(c.err() == goro::cancel_reason::canceled);
    }
    // The parent still works and has no stale children: cancelling it
    // touches only live ones (a stale pointer would crash under ASan).
    auto [live, cancel_live] = goro::with_cancel(parent);
    cancel_parent();
    CHECK(live.err() == goro::cancel_reason::canceled);
    cancel_live();
  });
}

TEST_CASE("context: dropping every handle without cancel frees the child (no cycle)", "[context]") {
  goro::run([] {
    auto [parent, cancel_parent] = goro::with_cancel(goro::background());
    for (int i = 0; i < 1000; ++i) {
      auto [c, cancel] = goro::with_timeout(parent, 1h);
      (void)c;
      (void)cancel;  // dropped uncancelled: the destructor unlinks it and stops its timer
    }
    cancel_parent();
    CHECK(parent.err() == goro::cancel_reason::canceled);
  });
}

TEST_CASE("context: a timer firing while the last handle is dropped", "[context]") {
  // The timer's function and the state's destructor race: the destructor
  // must wait for the function (sync timer), never free under it.
  goro::runtime rt{goro::options{4}};
  rt.run([] {
    const int n = scale(2000, 200);
    goro::wait_group wg;
    for (int i = 0; i < n; ++i) {
      wg.add(1);
      goro::go([&wg, i] {
        auto [c, cancel] = goro::with_timeout(goro::background(), std::chrono::microseconds(i % 50));
        if (i % 2) goro::yield();
        (void)c;
        (void)cancel;
        wg.done();
      });
    }
    wg.wait();
  });
}

TEST_CASE("context: cancel from a plain thread wakes goroutines; done() works on threads", "[context]") {
  goro::options o;
  o.maxprocs = 2;
  o.detect_deadlock = false;  // the main goroutine waits for a plain thread
  goro::runtime rt{o};
  auto [ctx, cancel] = goro::with_cancel(goro::background());
  std::atomic<bool> thread_saw_close{false};
  std::thread t([&, c = ctx] { thread_saw_close = !c.done().recv(); });  // a thread blocked on done()
  rt.run([&, c = ctx, cf = cancel] {
    std::thread canceller([cf] {
      std::this_thread::sleep_for(10ms);
      cf();
    });
    CHECK(!c.done().recv());
    canceller.join();
  });
  t.join();
  CHECK(thread_saw_close.load());
  CHECK(ctx.err() == goro::cancel_reason::canceled);
}

TEST_CASE("context: fan-out cancel wakes every waiter", "[context]") {
  goro::runtime rt{goro::options{4}};
  rt.run([] {
    const int n = scale(10000, 500);
    auto [parent, cancel] = goro::with_cancel(goro::background());
    goro::wait_group started, wg;
    std::atomic<int> woken{0}, bad{0};
    for (int i = 0; i < n; ++i) {
      started.add(1);
      wg.add(1);
      goro::go([&, p = parent] {
        auto [c, cancel_c] = goro::with_cancel(p);
        started.done();
        goro::select(goro::on_recv(c.done(), [&](std::optional<std::monostate>) { woken.fetch_add(1); }));
        if (c.err() != goro::cancel_reason::canceled) bad.fetch_add(1);
        cancel_c();
        wg.done();
      });
    }
    started.wait();
    cancel();
    wg.wait();
    CHECK(woken.load() == n);
    CHECK(bad.load() == 0);
  });
}

TEST_CASE("context: the deadline timer dropping the last reference to its own context", "[context]") {
  // The parent's timer fires and cancels its children; the only other
  // holder of the child drops it as soon as the parent's done() closes, so
  // the timer's function ends up holding the child's last reference, and
  // the child holds the parent's: releasing it destroys the parent inside
  // its own timer's function, whose destructor must not wait for that very
  // call (it did: the runtime hung at shutdown, seen under qemu).
  // A plain thread drops the handles (woken by done(), no P needed); the
  // child's 500 children lengthen the window while the timer cancels them.
  std::atomic<bool> finished{false};
  std::thread watchdog([&] {
    if (!goro_test::eventually_sleeping([&] { return finished.load(); }, std::chrono::seconds(20))) {
      std::fprintf(stderr, "context_test: a deadline timer destroying its own context hung\n");
      std::_Exit(1);  // the runtime cannot be shut down: fail loudly rather than time out
    }
  });
  goro::options o;
  o.maxprocs = 2;
  o.detect_deadlock = false;  // main waits for a plain thread
  goro::runtime rt{o};
  rt.run([] {
    for (int round = 0; round < scale(200, 40); ++round) {
      auto [parent, cancel_parent] = goro::with_timeout(goro::background(), 2ms);
      auto [child, cancel_child] = goro::with_cancel(parent);
      std::vector<goro::context> grandchildren;
      std::vector<goro::cancel_func> cancels;
      for (int i = 0; i < 500; ++i) {
        auto [gc, cancel_gc] = goro::with_cancel(child);
        grandchildren.push_back(gc);
        cancels.push_back(cancel_gc);
      }
      auto parent_done = parent.done();
      std::thread holder([parent_done, c = std::move(child), cc = std::move(cancel_child),
                          g = std::move(grandchildren), gcs = std::move(cancels)]() mutable {
        (void)parent_done.recv();  // closed by the timer before it cancels the children
        g.clear();
        gcs.clear();
        c = goro::context{};
        cc = goro::cancel_func{};
      });
      parent = goro::context{};  // the parent lives on through its child only
      cancel_parent = goro::cancel_func{};
      goro::blocking([&] { holder.join(); });
    }
  });
  finished = true;
  watchdog.join();
}

TEST_CASE("context: a long chain cancelled from its root fits a goroutine's stack", "[context]") {
  // cancel recursed once per level (~130 bytes each at -O2): a chain of
  // 600 overflowed a 64 KiB stack. The chain is released leaf first, so
  // no destructor drops a whole chain of parents at once.
  constexpr int n = 5000;
  goro::run([] {
    goro::chan<int> done(1);
    goro::go(goro::spawn_options{.stack_size = 64 * 1024}, [done]() mutable {
      auto [root, cancel_root] = goro::with_cancel(goro::background());
      std::vector<goro::context> chain{root};
      std::vector<goro::cancel_func> cancels;
      for (int i = 0; i < n; ++i) {
        auto [c, cancel] = goro::with_cancel(chain.back());
        chain.push_back(c);
        cancels.push_back(cancel);
      }
      cancel_root();
      CHECK(chain.back().err() == goro::cancel_reason::canceled);
      CHECK(is_done(chain.back()));
      CHECK(chain[n / 2].err() == goro::cancel_reason::canceled);
      while (!cancels.empty()) {
        cancels.pop_back();
        chain.pop_back();
      }
      done.send(1);
    });
    (void)done.recv();
  });
}

namespace {

// A chain of n contexts, each a with_cancel of the one before, of which
// only the leaf is kept: every level is held by its child alone. Also
// returns the root's cancel_func when asked for it.
goro::context deep_chain(int n, goro::cancel_func* cancel_root = nullptr) {
  auto [ctx, cancel] = goro::with_cancel(goro::background());
  if (cancel_root) *cancel_root = cancel;
  for (int i = 0; i < n; ++i) ctx = goro::with_cancel(ctx).first;
  return ctx;
}

}  // namespace

TEST_CASE("context: a deep chain dropped from its leaf frees iteratively", "[context]") {
  // Dropping the leaf of a chain whose levels are held only by their
  // children freed one level inside the other's destructor: ~5,000 levels
  // overflowed a goroutine's 64 KiB stack, ~100,000 an 8 MiB thread's.
  constexpr int n = 100'000;
  // On a plain thread (its default stack).
  std::thread([] {
    goro::context leaf = deep_chain(n);
    CHECK(leaf.err() == goro::cancel_reason::none);
    leaf = goro::context{};  // the whole chain goes here
  }).join();
  // In a goroutine with a small stack: built, cancelled from its root, dropped.
  goro::run([] {
    goro::chan<int> done(1);
    goro::go(goro::spawn_options{.stack_size = 64 * 1024}, [done]() mutable {
      goro::context leaf = deep_chain(n);
      leaf = goro::context{};
      goro::cancel_func cancel_root;
      leaf = deep_chain(n, &cancel_root);
      cancel_root();  // cancels every level, from the root down, iteratively
      CHECK(leaf.err() == goro::cancel_reason::canceled);
      CHECK(is_done(leaf));
      leaf = goro::context{};
      cancel_root = goro::cancel_func{};
      done.send(1);
    });
    CHECK(done.recv() == 1);
  });
}

TEST_CASE("context: with_timeout(hours::max()) and a coarse max() deadline never fire", "[context]") {
  // with_timeout took std::chrono::nanoseconds: hours::max() converted to it
  // with an overflow (UB) and read as a past deadline, so "no timeout"
  // cancelled the context at once (deadline_exceeded); likewise
  // with_deadline(time_point<steady_clock, seconds>::max()).
  using namespace std::chrono;
  goro::run([] {
    auto [a, cancel_a] = goro::with_timeout(goro::background(), hours::max());
    auto [b, cancel_b] = goro::with_deadline(goro::background(), time_point<steady_clock, seconds>::max());
    auto [c, cancel_c] = goro::with_timeout(goro::background(), duration<double>(1e30));
    goro::sleep_for(5ms);
    CHECK(a.err() == goro::cancel_reason::none);
    CHECK(b.err() == goro::cancel_reason::none);
    CHECK(c.err() == goro::cancel_reason::none);
    CHECK(a.deadline() > steady_clock::now() + hours(24 * 365 * 100));
    CHECK(b.deadline() > steady_clock::now() + hours(24 * 365 * 100));
    cancel_a();
    cancel_b();
    cancel_c();
    CHECK(a.err() == goro::cancel_reason::canceled);
    // And the other end: already past.
    auto [d, cancel_d] = goro::with_timeout(goro::background(), hours::min());
    auto [e, cancel_e] = goro::with_deadline(goro::background(), time_point<steady_clock, seconds>::min());
    auto [f, cancel_f] = goro::with_timeout(goro::background(), -1ms);
    CHECK(d.err() == goro::cancel_reason::deadline_exceeded);
    CHECK(e.err() == goro::cancel_reason::deadline_exceeded);
    CHECK(f.err() == goro::cancel_reason::deadline_exceeded);
  });
}

TEST_CASE("context: a parent cancelled while its children arm their deadline timers leaves none pending",
          "[context][timer]") {
  // arm() checked err_ and set armed_ without the state's lock: a cancel
  // arriving through the parent in between read armed_ false, skipped the
  // timer, and the child then queued it -- a cancelled context whose timer
  // stayed pending until its deadline (and a data race on armed_, which
  // TSan reports). Made on this plain thread, the timers go on the
  // process-wide heap, whose thread counts as an external M while one is
  // pending: a leaked one holds off a runtime's deadlock detection.
  constexpr auto pending_for = 20s;
  std::vector<goro::context> kids;  // kept: a dropped child deletes its timer
  for (int round = 0; round < thread_rounds(20000, 2000, 1000); ++round) {
    auto [parent, cancel] = goro::with_cancel(goro::background());
    std::atomic<bool> start{false};
    std::thread canceller([&start, cancel = cancel] {
      while (!start.load(std::memory_order_acquire)) {
      }
      cancel();
    });
    start.store(true, std::memory_order_release);
    for (int i = 0; i < 4; ++i) kids.push_back(goro::with_timeout(parent, pending_for).first);
    canceller.join();
  }
  std::size_t cancelled = 0;
  for (const goro::context& k : kids) cancelled += k.err() == goro::cancel_reason::canceled;
  REQUIRE(cancelled == kids.size());
  const auto t0 = std::chrono::steady_clock::now();
  // The channel outlives run(): main stays parked for good after a
  // deadlock, so what is on its stack is never destroyed (LeakSanitizer).
  goro::chan<int> never;
  CHECK_THROWS_AS(goro::run([&never] { (void)never.recv(); }), goro::deadlock_error);
  CHECK(std::chrono::steady_clock::now() - t0 < scale(5, 10) * 1s);
}

TEST_CASE("context: a cancel cut short by main returning still closes done and cancels the children",
          "[context][main_return]") {
  // The canceller reaches its first goro call (cancel's close of done)
  // after main returned, so the runtime ends it there. cancel() had set
  // err and detached the children already: the context read as cancelled,
  // but done() never closed and its children were never cancelled.
  goro::context ctx, child;
  goro::run([&] {
    auto [c, cancel] = goro::with_cancel(goro::background());
    ctx = c;
    child = goro::with_cancel(c).first;
    goro::go([cancel = cancel] {
      const auto t0 = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() - t0 < 100ms) {
      }  // no goro call: still running when main returns
      cancel();
    });
    goro::sleep_for(10ms);
  });
  CHECK(ctx.err() == goro::cancel_reason::canceled);
  CHECK(is_done(ctx));
  CHECK(child.err() == goro::cancel_reason::canceled);
  CHECK(is_done(child));
}

TEST_CASE("context: a cancel that loses the race to another still returns only once every descendant is cancelled",
          "[context]") {
  // Go's cancel holds c.mu while it cancels the children, so a second
  // cancel (another goroutine's, or the deadline's) waits for it. Here the
  // loser returned at once: its ctx's done() could still be open and its
  // children not cancelled yet (a third of the rounds below).
  int early = 0;
  for (int round = 0; round < thread_rounds(2000, 200, 100); ++round) {
    auto [parent, cancel] = goro::with_cancel(goro::background());
    std::vector<goro::context> kids;
    for (int i = 0; i < 50; ++i) kids.push_back(goro::with_cancel(goro::with_cancel(parent).first).first);
    std::atomic<int> ready{0};
    std::thread other([&ready, cancel = cancel] {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      cancel();
    });
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    cancel();
    bool all = is_done(parent);
    for (const goro::context& k : kids) all = all && k.err() == goro::cancel_reason::canceled && is_done(k);
    early += !all;
    other.join();
  }
  CHECK(early == 0);
}

TEST_CASE("context: racing cancels from goroutines / goro::blocking / a plain thread / the deadline all wait",
          "[context]") {
  // The losers' two ways of waiting for the winner: parking on done()
  // (a goroutine: the winner may be a goroutine queued behind it) and
  // yielding inside goro::blocking; the deadline's timer never waits.
  // Before, a losing cancel returned at once (~1 round in 4 here).
  std::atomic<int> early{0};
  auto check = [&early](const std::vector<goro::context>& kids) {
    for (const goro::context& k : kids)
      if (k.err() == goro::cancel_reason::none || !is_done(k)) {
        early.fetch_add(1);
        return;
      }
  };
  goro::options o;
  o.maxprocs = 2;
  goro::run(
      [&] {
        for (int round = 0; round < thread_rounds(1000, 100, 50); ++round) {
          auto [parent, cancel] = goro::with_timeout(goro::background(), std::chrono::microseconds(round % 40));
          std::vector<goro::context> kids;
          for (int i = 0; i < 50; ++i) kids.push_back(goro::with_cancel(goro::with_timeout(parent, 1h).first).first);
          goro::wait_group wg;
          wg.add(3);
          goro::go([&, cancel = cancel] {
            cancel();
            check(kids);
            wg.done();
          });
          goro::go([&, cancel = cancel] {
            goro::blocking([&] { cancel(); });
            check(kids);
            wg.done();
          });
          std::thread t([&, cancel = cancel] {
            cancel();
            check(kids);
            wg.done();
          });
          wg.wait();
          t.join();
        }
      },
      o);
  CHECK(early.load() == 0);
}

TEST_CASE("context: children dropped on other threads while their parent is cancelled are each freed once",
          "[context]") {
  // A child's destructor skips its parent's lock once the parent's cancel
  // has taken it off the list (see ~context_state); the cancel must not
  // touch a child it did not take after that. Threads drop children while
  // the parent is cancelled; a touch of a freed child is a
  // heap-use-after-free under ASan and a race under TSan, and a child
  // left on the list of a parent cancelled later would be freed twice.
  for (int round = 0; round < thread_rounds(500, 200, 50); ++round) {
    auto [parent, cancel] = goro::with_cancel(goro::background());
    std::vector<goro::context> a, b;
    for (int i = 0; i < 32; ++i) (i % 2 ? a : b).push_back(goro::with_cancel(parent).first);
    std::atomic<int> ready{0};
    auto drop = [&ready](std::vector<goro::context>& v) {
      ready.fetch_add(1);
      while (ready.load() < 3) std::this_thread::yield();
      while (!v.empty()) v.pop_back();  // the last handle: each child's destructor runs here
    };
    std::thread ta(drop, std::ref(a)), tb(drop, std::ref(b));
    ready.fetch_add(1);
    while (ready.load() < 3) std::this_thread::yield();
    if (round % 2) std::this_thread::yield();
    cancel();
    ta.join();
    tb.join();
    CHECK(parent.err() == goro::cancel_reason::canceled);
    auto [late, cancel_late] = goro::with_cancel(parent);  // the parent's list is empty and usable
    CHECK(late.err() == goro::cancel_reason::canceled);
    cancel_late();
  }
}
