// The goroutine dump's runtime side (dump.hpp has the public calls and
// the protocol): the registry of runtimes, collecting and formatting the
// goroutines, GORO_DEBUG, and the SIGQUIT handler.
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "../dump.hpp"
#include "../os/os.hpp"
#include "config.hpp"
#include "g.hpp"
#include "m.hpp"
#include "symbolize.hpp"
#include "unwind.hpp"
#include "wait_reason.hpp"

namespace goro {
namespace detail {

// Every runtime of the process, for the dump. Leaked on purpose: a dump may
// run while static objects are being destroyed (SIGQUIT during exit).
struct runtime_registry {
  std::mutex lock;  // also serializes dumps (one pins at a time)
  std::vector<sched_base*> runtimes;
};
inline runtime_registry& registry() {
  static runtime_registry* r = new runtime_registry;
  return *r;
}
inline void register_runtime(sched_base* s) {
  runtime_registry& r = registry();
  std::lock_guard<std::mutex> lk(r.lock);
  r.runtimes.push_back(s);
}
inline void unregister_runtime(sched_base* s) noexcept {
  runtime_registry& r = registry();
  std::lock_guard<std::mutex> lk(r.lock);
  r.runtimes.erase(std::remove(r.runtimes.begin(), r.runtimes.end(), s), r.runtimes.end());
}

// The dump's frames for the code at a pc, innermost first: with -g one
// per call inlined there ("function (inlined)"), then the function the
// code is in ("function +0xOFF", or "?? 0xPC (object)"); each with its
// "file:line" where the object has line information. A return address is
// looked up at pc - 1 (the call, not the next line's code).
struct frame_desc {
  std::string name;  // the function, as demangled
  std::string text;  // the dump's line
  std::string file;
  bool scoped = false;  // full -g: the calls inlined here are frames of their own
};
inline std::vector<frame_desc> describe_frames(std::uintptr_t pc, bool return_address) {
  symbol_info s = symbol_table::instance().lookup(return_address ? pc - 1 : pc);
  std::vector<frame_desc> out;
  auto where = [](const std::string& file, unsigned line) {
    return line == 0 ? std::string() : file + ':' + std::to_string(line);
  };
  for (source_frame& f : s.inlined) out.push_back({f.name, f.name + " (inlined)", where(f.file, f.line), true});
  frame_desc d;
  d.file = where(s.file, s.line);
  d.scoped = s.scoped;
  char off[32];
  if (s.name.empty()) {
    std::snprintf(off, sizeof off, "%#llx", static_cast<unsigned long long>(pc));
    d.text = std::string("?? ") + off + (s.object.empty() ? "" : " (" + s.object + ")");
  } else {
    std::snprintf(off, sizeof off, " +%#llx", static_cast<unsigned long long>(s.offset + (return_address ? 1 : 0)));
    d.name = s.name;
    d.text = s.name + off;
  }
  out.push_back(std::move(d));
  return out;
}
// The function's own frame (without the inlined ones).
inline std::string frame_text(std::uintptr_t pc, bool return_address) {
  return describe_frames(pc, return_address).back().text;
}

// Whether at(i) holds for some position i of a frame's text that is at
// the top level of its <> and () (the function's qualified name, and a
// template function's return type before it; not the template arguments
// or the parameters).
template <class At>
bool at_top_level(const std::string& text, At at) {
  int depth = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch == '<' || ch == '(')
      ++depth;
    else if ((ch == '>' || ch == ')') && depth > 0)
      --depth;
    else if (depth == 0 && at(i))
      return true;
  }
  return false;
}

// Whether the function a frame names is qualified with `ns` ("goro::",
// "goro::detail::"): at the start of the demangled text, or after a
// template function's return type (a space at the top level).
inline bool frame_in(const std::string& text, const char* ns) {
  const std::size_t n = std::strlen(ns);
  return at_top_level(text,
                      [&](std::size_t i) { return (i == 0 || text[i - 1] == ' ') && text.compare(i, n, ns) == 0; });
}

// goro's closure: set_closure's function, which calls the callable given
// to go() (and usually has it inlined).
inline bool closure_frame(const std::string& text) { return frame_in(text, "goro::detail::set_closure<"); }

// Whether the function a frame names is a lambda's (a "{lambda" scope at
// the top level).
inline bool lambda_frame(const std::string& text) {
  return at_top_level(text, [&](std::size_t i) { return text.compare(i, 9, "::{lambda") == 0; });
}

