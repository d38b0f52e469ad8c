// The public contract (SPEC.md) as one program: every name it lists is used
// here in the form it gives, so a missing or renamed one fails to compile,
// and each call's result is checked. (goro::trace was in the contract but
// missing until a probe like this one was compiled.)
#include <catch2/catch.hpp>
#include <goro/goro.hpp>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <ratio>
#include <shared_mutex>
#include <span>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "test_util.hpp"

namespace {

struct my_frame_clock {  // the Clock requirements, nothing more
  using rep = long long;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<my_frame_clock>;
  static constexpr bool is_steady = true;
  static time_point now() { return time_point{std::chrono::steady_clock::now().time_since_epoch()}; }
};

struct my_pool_allocator {  // forwards to the default allocator
  goro::default_stack_allocator inner;
  goro::stack_memory allocate(std::size_t size) { return inner.allocate(size); }
  void deallocate(goro::stack_memory m) noexcept { inner.deallocate(m); }
};

// SPEC's policy example, word for word (with preemption::cooperative: the
// signal mode is not available under TSan).
using my_policy = goro::policy<goro::queue_capacity<512>, goro::global_poll<31>, goro::steal<1, 4>,
                               goro::preempt_clock<my_frame_clock>, goro::slice_us<2000>,
                               goro::preemption_mode<goro::preemption::cooperative>, goro::stack<16 * 1024>,
                               goro::stacks<my_pool_allocator>>;

static_assert(goro::clock_like<goro::manual_clock>);
static_assert(goro::clock_like<goro::cycle_clock>);
static_assert(goro::clock_like<my_frame_clock>);
static_assert(goro::stack_allocator<my_pool_allocator>);
static_assert(std::is_base_of_v<std::runtime_error, goro::error>);
static_assert(std::is_base_of_v<goro::error, goro::usage_error> &&
              std::is_base_of_v<goro::error, goro::channel_closed> &&
              std::is_base_of_v<goro::error, goro::deadlock_error> &&
              std::is_base_of_v<goro::error, goro::timeout_error>);
static_assert(std::is_same_v<goro::runtime, goro::basic_runtime<>>);
static_assert(goro::default_policy::local_queue_capacity == 256 && goro::default_policy::global_poll_interval == 61);

// A policy written by hand with exactly the fields SPEC's default_policy
// lists (no allocator_type: it is optional, std::allocator then).
struct spec_fields_policy {
  static constexpr std::size_t local_queue_capacity = 64;
  static constexpr std::uint32_t global_poll_interval = 61;
  using steal_fraction = std::ratio<1, 2>;
  using preemption_clock = std::chrono::steady_clock;
  static constexpr std::chrono::nanoseconds time_slice{10'000'000};
  static constexpr goro::preemption preempt = goro::preemption::cooperative;
  static constexpr std::size_t stack_size = 32 * 1024;
  using stack_allocator = goro::default_stack_allocator;
};
static_assert(std::is_same_v<goro::basic_runtime<spec_fields_policy>::allocator_type, std::allocator<std::byte>>);

}  // namespace

TEST_CASE("spec: a hand-written policy with SPEC's fields runs", "[spec]") {
  goro::basic_runtime<spec_fields_policy> rt({.maxprocs = 2});
  CHECK(rt.run([] {
    goro::chan<int> c;
    goro::go([c]() mutable { c.send(5); });
    return c.recv().value();
  }) == 5);
}

