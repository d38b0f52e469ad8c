// The execution tracer's recording side (goro::trace, trace.hpp, is the
// public half): scheduler events go into per-thread buffers, which are
// written to the trace file as Chrome trace events (JSON) when full and at
// trace::stop(). Go's runtime/trace plays the same role (traceEvent,
// traceFlush); the format here is the one chrome://tracing and Perfetto
// read.
//
// Cost while no trace runs: one relaxed load and a not-taken branch at each
// event site (tracing::enabled()). While one runs: a clock read and an
// uncontended spinlock per event, and a write to the file every
// buffer_events events per thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "config.hpp"
#include "spinlock.hpp"

namespace goro::detail::tracing {

enum class kind : std::uint8_t {
  run,      // a goroutine ran on a P and an M from ts for dur; `end`: how it stopped
  steal,    // this P took goroutines from P `arg`'s queue
  preempt,  // goroutine g was preempted (arg 1: by signal)
  block,    // goroutine g blocked (parked)
  wake,     // goroutine g was made runnable (by this P's goroutine, or by a thread outside the runtime: p < 0)
  syscall,  // goroutine g was in goro::blocking on an M from ts for dur
};

struct event {
  std::int64_t ts = 0;   // now()
  std::int64_t dur = 0;  // run, syscall
  std::uint64_t g = 0;   // goroutine id
  std::uint32_t rt = 0;  // runtime number (one trace covers every runtime in the process)
  std::int32_t p = -1;   // P id, -1: none
  std::int32_t m = -1;   // M id, -1: not an M of the runtime
  kind k = kind::run;
  std::uint32_t arg = 0;
  const char* end = "";  // run: how the slice ended (a string literal)
};

inline std::atomic<bool> on{false};
// Event time stamps: steady_clock nanoseconds (the timers' nanotime).
inline std::int64_t now() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
inline bool enabled() noexcept { return on.load(std::memory_order_relaxed); }

// Runtime numbers, for the trace's process tracks.
inline std::atomic<std::uint32_t> next_runtime_number{0};

inline constexpr std::size_t buffer_events = 4096;

struct buffer {
  spinlock lock;
  std::vector<event> events;
  std::uint64_t session = 0;  // events from an earlier trace are dropped
};

// The trace being written, and every thread's buffer (a thread that exits
// leaves its buffer here: it is flushed at stop and then reused).
struct state {
  std::mutex mu;
  std::FILE* out = nullptr;
  bool first = true;       // no event written yet (commas)
  std::int64_t epoch = 0;  // now() at start: ts 0
  // The current trace (0: none yet), bumped by each start. Written under
  // mu; read without it by record().
  std::atomic<std::uint64_t> session{0};
  std::vector<std::shared_ptr<buffer>> buffers;
  std::set<std::pair<std::uint32_t, std::int32_t>> p_tracks, m_tracks;  // (runtime, id) seen

  // Appends events to the file (mu held). A write error is remembered by
  // the stream and reported at stop.
  void write_locked(const std::vector<event>& evs) {
    if (!out) return;
    for (const event& e : evs) write_event_locked(e);
  }

  void write_event_locked(const event& e) {
    const double ts = static_cast<double>(e.ts - epoch) / 1000.0;  // microseconds
    const double dur = static_cast<double>(e.dur) / 1000.0;
    const unsigned ps = 2 * e.rt + 1, ms = 2 * e.rt + 2;  // process ids: Ps and Ms of runtime rt
    const std::int32_t ptid = e.p, mtid = e.m;
    auto sep = [&] {
      std::fputs(first ? "\n" : ",\n", out);
      first = false;
    };
    if (e.p >= 0) p_tracks.emplace(e.rt, e.p);
    if (e.m >= 0) m_tracks.emplace(e.rt, e.m);
    const auto g = static_cast<unsigned long long>(e.g);
    switch (e.k) {
      case kind::run: {
        const char* why = e.end;
        if (ptid >= 0) {
          sep();
          std::fprintf(
              out,
              "{\"name\":\"G%llu\",\"cat\":\"run\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%u,\"tid\":%d,"
              "\"args\":{\"g\":%llu,\"m\":%d,\"end\":\"%s\"}}",
              g, ts, dur, ps, ptid, g, mtid, why);
        }
        if (mtid >= 0) {
          sep();
          std::fprintf(
              out,
              "{\"name\":\"G%llu\",\"cat\":\"run\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%u,\"tid\":%d,"
              "\"args\":{\"g\":%llu,\"p\":%d,\"end\":\"%s\"}}",
              g, ts, dur, ms, mtid, g, ptid, why);
        }
        break;
      }
      case kind::syscall:
        sep();
        std::fprintf(
            out,
            "{\"name\":\"blocking G%llu\",\"cat\":\"syscall\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%u,"
            "\"tid\":%d,\"args\":{\"g\":%llu}}",
            g, ts, dur, ms, mtid, g);
        break;
      case kind::steal:
        sep();
        std::fprintf(out,
                     "{\"name\":\"steal\",\"cat\":\"steal\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":%u,\"tid\":%d,"
                     "\"args\":{\"from\":%u,\"g\":%llu,\"m\":%d}}",
                     ts, ps, ptid, e.arg, g, mtid);
        break;
      case kind::preempt:
      case kind::block:
      case kind::wake: {
        const char* name = e.k == kind::preempt ? "preempt" : e.k == kind::block ? "block" : "wake";
        sep();
        // A wake from a thread outside the runtime goes on the Ms process,
        // track -1 ("other threads").
        std::fprintf(out,
                     "{\"name\":\"%s G%llu\",\"cat\":\"%s\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":%u,\"tid\":%d,"
                     "\"args\":{\"g\":%llu,\"m\":%d%s}}",
                     name, g, name, ts, ptid >= 0 ? ps : ms, ptid >= 0 ? ptid : -1, g, mtid,
                     e.k == kind::preempt && e.arg ? ",\"signal\":true" : "");
        if (ptid < 0) m_tracks.emplace(e.rt, -1);
        break;
      }
    }
  }