// Whether a frame is goro's runtime, which the dump leaves out as Go's
// runtime.Stack leaves out runtime.* frames: functions in goro::detail
// (park, the channel and semaphore internals, run_goroutine,
// goroutine_main, the closure) and the lambdas of goro's public templates
// (run()'s wrapper of main). Also the standard library's call plumbing
// (std::invoke, std::apply and their helpers) between the closure and the
// callable. Public calls (goro::chan<int>::recv(), wait_group::wait())
// stay, as Go's sync.(*WaitGroup).Wait does. The closure is shown only
// where it is all that names the goroutine's function (collect_goroutines).
inline bool runtime_frame(const std::string& text) {
  return frame_in(text, "goro::detail::") || (frame_in(text, "goro::") && lambda_frame(text)) ||
         frame_in(text, "std::__invoke") || frame_in(text, "std::invoke") || frame_in(text, "std::__apply_impl<") ||
         frame_in(text, "std::apply<");
}

struct g_snapshot {
  g* gp = nullptr;
  sched_base* rt = nullptr;
  std::uint64_t id = 0;
  g_status status = g_status::idle;
  wait_reason why = wait_reason::none;
  std::int64_t since = 0;
  int m_id = -1;
  const void* created_pc = nullptr;
  bool is_self = false;
  bool pinned = false;
  bool was_waiting = false;
  bool lane = false;  // run by a thread_lane
  bool locked = false;  // inside lock_os_thread (Go's ", locked to thread")
  backtrace_buf bt;
};