TEST_CASE("spec: every name in the public contract compiles and works", "[spec]") {
  goro::options o;
  o.maxprocs = 2;
  o.max_threads = 10000;
  o.thread_name = "goro";
  o.thread_factory = {};  // SPEC "Engine embedding": empty, the runtime's own threads
  o.main_stack_size = 8 << 20;
  goro::runtime rt{o};
  const int r = rt.run([&] {
    int got = 0;
    goro::wait_group spawned;
    spawned.add(1);
    goro::go([&](int v) { got = v, spawned.done(); }, 5);
    spawned.wait();
    CHECK(got == 5);
    spawned.add(1);
    goro::go(goro::spawn_options{.stack_size = 8 * 1024}, [&](int v) { got = v, spawned.done(); }, 6);
    spawned.wait();
    CHECK(got == 6);
    goro::yield();
    CHECK(goro::num_goroutine() >= 1);
    CHECK(goro::gomaxprocs() == 2);
    CHECK(goro::num_cpu() >= 1);
    goro::lock_os_thread();
    goro::unlock_os_thread();
    goro::preempt_point();
    CHECK(goro::blocking([] { return 3; }) == 3);
    CHECK(goro::this_goroutine::inside());
    CHECK(goro::this_goroutine::id() != 0);

    goro::chan<int> c(1);
    c.send(1);
    CHECK(c.recv() == 1);
    int x = 2;
    CHECK(c.try_send(x));
    CHECK(c.size() == 1);
    CHECK(c.capacity() == 1);
    CHECK(c.try_recv() == 2);
    goro::chan<int> d, e(1);
    std::size_t idx =
        goro::select(goro::on_recv(d, [](std::optional<int>) {}), goro::on_send(e, 5, [] {}), goro::on_default([] {}));
    CHECK(idx == 1);
    c.send(9);
    c.close();
    int sum = 0;
    for (int k : c) sum += k;
    CHECK(sum == 9);

    goro::mutex m;
    { std::lock_guard<goro::mutex> g(m); }
    CHECK(m.try_lock());
    m.unlock();
    goro::once once;
    int calls = 0;
    once.call([&] { ++calls; });
    once.call([&] { ++calls; });
    CHECK(calls == 1);
    goro::cond cv;
    {
      std::unique_lock<goro::mutex> lk(m);
      cv.notify_one();
      cv.notify_all();
    }
    goro::sleep_for(std::chrono::milliseconds(1));
    goro::sleep_until(std::chrono::steady_clock::now());
    CHECK(goro::after(std::chrono::milliseconds(1)).recv().has_value());
    goro::timer t(std::chrono::hours(1));
    CHECK(t.stop());
    t.reset(std::chrono::milliseconds(1));
    CHECK(t.c().recv().has_value());
    goro::ticker tk(std::chrono::milliseconds(1));
    tk.reset(std::chrono::milliseconds(2));
    CHECK(tk.c().recv().has_value());
    tk.stop();

    goro::net::listener ln = goro::net::listen_tcp("127.0.0.1:0");
    CHECK(ln.port() != 0);
    goro::net::conn empty_conn;
    goro::net::listener empty_listener;
    (void)empty_conn;
    (void)empty_listener;
    goro::chan<std::size_t> read_n(1);
    goro::go([ln, read_n]() mutable {
      goro::net::conn s = ln.accept();
      std::byte buf[4];
      read_n.send(s.read(std::span<std::byte>(buf)));
      s.close();
    });
    goro::net::conn cc = goro::net::dial_tcp("127.0.0.1:" + std::to_string(ln.port()));
    const std::byte out[4]{};
    cc.set_deadline(std::chrono::steady_clock::now() + std::chrono::seconds(10));
    cc.write(std::span<const std::byte>(out));
    CHECK(read_n.recv() == 4u);
    cc.close();
    ln.close();
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    CHECK(goro::net::wait_writable(fds[1]));
    REQUIRE(::write(fds[1], "x", 1) == 1);
    CHECK(goro::net::wait_readable(fds[0]));
    ::close(fds[0]);
    ::close(fds[1]);
    { goro::async_preemptible scope; }
    return 7;
  });
  CHECK(r == 7);
  CHECK(rt.gomaxprocs() == 2);
  CHECK(rt.num_goroutine() <= 2);
  CHECK(rt.stats().spawns >= 2);
  goro::wait_group from_outside;
  from_outside.add(1);
  rt.go([&] { from_outside.done(); });
  from_outside.wait();
  CHECK(goro::run([] { return 1; }, goro::options{1}) == 1);

  goro::basic_runtime<my_policy> prt{goro::options{1}};
  CHECK(prt.run([] { return goro::this_goroutine::inside(); }));

  const auto before = goro::manual_clock::now();
  goro::manual_clock::advance(std::chrono::milliseconds(1));
  CHECK(goro::manual_clock::now() - before == std::chrono::milliseconds(1));
  const auto c0 = goro::cycle_clock::now();
  const auto c1 = goro::cycle_clock::now();
  CHECK(c1 >= c0);  // steady

  const std::string path = "/tmp/goro_spec_surface_" + std::to_string(::getpid()) + ".json";
  goro::trace::start(path);
  goro::trace::stop();
  CHECK(std::remove(path.c_str()) == 0);
  CHECK_FALSE(goro::this_goroutine::inside());
}

