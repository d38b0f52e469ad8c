// goro::net's dial and listen targets (internal): host:port split, a
// service name looked up as a port, a host name resolved, and the dial's
// deadline and context bounding those lookups as they bound the connect
// (Go's Dialer: "the timeout includes name resolution"; a cancelled
// context ends a lookup at once). Used by net.hpp (TCP) and net_udp.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "../context.hpp"
#include "../net_address.hpp"
#include "../os/os.hpp"
#include "config.hpp"
#include "net_socket.hpp"

namespace goro::net::detail {

// Splits host_port for a dial or listen of socket `type`: a port that is
// a service name ("http") is looked up (lookup_port), as in Go.
GORO_DECL bool split_target(std::string_view host_port, int type, std::string_view& host, std::uint16_t& port,
                            std::error_code& ec);

// The addresses a dial to host_port tries, in order: a numeric host as it
// is, an empty one as the local system (127.0.0.1, as Go), a name through
// lookup_host. A lookup (of the host or of a service name) ends at the
// deadline d (nanotime; 0: none) or when ctx is done, with the deadline's
// or the context's code: it runs on a thread of its own ("goro-lookup")
// whose result is dropped if it comes later (Go's cgo resolver: the same).
GORO_DECL std::vector<address> dial_targets(std::string_view host_port, int type, std::int64_t d,
                                            const goro::context* ctx, std::error_code& ec);

// Dials each target in turn; the first success, else the first failure
// (a passed deadline or a done context ends the attempts; both bound the
// lookups too).
GORO_DECL std::shared_ptr<socket_state> dial_any(std::string_view host_port, int type, std::int64_t d,
                                                 const goro::context* ctx, std::error_code& ec);

// The address a listener binds for host_port: an empty host is every
// address (0.0.0.0), "localhost" 127.0.0.1, a name its first IPv4
// address (else its first).
GORO_DECL address listen_target(std::string_view host_port, int type, std::error_code& ec);

}  // namespace goro::net::detail

#if GORO_COMPILE_RUNTIME
#include <optional>
#include <utility>
#include <variant>

#include "../chan.hpp"
#include "../runtime.hpp"
#include "../select.hpp"
#include "../time.hpp"
#include "extm.hpp"