// The goroutines of `only` (nullptr: of every runtime), sorted by id.
inline std::vector<goroutine_info> collect_goroutines(sched_base* only = nullptr) {
  std::vector<g_snapshot> snaps;
  g* self = current_g();
  runtime_registry& reg = registry();
  {
    std::lock_guard<std::mutex> lk(reg.lock);
    for (sched_base* rt : reg.runtimes) {
      if (only && rt != only) continue;
      struct ctx_t {
        std::vector<g_snapshot>* out;
        sched_base* rt;
      } ctx{&snaps, rt};
      rt->for_each_g(
          [](g* gp, void* c) {
            auto* x = static_cast<ctx_t*>(c);
            g_snapshot s;
            s.gp = gp;
            s.rt = x->rt;
            x->out->push_back(s);
          },
          &ctx);
    }
    // The calling goroutine must not be preempted asynchronously while it
    // holds pins: its M could then pick a pinned goroutine and wait forever.
    const std::uint32_t scope = self ? self->async_scope.exchange(0, std::memory_order_relaxed) : 0;
    // Pin every live goroutine but the caller: a running one may park
    // before the barrier, and then its stack is readable too.
    for (auto& s : snaps) {
      const g_status st = s.gp->status.load(std::memory_order_acquire);
      if (s.gp == self || st == g_status::idle || st == g_status::dead) continue;
      s.gp->dump_pin.store(true, std::memory_order_relaxed);
      s.pinned = true;
      s.was_waiting = st == g_status::waiting;
      s.id = dump_field(s.gp->id);
    }
    // The asymmetric half of the pin protocol; without it (the kernel
    // offers none) the dump reads no other goroutine's stack.
    const bool barrier = os::process_wide_barrier();
    for (auto& s : snaps) {
      g* gp = s.gp;
      s.status = gp->status.load(std::memory_order_acquire);
      s.is_self = gp == self;
      if (s.status == g_status::idle || s.status == g_status::dead) {
        if (s.pinned) gp->dump_pin.store(false, std::memory_order_release);
        continue;
      }
      // Readable stack: pinned, and waiting after the barrier (it cannot
      // resume now); or waiting when pinned and readied since but not
      // resumed (runnable, the same goroutine: not a record that exited
      // and was reused, whose saved context would be stale).
      const std::uint64_t id = dump_field(gp->id);
      const bool parked =
          s.pinned && barrier &&
          (s.status == g_status::waiting || (s.status == g_status::runnable && s.was_waiting && id == s.id));
      s.id = id;
      s.why = gp->waiting_on.load(std::memory_order_relaxed);
      s.since = gp->wait_since.load(std::memory_order_relaxed);
      if (s.since == 0) {  // not stamped yet: from now on (a lower bound)
        std::int64_t expect = 0;
        s.since = os::coarse_nanotime();
        if (!gp->wait_since.compare_exchange_strong(expect, s.since, std::memory_order_relaxed)) s.since = expect;
      }
      s.created_pc = dump_field(gp->created_pc);
      if (s.status == g_status::running) s.m_id = s.rt->running_m(gp);
      s.locked = gp->lock_count.load(std::memory_order_relaxed) != 0;
      s.lane = dump_field(gp->sched) != s.rt;  // thread_lane: its sched is the lane's adapter
      // Stacks: not under ThreadSanitizer (it would see the unwinder's reads
      // of another goroutine's stack as races with that goroutine).
      if (s.is_self) {
        if (!GORO_TSAN) backtrace_self(s.bt);
      } else if (parked && gp->sp && !GORO_TSAN) {
        backtrace_from(gp->sp, s.bt);
      }
      if (s.pinned) gp->dump_pin.store(false, std::memory_order_release);
    }
    if (self) self->async_scope.store(scope, std::memory_order_relaxed);
  }
  // Naming (file reads, demangling) after every pin is released, in id
  // order (qsort of pointers: std::sort over goroutine_info was a fifth of
  // the code a header-only translation unit compiles).
  std::vector<const g_snapshot*> order;
  order.reserve(snaps.size());
  for (auto& s : snaps)
    if (s.status != g_status::idle && s.status != g_status::dead) order.push_back(&s);
  std::qsort(order.data(), order.size(), sizeof(order[0]), [](const void* x, const void* y) {
    const std::uint64_t a = (*static_cast<const g_snapshot* const*>(x))->id;
    const std::uint64_t b = (*static_cast<const g_snapshot* const*>(y))->id;
    return a < b ? -1 : a > b ? 1 : 0;
  });
  const std::int64_t now = os::coarse_nanotime();
  std::vector<goroutine_info> out;
  out.reserve(order.size());
  for (const g_snapshot* sp : order) {
    const g_snapshot& s = *sp;
    goroutine_info gi;
    gi.id = s.id;
    switch (s.status) {
      case g_status::waiting:
        gi.state = "waiting";
        gi.wait_reason = wait_reason_name(s.why == wait_reason::none ? wait_reason::other : s.why);
        break;
      case g_status::runnable:
        gi.state = "runnable";
        gi.wait_reason = "runnable";
        break;
      default:
        gi.state = "running";
        gi.wait_reason = s.why == wait_reason::blocking_call && !s.is_self ? "blocking call" : "running";
        break;
    }
    if ((s.status == g_status::waiting || gi.wait_reason == "blocking call") && s.since != 0 && now > s.since)
      gi.waiting_for = std::chrono::nanoseconds(now - s.since);
    std::vector<frame_desc> names;
    for (std::size_t i = 0; i < s.bt.n; ++i)
      for (frame_desc& d : describe_frames(s.bt.pc[i], true)) names.push_back(std::move(d));
    // Self: drop the dump's own frames (goro::..., and the standard
    // library's inlined into them with -g) above the caller's.
    std::size_t first = 0;
    if (s.is_self)
      while (first < names.size() && (frame_in(names[first].text, "goro::") || frame_in(names[first].text, "std::")))
        ++first;
    for (std::size_t i = first; i < names.size(); ++i) {
      if (names[i].text.rfind("goro_v0_1_start", 0) == 0) break;  // the goroutine's entry: the bottom
      // The closure stays where it is all that names the goroutine's
      // function: without full -g (the callable inlined into it has no
      // frame of its own; the closure's name carries its type), or with
      // no frame above it.
      const bool closure = closure_frame(names[i].text) && (!names[i].scoped || gi.frames.empty());
      if (runtime_frame(names[i].text) && !closure) continue;
      gi.frames.push_back(std::move(names[i].text));
      gi.files.push_back(std::move(names[i].file));
    }
    if (s.created_pc) {
      // Not a return address: the pc inside go(), which is always inlined
      // into its caller. The caller is the first function that is neither
      // goro's (go() itself, or group::go calling it) nor the standard
      // library's inlined into it (rt.go's pc can sit in unique_ptr::get
      // of its scheduler); without -g, the function the code is in.
      std::vector<frame_desc> at = describe_frames(reinterpret_cast<std::uintptr_t>(s.created_pc), false);
      std::size_t k = 0;
      while (k + 1 < at.size() && (frame_in(at[k].name, "goro::") || frame_in(at[k].name, "std::"))) ++k;
      gi.created_by = at[k].name.empty() ? std::move(at[k].text) : std::move(at[k].name);
      gi.created_by_file = std::move(at[k].file);
    }
    if (s.status == g_status::running && s.m_id >= 0 && !s.is_self) gi.wait_reason += ", M" + std::to_string(s.m_id);
    if (s.lane) gi.wait_reason += ", lane";
    gi.locked_to_thread = s.locked;
    out.push_back(std::move(gi));
    (void)s.m_id;
  }
  return out;
}