TEST_CASE("spec: context, group, nil channels, select_case, rw_mutex, timed waits, after_func", "[spec]") {
  using namespace std::chrono_literals;
  goro::run([] {
    goro::context bg = goro::background();
    std::pair<goro::context, goro::cancel_func> a = goro::with_cancel(bg);
    std::pair<goro::context, goro::cancel_func> b =
        goro::with_timeout(a.first, std::chrono::nanoseconds(1'000'000'000));
    std::pair<goro::context, goro::cancel_func> c = goro::with_deadline(a.first, std::chrono::steady_clock::now() + 1h);
    goro::recv_chan<std::monostate> done = b.first.done();
    CHECK(b.first.err() == goro::cancel_reason::none);
    std::optional<std::chrono::steady_clock::time_point> dl = b.first.deadline();
    CHECK(dl.has_value());
    a.second();
    CHECK(!done.recv().has_value());
    CHECK(c.first.err() == goro::cancel_reason::canceled);
    b.second();
    c.second();

    goro::group g;
    goro::group g2(bg);
    g.set_limit(2);
    g.go([] {});
    CHECK(g.try_go([]() -> std::error_code { return {}; }));
    std::error_code ec = g.wait();
    CHECK(!ec);
    CHECK(g.ctx().err() == goro::cancel_reason::canceled);
    CHECK(!g2.wait());

    goro::chan<int> nil = nullptr;
    goro::chan<int> ready(1);
    ready.send(3);
    std::vector<goro::select_case> cases;
    cases.push_back(goro::recv_case(nil, [](std::optional<int>) {}));
    cases.push_back(goro::recv_case(ready, [](std::optional<int> v) { CHECK(*v == 3); }));
    cases.push_back(goro::send_case(nil, 1, [] {}));
    CHECK(goro::select(std::span<goro::select_case>(cases)) == 1);
    cases.push_back(goro::default_case([] {}));
    CHECK(goro::select(std::span<goro::select_case>(cases)) == 3);

    goro::rw_mutex rw;
    { std::shared_lock<goro::rw_mutex> r(rw); }
    { std::lock_guard<goro::rw_mutex> w(rw); }
    CHECK(rw.try_lock_shared());
    rw.unlock_shared();

    goro::wait_group wg;
    CHECK(wg.wait_for(1ms));
    CHECK(wg.wait_until(std::chrono::steady_clock::now() + 1ms));
    goro::mutex mu;
    CHECK(mu.try_lock_for(1ms));
    CHECK(!mu.try_lock_until(std::chrono::steady_clock::now() + 1ms));
    goro::cond cv;
    {
      std::unique_lock<goro::mutex> lk(mu, std::adopt_lock);
      CHECK(!cv.wait_for(lk, 1ms));
      CHECK(!cv.wait_until(lk, std::chrono::steady_clock::now() + 1ms));
    }

    goro::chan<int> fired(1);
    goro::timer t = goro::after_func(1ms, [fired]() mutable { fired.send(1); });
    CHECK(*fired.recv() == 1);
    CHECK(!t.stop());
  });
}

TEST_CASE("spec: network additions (address, lookup_host, Unix, UDP, error_code overloads)", "[spec]") {
  using namespace std::chrono_literals;
  goro::runtime rt{goro::options{2}};
  rt.run([] {
    goro::net::address a = goro::net::address::parse("127.0.0.1:80");
    CHECK(a.to_string() == "127.0.0.1:80");
    CHECK(a.port() == 80);
    std::vector<goro::net::address> v = goro::net::lookup_host("localhost");
    CHECK(!v.empty());

    goro::net::listener ln = goro::net::listen_tcp("127.0.0.1:0");
    std::string hp = "localhost:" + std::to_string(ln.port());
    goro::net::conn c1 = goro::net::dial_tcp(hp, std::chrono::seconds(5));
    goro::net::conn s1 = ln.accept();
    goro::net::conn c2 = goro::net::dial_tcp(hp, goro::background());
    goro::net::conn s2 = ln.accept();
    CHECK(c1.local_address() == s1.remote_address());
    CHECK(c1.remote_address() == s1.local_address());
    c1.close_write();
    std::byte b[1];
    CHECK(s1.read(std::span<std::byte>(b)) == 0);

    std::error_code ec;
    c2.set_read_deadline(std::chrono::steady_clock::now() + 1ms, ec);
    c2.read(std::span<std::byte>(b), ec);
    CHECK(ec == std::errc::timed_out);

    std::string path = "/tmp/goro-spec-" + std::to_string(::getpid()) + ".sock";
    goro::net::listener uln = goro::net::listen_unix(path);
    goro::net::conn uc = goro::net::dial_unix(path);
    uln.close();

    goro::net::packet_conn empty_pc;
    (void)empty_pc;
    goro::net::packet_conn srv = goro::net::listen_udp("127.0.0.1:0");
    goro::net::packet_conn cli = goro::net::dial_udp("127.0.0.1:" + std::to_string(srv.port()));
    const std::byte out[3]{};
    cli.write(std::span<const std::byte>(out));
    std::byte in[8];
    srv.set_deadline(std::chrono::steady_clock::now() + 10s);
    srv.set_read_deadline(std::chrono::steady_clock::now() + 10s);
    srv.set_write_deadline(std::chrono::steady_clock::now() + 10s);
    std::pair<std::size_t, goro::net::address> got = srv.read_from(std::span<std::byte>(in));
    CHECK(got.first == 3);
    CHECK(got.second == cli.local_address());
    srv.write_to(std::span<const std::byte>(out), got.second);
    CHECK(cli.read(std::span<std::byte>(in)) == 3);

    auto [ctx, cancel] = goro::with_cancel(goro::background());
    cancel();
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    CHECK_FALSE(goro::net::wait_readable(fds[0], ctx));
    CHECK_FALSE(goro::net::wait_writable(fds[1], ctx));  // a done context: false, ready or not
    ::close(fds[0]);
    ::close(fds[1]);
    for (auto* h : {&c1, &s1, &c2, &s2, &uc}) h->close();
    srv.close();
    cli.close();
    ln.close();
  });
}