namespace goro::net::detail {

GORO_DECL bool split_target(std::string_view host_port, int type, std::string_view& host, std::uint16_t& port,
                            std::error_code& ec) {
  std::string_view service;
  if (!split_host_port(host_port, host, port, ec, &service)) return false;
  if (!service.empty()) port = lookup_port(service, type, ec);
  return !ec;
}

// dial_targets without a bound.
inline std::vector<address> resolve_targets(std::string_view host_port, int type, std::error_code& ec) {
  std::string_view host;
  std::uint16_t port = 0;
  if (!split_target(host_port, type, host, port, ec)) return {};
  if (host.empty()) host = "127.0.0.1";
  std::vector<address> v = lookup_host(host, ec);
  for (auto& a : v) a = a.with_port(port);
  return v;
}

// Whether resolving host_port asks the system (a host name or a service
// name). A malformed host_port: false (resolve_targets reports it).
inline bool needs_lookup(std::string_view host_port) {
  std::string_view host, service;
  std::uint16_t port = 0;
  std::error_code ec;
  if (!split_host_port(host_port, host, port, ec, &service)) return false;
  return !service.empty() || (!host.empty() && !address::from_ip(host, 0));
}

// A bounded lookup's thread and what it sends back.
struct lookup_result {
  std::vector<address> targets;
  std::error_code ec;
};
struct lookup_job {
  std::string host_port;
  int type;
  goro::chan<lookup_result> done;  // capacity 1, one send: never blocks, waited for or not
};

// The lookup thread. The dialer counted it as an external M (extm_hold)
// before starting it, so that a dial with a context only (no timer) is no
// deadlock while the lookup runs; it is uncounted after its send, its last
// wake. Marked internal: the send itself registers nothing.
inline void* lookup_main(void* arg) {
  std::unique_ptr<lookup_job> job(static_cast<lookup_job*>(arg));
  goro::detail::extm_mark_internal();
  goro::detail::os::set_thread_name("goro-lookup");
  lookup_result r;
  r.targets = resolve_targets(job->host_port, job->type, r.ec);
  job->done.send(std::move(r));
  goro::detail::extm_hold(false);
  return nullptr;
}

GORO_DECL std::vector<address> dial_targets(std::string_view host_port, int type, std::int64_t d,
                                            const goro::context* ctx, std::error_code& ec) {
  ec.clear();
  if ((d == 0 && !ctx) || !needs_lookup(host_port)) return resolve_targets(host_port, type, ec);
  if (ctx && ctx->err() != cancel_reason::none) return ec = context_code(*ctx), std::vector<address>{};
  const std::int64_t now = goro::detail::nanotime();
  if (d != 0 && d <= now) return ec = deadline_error(), std::vector<address>{};

  // The lookup runs on a thread of its own, not in a goroutine: one that
  // outlives the dial (a resolver waiting on a dead server for seconds)
  // must not hold an M that the runtime's end would wait to join, nor
  // keep main's return waiting (Go abandons it the same way). Its stack:
  // getaddrinfo and the NSS modules it loads.
  goro::chan<lookup_result> done(1);
  auto job = std::make_unique<lookup_job>(lookup_job{std::string(host_port), type, done});
  goro::detail::extm_hold(true);
  if (goro::detail::os::start_daemon_thread(&lookup_main, job.get(), 1 << 20) != 0) {
    goro::detail::extm_hold(false);
    return resolve_targets(host_port, type, ec);  // no thread to be had: unbounded, as without a deadline
  }
  (void)job.release();  // the thread's now

  std::vector<address> out;
  std::optional<goro::timer> deadline;
  if (d != 0) deadline.emplace(std::chrono::nanoseconds(d - now));
  goro::recv_chan<std::monostate> ctx_done = ctx ? ctx->done() : goro::recv_chan<std::monostate>{};
  goro::recv_chan<goro::timer::time_point> timed_out =
      deadline ? goro::recv_chan<goro::timer::time_point>(deadline->c()) : goro::recv_chan<goro::timer::time_point>{};
  goro::select(goro::on_recv(done,
                             [&](std::optional<lookup_result> r) {
                               if (!r) return;  // never closed
                               out = std::move(r->targets);
                               ec = r->ec;
                             }),
               goro::on_recv(ctx_done, [&](auto) { ec = context_code(*ctx); }),
               goro::on_recv(timed_out, [&](auto) { ec = deadline_error(); }));
  return out;
}

GORO_DECL std::shared_ptr<socket_state> dial_any(std::string_view host_port, int type, std::int64_t d,
                                                 const goro::context* ctx, std::error_code& ec) {
  std::vector<address> targets = dial_targets(host_port, type, d, ctx, ec);
  std::error_code first;
  for (const address& a : targets) {
    ec.clear();
    if (auto s = connect_to(a, type, d, ctx, ec)) return s;
    if (!first) first = ec;
    if (is_deadline(ec) || ec == std::errc::operation_canceled) break;
  }
  if (!targets.empty()) ec = first;
  return nullptr;
}

GORO_DECL address listen_target(std::string_view host_port, int type, std::error_code& ec) {
  std::string_view host;
  std::uint16_t port = 0;
  if (!split_target(host_port, type, host, port, ec)) return {};
  if (host.empty() || host == "localhost") return address::from_ip(host.empty() ? "0.0.0.0" : "127.0.0.1", port);
  std::vector<address> v = lookup_host(host, ec);
  if (ec) return {};
  for (const auto& a : v)
    if (a.is_ipv4()) return a.with_port(port);
  return v.front().with_port(port);
}

}  // namespace goro::net::detail
#endif  // GORO_COMPILE_RUNTIME