inline std::string format_goroutines(const std::vector<goroutine_info>& gs) {
  std::string out;
  for (const auto& gi : gs) {
    if (!out.empty()) out += '\n';
    out += "goroutine " + std::to_string(gi.id) + " [" + gi.wait_reason;
    const auto minutes = std::chrono::duration_cast<std::chrono::minutes>(gi.waiting_for).count();
    if (minutes >= 1) out += ", " + std::to_string(minutes) + " minutes";  // Go's wording, "1 minutes" included
    if (gi.locked_to_thread) out += ", locked to thread";                  // after the minutes, as in Go
    out += "]:\n";
    // Go's layout: a frame's function, then its file:line indented by a tab
    // (where known; the offset stays on the function's line).
    for (std::size_t i = 0; i < gi.frames.size(); ++i) {
      out += gi.frames[i] + '\n';
      if (i < gi.files.size() && !gi.files[i].empty()) out += '\t' + gi.files[i] + '\n';
    }
    if (!gi.created_by.empty()) {
      out += "created by " + gi.created_by + '\n';
      if (!gi.created_by_file.empty()) out += '\t' + gi.created_by_file + '\n';
    }
  }
  return out;
}

// A GORO_DEBUG value goro understands: decimal digits (Go's atoi), which
// [v, end) must be entirely. strtol read "sigquit=yes" as 0 (the dump
// silently off) and "schedtrace=10ms" as 10; such values are reported
// (check_goro_debug) and ignored, as Go's GODEBUG ignores them.
inline bool debug_number(const char* v, const char* end, long& out) noexcept {
  if (v == end || end - v > 9) return false;
  long n = 0;
  for (; v != end; ++v) {
    if (*v < '0' || *v > '9') return false;
    n = n * 10 + (*v - '0');
  }
  out = n;
  return true;
}

// GORO_DEBUG=key=value[,key=value...]: the last valid value of `key`
// (Go's parsedebugvars: a later setting overrides an earlier one), else
// dflt. GORO_DEBUG=sigquit=0 turns the SIGQUIT dump off.
inline long debug_setting(const char* key, long dflt) noexcept {
  const char* env = std::getenv("GORO_DEBUG");
  if (!env) return dflt;
  const std::size_t klen = std::strlen(key);
  long found = dflt;
  for (const char* p = env; *p;) {
    const char* end = std::strchr(p, ',');
    if (!end) end = p + std::strlen(p);
    long v = 0;
    if (static_cast<std::size_t>(end - p) > klen && std::strncmp(p, key, klen) == 0 && p[klen] == '=' &&
        debug_number(p + klen + 1, end, v))
      found = v;
    p = *end ? end + 1 : end;
  }
  return found;
}

// The GORO_DEBUG keys goro understands; others are reported on stderr (once).
inline constexpr const char* goro_debug_keys[] = {"schedtrace", "sigquit"};

inline void check_goro_debug() noexcept {
  const char* env = std::getenv("GORO_DEBUG");
  if (!env) return;
  for (const char* p = env; *p;) {
    const char* end = std::strchr(p, ',');
    if (!end) end = p + std::strlen(p);
    const char* eq = static_cast<const char*>(std::memchr(p, '=', static_cast<std::size_t>(end - p)));
    const std::size_t klen = static_cast<std::size_t>((eq ? eq : end) - p);
    bool known = false;
    for (const char* k : goro_debug_keys) known = known || (std::strlen(k) == klen && std::strncmp(p, k, klen) == 0);
    long v = 0;
    // A known key without '=' has no value: "invalid value", not "unknown".
    if (end != p && !known)
      std::fprintf(stderr, "goro: GORO_DEBUG: unknown setting \"%.*s\" (known: schedtrace=MS, sigquit=0|1)\n",
                   static_cast<int>(end - p), p);
    else if (end != p && (!eq || !debug_number(eq + 1, end, v)))
      std::fprintf(stderr, "goro: GORO_DEBUG: invalid value in \"%.*s\", ignored (known: schedtrace=MS, sigquit=0|1)\n",
                   static_cast<int>(end - p), p);
    p = *end ? end + 1 : end;
  }
}