  // Track names, then the closing brackets (mu held).
  void write_tail_locked() {
    auto meta = [&](const char* what, unsigned pid, const std::int32_t* tid, const char* name) {
      std::fputs(first ? "\n" : ",\n", out);
      first = false;
      if (tid)
        std::fprintf(out, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%u,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", what, pid,
                     *tid, name);
      else
        std::fprintf(out, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%u,\"args\":{\"name\":\"%s\"}}", what, pid, name);
    };
    char name[64];
    std::set<std::uint32_t> rts;
    for (auto& t : p_tracks) rts.insert(t.first);
    for (auto& t : m_tracks) rts.insert(t.first);
    for (std::uint32_t rt : rts) {
      std::snprintf(name, sizeof name, "goro runtime %u: Ps", rt);
      meta("process_name", 2 * rt + 1, nullptr, name);
      std::snprintf(name, sizeof name, "goro runtime %u: Ms (threads)", rt);
      meta("process_name", 2 * rt + 2, nullptr, name);
    }
    for (auto& [rt, id] : p_tracks) {
      std::snprintf(name, sizeof name, "P%d", id);
      meta("thread_name", 2 * rt + 1, &id, name);
    }
    for (auto& [rt, id] : m_tracks) {
      if (id < 0)
        std::snprintf(name, sizeof name, "other threads");
      else
        std::snprintf(name, sizeof name, "M%d", id);
      meta("thread_name", 2 * rt + 2, &id, name);
    }
    std::fputs("\n]}\n", out);
  }
};

inline state& global_state() {
  static state s;
  return s;
}

// This thread's buffer, registered once.
inline buffer& this_thread_buffer() {
  thread_local std::shared_ptr<buffer> mine;
  if (!mine) {
    auto b = std::make_shared<buffer>();
    state& s = global_state();
    std::lock_guard<std::mutex> lk(s.mu);
    s.buffers.push_back(b);
    mine = std::move(b);
  }
  return *mine;
}

// Records one event (any thread). Called only when enabled() was true.
// A full buffer is written to the file right away only off goroutine
// stacks (g0 or a plain thread: formatting needs stack); a goroutine's
// events wait for its M's next event on g0 (every run slice is recorded
// there).
GORO_NOINLINE inline void record(const event& e, bool may_write) noexcept {
  GORO_TRY {
    state& s = global_state();
    buffer& b = this_thread_buffer();
    std::vector<event> full;
    std::uint64_t session;
    {
      std::lock_guard<spinlock> lk(b.lock);
      session = s.session.load(std::memory_order_acquire);
      if (b.session != session) {  // left over from an earlier trace
        b.events.clear();
        b.session = session;
      }
      if (b.events.capacity() == 0) b.events.reserve(buffer_events);
      b.events.push_back(e);
      if (may_write && b.events.size() >= buffer_events) full.swap(b.events);
    }
    if (!full.empty()) {
      std::lock_guard<std::mutex> lk(s.mu);
      if (s.session.load(std::memory_order_relaxed) == session) s.write_locked(full);  // no-op once stopped
    }
  }
  GORO_CATCH_ALL {
    // Out of memory while tracing: the event is lost, the program goes on.
  }
}

}  // namespace goro::detail::tracing