// The dump thread stamps the start of every wait not stamped yet (parking
// stores 0 and reads no clock): about once a second, so a duration is
// known to a second, the way Go's GC sets waitsince. O(G records) a round;
// a record's stamp is set once per wait.
inline void stamp_waits() {
  const std::int64_t now = os::coarse_nanotime();
  runtime_registry& reg = registry();
  std::lock_guard<std::mutex> lk(reg.lock);
  for (sched_base* rt : reg.runtimes)
    rt->for_each_g(
        [](g* gp, void* arg) {
          const g_status st = gp->status.load(std::memory_order_relaxed);
          if (st != g_status::waiting &&
              !(st == g_status::running &&
                gp->waiting_on.load(std::memory_order_relaxed) == wait_reason::blocking_call))
            return;
          std::int64_t expect = 0;
          gp->wait_since.compare_exchange_strong(expect, *static_cast<const std::int64_t*>(arg),
                                                 std::memory_order_relaxed);
        },
        const_cast<std::int64_t*>(&now));
}

// SIGQUIT: the handler only writes a byte to a pipe (async-signal-safe);
// the dump thread, polling the pipe, takes the dump, prints it and exits 2.
inline int& sigquit_pipe_write() {
  static int fd = -1;
  return fd;
}

// The process that installed the handler (and owns the dump thread).
inline long& sigquit_pid() {
  static long pid = 0;
  return pid;
}

inline void sigquit_handler([[maybe_unused]] int sig) {
  const int saved = errno;
#if defined(SIGQUIT)
  // A forked child inherits the handler and the pipe, not the dump thread:
  // its byte would make the parent dump and exit. It gets SIGQUIT's default
  // action instead (delivered once the handler returns: getpid, signal and
  // raise are async-signal-safe).
  if (os::process_id() != sigquit_pid()) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    errno = saved;
    return;
  }
#endif
  const char c = 'q';
  if (os::write_fd(sigquit_pipe_write(), &c, 1) < 0) {
  }
  errno = saved;
}

inline void* dump_thread(void* arg) {
  const int fd = static_cast<int>(reinterpret_cast<std::intptr_t>(arg));
  os::set_thread_name("goro-dump");  // process-wide: SIGQUIT's dump, wait-time stamps
  for (;;) {
    if (os::wait_readable(fd, 1000)) break;  // only the SIGQUIT handler writes the pipe
    stamp_waits();
  }
  std::string text = "SIGQUIT: quit\n\n" + format_goroutines(collect_goroutines());
  for (std::size_t done = 0; done < text.size();) {
    const long n = os::write_fd(os::stderr_fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  std::_Exit(2);
}

// Process-wide, once, at the first runtime: the GORO_DEBUG check, the
// dump thread and the SIGQUIT dump (kept off if the program has its own
// SIGQUIT handler, or GORO_DEBUG=sigquit=0).
inline void install_dump_handlers() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    check_goro_debug();
#if defined(SIGQUIT)
    bool sigquit = debug_setting("sigquit", 1) != 0;
    // The program's own handler stays. An inherited SIG_IGN (a background
    // job of a shell) does not: as in Go, SIGQUIT then still dumps.
    if (sigquit && os::signal_has_handler(SIGQUIT)) sigquit = false;
#else
    // No SIGQUIT (Windows): the dump thread only stamps wait times.
    const bool sigquit = false;
#endif
    int fds[2];
    if (os::open_pipe(fds, false) != 0) return;
    // The thread blocks every signal: SIGQUIT goes to one that can take it.
    const bool started =
        os::start_daemon_thread(&dump_thread, reinterpret_cast<void*>(static_cast<std::intptr_t>(fds[0])), 1 << 20) == 0;
    if (!started) {
      os::close_fd(fds[0]);
      os::close_fd(fds[1]);
      return;
    }
    if (!sigquit) return;
#if defined(SIGQUIT)
    sigquit_pipe_write() = fds[1];
    sigquit_pid() = os::process_id();
    // Under ThreadSanitizer without SA_RESTART: an M asleep in an untimed
    // futex wait then returns EINTR, and os::futex_wait lets the handler run
    // (os/linux/futex.hpp); restarted, the handler would wait for the next
    // wake-up.
    os::set_signal_handler(SIGQUIT, &sigquit_handler, !GORO_TSAN, nullptr);
#endif
  });
}

}  // namespace detail

GORO_DECL std::vector<goroutine_info> goroutines() { return detail::collect_goroutines(); }

GORO_DECL std::string goroutine_dump() { return detail::format_goroutines(detail::collect_goroutines()); }

}  // namespace goro
