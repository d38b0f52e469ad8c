// The execution tracer's recording side (goro::trace, trace.hpp, is the
// public half): scheduler events go into per-thread buffers, which are
// written to the trace file as Chrome trace events (JSON) when full, every
// flush_period by the trace's flusher thread, and at trace::stop(). Go's
// runtime/trace plays the same role (traceEvent, traceFlush); the format
// here is the one chrome://tracing and Perfetto read: the bare JSON array
// form, which they also load without its closing `]`, so the file of a
// program killed or hung mid-trace is loadable. Each write appends whole
// events only (one write(2) of complete events), and track names are
// written when a track first appears, not at the end.
//
// Cost while no trace runs: one relaxed load and a not-taken branch at each
// event site (tracing::enabled()). While one runs: a clock read and an
// uncontended spinlock per event, and a write to the file every
// buffer_events events per thread or every flush_period.
//
// Memory: a thread a runtime owns (its Ms, sysmon: runtime_thread) takes
// its buffer from that runtime's allocator (goro::allocator<A>) and gives
// it back, after writing its events out, when the thread's work for the
// runtime ends (release_thread_buffer), which is before the runtime can be
// destroyed. Any other thread's buffer (the run() caller's, a lane's, a
// plain thread's) comes from operator new and stays registered, as before.
#pragma once

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../os/os.hpp"
#include "config.hpp"
#include "memory.hpp"
#include "spinlock.hpp"

namespace goro::detail::tracing {

enum class kind : std::uint8_t {
  run,      // a goroutine ran on a P and an M from ts for dur; `end`: how it stopped
  steal,    // this P took goroutines from P `arg`'s queue
  preempt,  // goroutine g was preempted (arg 1: by signal)
  block,    // goroutine g blocked (parked)
  wake,     // goroutine g was made runnable (by this P's goroutine, or by a thread outside the runtime: p < 0)
  syscall,  // goroutine g was in goro::blocking on an M from ts for dur
  create,   // goroutine g was created (by goroutine arg, 0: by a thread outside the runtime)
  p_part,   // part of a run slice on its P's track only (M `arg`): the slice had goro::blocking calls
};

struct event {
  std::int64_t ts = 0;   // now()
  std::int64_t dur = 0;  // run, syscall
  std::uint64_t g = 0;   // goroutine id
  std::uint32_t rt = 0;  // runtime number (one trace covers every runtime in the process)
  std::int32_t p = -1;   // P id, -1: none
  std::int32_t m = -1;   // M id, -1: not an M of the runtime
  kind k = kind::run;
  std::uint64_t arg = 0;  // steal: the victim P; preempt: by signal; create: the parent G; run: 1 if `flow` is a creation
  const char* end = "";  // run: how the slice ended (a string literal)
  // Flow arrows: wake and create start flow `flow` (ph "s"); a run slice
  // with a flow ends it (ph "f", bound to the slice). 0: none.
  std::uint64_t flow = 0;
};

// Flow ids: one per wake-up or creation; odd for a creation.
inline std::atomic<std::uint64_t> next_flow{1};
inline std::uint64_t new_flow(bool create) noexcept {
  return next_flow.fetch_add(1, std::memory_order_relaxed) * 2 + (create ? 1 : 0);
}

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
inline constexpr std::chrono::milliseconds flush_period{100};

using event_vector = std::vector<event, memory_allocator<event>>;

struct buffer {
  explicit buffer(runtime_memory* m) noexcept : events(memory_allocator<event>(m)), memory(m) {}
  spinlock lock;
  event_vector events;           // its storage stays with the buffer (drain and record hand it back)
  std::uint64_t session = 0;     // events from an earlier trace are dropped
  runtime_memory* const memory;  // a runtime's allocator (a thread it owns); nullptr: operator new
  buffer* prev = nullptr;        // state::owned (state::mu)
  buffer* next = nullptr;
};

// The runtime that owns the calling thread (runtime_thread sets it while
// the thread works for the runtime): its allocator takes the thread's
// buffer. nullptr: none, or one on std::allocator.
inline thread_local runtime_memory* thread_runtime_memory = nullptr;

// The trace being written, and every thread's buffer (a thread outside any
// runtime that exits leaves its buffer in `buffers`: it is flushed at stop
// and dropped then; a runtime's thread takes its own out of `owned`).
struct state {
  std::mutex ctl;  // start / stop (held across stop's join of the flusher)
  std::mutex mu;   // the file, `text`, the track sets and `buffers`
  int fd = -1;     // the trace file; -1: no trace
  int write_err = 0;  // the first write error (reported at stop)
  bool first = true;       // no event written yet (commas)
  std::int64_t epoch = 0;  // now() at start: ts 0
  std::string text;        // formatted events not written yet (whole events only)
  // The current trace (0: none yet), bumped by each start. Written under
  // mu; read without it by record().
  std::atomic<std::uint64_t> session{0};
  std::vector<std::shared_ptr<buffer>> buffers;  // operator new's
  // Runtimes' threads' buffers, linked (registering allocates nothing);
  // each is owned by its thread.
  buffer* owned = nullptr;
  std::set<std::pair<std::uint32_t, std::int32_t>> p_tracks, m_tracks;  // (runtime, id) seen
  std::set<std::uint32_t> runtimes;                                     // runtimes seen
  // The flusher: every flush_period, every buffer's events to the file.
  std::thread flusher;
  std::condition_variable flusher_cv;
  bool flusher_stop = false;  // under mu

  // Appends events to the file (mu held). A write error is remembered and
  // reported at stop.
  void write_locked(const event_vector& evs) {
    if (fd < 0) return;
    for (const event& e : evs) write_event_locked(e);
    write_text_locked();
  }

  // One write(2) of whole events (mu held).
  void write_text_locked() {
    for (std::size_t done = 0; done < text.size();) {
      const long n = os::write_fd(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (write_err == 0) write_err = n < 0 ? errno : EIO;
        break;
      }
      done += static_cast<std::size_t>(n);
    }
    text.clear();
  }

  // Every buffer's events of this session to the file (mu held).
  void drain_locked() {
    for (auto& b : buffers) drain_locked(*b);
    for (buffer* b = owned; b; b = b->next) drain_locked(*b);
  }
  // b's events to the file; its storage goes back to it unless it took new
  // storage meanwhile (then freed to b's allocator: b, still registered, is
  // alive, and so is its runtime's allocator, see release_thread_buffer).
  void drain_locked(buffer& b) {
    event_vector evs{memory_allocator<event>(b.memory)};
    {
      std::lock_guard<spinlock> bl(b.lock);
      if (b.session == session.load(std::memory_order_relaxed)) evs.swap(b.events);
    }
    write_locked(evs);
    if (evs.capacity() == 0) return;
    evs.clear();
    std::lock_guard<spinlock> bl(b.lock);
    if (b.events.capacity() == 0) b.events.swap(evs);
  }

  void flusher_loop() {
    os::set_thread_name("goro-trace");  // process-wide
    std::unique_lock<std::mutex> lk(mu);
    while (!flusher_stop) {
      flusher_cv.wait_for(lk, flush_period);
      if (!flusher_stop) drain_locked();
    }
  }

  // printf into `text`.
  template <class... A>
  void emit(const char* fmt, A... a) {
    char buf[512];
    const int n = std::snprintf(buf, sizeof buf, fmt, a...);
    if (n > 0) text.append(buf, static_cast<std::size_t>(n) < sizeof buf ? static_cast<std::size_t>(n) : sizeof buf - 1);
  }
  void sep() {
    text += first ? "\n" : ",\n";
    first = false;
  }

  // Track names, written when a track first shows up (so a trace cut
  // short still has them).
  void meta(const char* what, unsigned pid, const std::int32_t* tid, const char* name) {
    sep();
    if (tid)
      emit("{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%u,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", what, pid, *tid, name);
    else
      emit("{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%u,\"args\":{\"name\":\"%s\"}}", what, pid, name);
  }
  void runtime_seen(std::uint32_t rt) {
    if (!runtimes.insert(rt).second) return;
    char name[64];
    std::snprintf(name, sizeof name, "goro runtime %u: Ps", rt);
    meta("process_name", 2 * rt + 1, nullptr, name);
    std::snprintf(name, sizeof name, "goro runtime %u: Ms (threads)", rt);
    meta("process_name", 2 * rt + 2, nullptr, name);
  }
  void p_track_seen(std::uint32_t rt, std::int32_t id) {
    if (!p_tracks.emplace(rt, id).second) return;
    runtime_seen(rt);
    char name[32];
    std::snprintf(name, sizeof name, "P%d", id);
    meta("thread_name", 2 * rt + 1, &id, name);
  }
  void m_track_seen(std::uint32_t rt, std::int32_t id) {
    if (!m_tracks.emplace(rt, id).second) return;
    runtime_seen(rt);
    char name[32];
    if (id < 0)
      std::snprintf(name, sizeof name, "other threads");
    else
      std::snprintf(name, sizeof name, "M%d", id);
    meta("thread_name", 2 * rt + 2, &id, name);
  }

  void write_event_locked(event e) {
    // A slice (or blocking call) that began before this trace's start, in
    // an earlier trace (stop and start while a goroutine ran on): its part
    // inside this trace, without the arrow whose tail that trace has.
    if (e.ts < epoch) {
      e.dur = e.dur > epoch - e.ts ? e.dur - (epoch - e.ts) : 0;
      e.ts = epoch;
      e.flow = 0;
    }
    const double ts = static_cast<double>(e.ts - epoch) / 1000.0;  // microseconds
    const double dur = static_cast<double>(e.dur) / 1000.0;
    const unsigned ps = 2 * e.rt + 1, ms = 2 * e.rt + 2;  // process ids: Ps and Ms of runtime rt
    const std::int32_t ptid = e.p, mtid = e.m;
    if (e.p >= 0) p_track_seen(e.rt, e.p);
    if (e.m >= 0) m_track_seen(e.rt, e.m);
    const auto g = static_cast<unsigned long long>(e.g);
    const auto flow = static_cast<unsigned long long>(e.flow);
    switch (e.k) {
      case kind::run:
      case kind::p_part: {
        const char* why = e.end;
        if (ptid >= 0) {
          sep();
          emit(
              "{\"name\":\"G%llu\",\"cat\":\"run\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%u,\"tid\":%d,"
              "\"args\":{\"g\":%llu,\"m\":%d,\"end\":\"%s\"}}",
              g, ts, dur, ps, ptid, g, e.k == kind::p_part ? static_cast<std::int32_t>(e.arg) : mtid, why);
        }
        if (mtid >= 0) {
          sep();
          emit("{\"name\":\"G%llu\",\"cat\":\"run\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%u,\"tid\":%d,"
               "\"args\":{\"g\":%llu,\"p\":%d,\"end\":\"%s\"}}",
               g, ts, dur, ms, mtid, g, ptid, why);
        }
        if (flow != 0 && (ptid >= 0 || mtid >= 0)) {  // the arrow's head: this slice
          sep();
          emit("{\"name\":\"%s\",\"cat\":\"flow\",\"ph\":\"f\",\"bp\":\"e\",\"id\":%llu,\"ts\":%.3f,\"pid\":%u,"
               "\"tid\":%d}",
               (flow & 1) ? "go" : "wake", flow, ts, ptid >= 0 ? ps : ms, ptid >= 0 ? ptid : mtid);
        }
        break;
      }
      case kind::syscall:
        sep();
        emit("{\"name\":\"blocking G%llu\",\"cat\":\"syscall\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%u,"
             "\"tid\":%d,\"args\":{\"g\":%llu}}",
             g, ts, dur, ms, mtid, g);
        break;
      case kind::steal:
        sep();
        emit("{\"name\":\"steal\",\"cat\":\"steal\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":%u,\"tid\":%d,"
             "\"args\":{\"from\":%u,\"g\":%llu,\"m\":%d}}",
             ts, ps, ptid, static_cast<unsigned>(e.arg), g, mtid);
        break;
      case kind::preempt:
      case kind::block:
      case kind::wake:
      case kind::create: {
        const char* name = e.k == kind::preempt ? "preempt"
                           : e.k == kind::block ? "block"
                           : e.k == kind::wake  ? "wake"
                                                : "go";
        // An event of a thread outside the runtime goes on the Ms process,
        // track -1 ("other threads").
        if (ptid < 0) m_track_seen(e.rt, -1);
        const unsigned pid = ptid >= 0 ? ps : ms;
        const std::int32_t tid = ptid >= 0 ? ptid : -1;
        sep();
        if (e.k == kind::create)
          emit("{\"name\":\"go G%llu\",\"cat\":\"go\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":%u,\"tid\":%d,"
               "\"args\":{\"g\":%llu,\"parent\":%llu,\"m\":%d}}",
               g, ts, pid, tid, g, static_cast<unsigned long long>(e.arg), mtid);
        else
          emit("{\"name\":\"%s G%llu\",\"cat\":\"%s\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":%u,\"tid\":%d,"
               "\"args\":{\"g\":%llu,\"m\":%d%s}}",
               name, g, name, ts, pid, tid, g, mtid, e.k == kind::preempt && e.arg ? ",\"signal\":true" : "");
        if (flow != 0) {  // the arrow's tail: the waker's (creator's) slice
          sep();
          emit("{\"name\":\"%s\",\"cat\":\"flow\",\"ph\":\"s\",\"id\":%llu,\"ts\":%.3f,\"pid\":%u,\"tid\":%d}",
               e.k == kind::create ? "go" : "wake", flow, ts, pid, tid);
        }
        break;
      }
    }
  }
};

// Leaked: a trace never stopped keeps its flusher thread running to the
// end of the process (a std::thread destroyed joinable would terminate).
inline state& global_state() {
  static state* s = new state;
  return *s;
}

// The calling thread's hold on its buffer. `make`: made on first use (may
// raise bad_alloc); else null where the thread never made one.
#if !defined(_WIN32)
inline std::shared_ptr<buffer>* this_thread_slot(bool /*make*/) {
  thread_local std::shared_ptr<buffer> mine;
  return &mine;
}
#else
// Windows: on the heap, deleted as the thread ends by os::thread_exit_slot
// (thread.hpp: a thread_local shared_ptr's destructor ran on freed memory
// there); never deleted where no slot was left (the buffer then stays
// alive, as the trace's own hold keeps a plain thread's anyway).
inline void WINAPI delete_thread_slot(void* mine) noexcept { delete static_cast<std::shared_ptr<buffer>*>(mine); }
inline std::shared_ptr<buffer>* this_thread_slot(bool make) {
  static os::thread_exit_slot at_exit{&delete_thread_slot};
  thread_local std::shared_ptr<buffer>* mine = nullptr;  // trivially destructible
  if (!mine && make) {
    mine = new std::shared_ptr<buffer>;
    (void)at_exit.set(mine);
  }
  return mine;
}
#endif

// This thread's buffer, registered once (may raise bad_alloc).
inline buffer& this_thread_buffer() {
  std::shared_ptr<buffer>& mine = *this_thread_slot(true);
  if (!mine) {
    state& s = global_state();
    if (runtime_memory* m = thread_runtime_memory) {
      auto b = std::allocate_shared<buffer>(memory_allocator<buffer>(m), m);
      std::lock_guard<std::mutex> lk(s.mu);
      b->next = s.owned;
      if (s.owned) s.owned->prev = b.get();
      s.owned = b.get();
      mine = std::move(b);
    } else {
      auto b = std::make_shared<buffer>(nullptr);
      std::lock_guard<std::mutex> lk(s.mu);
      s.buffers.push_back(b);
      mine = std::move(b);
    }
  }
  return *mine;
}

// The calling thread stops working for the runtime that owns it
// (runtime_thread, when the thread's function returns): a buffer from the
// runtime's allocator is written out (if a trace runs, so no event is
// lost), unregistered and freed, while the runtime, which joins the thread
// before it is destroyed, is certainly alive. Nothing records on this
// thread for the runtime afterwards.
inline void release_thread_buffer() noexcept {
  std::shared_ptr<buffer>* slot = this_thread_slot(false);
  if (!slot) return;
  std::shared_ptr<buffer>& mine = *slot;
  if (!mine || !mine->memory) return;
  state& s = global_state();
  {
    std::lock_guard<std::mutex> lk(s.mu);
    GORO_TRY { s.drain_locked(*mine); }
    GORO_CATCH_ALL {}  // out of memory formatting: these events are lost
    buffer* b = mine.get();
    (b->prev ? b->prev->next : s.owned) = b->next;
    if (b->next) b->next->prev = b->prev;
  }
  mine.reset();
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
    event_vector full{memory_allocator<event>(b.memory)};
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
      {
        std::lock_guard<std::mutex> lk(s.mu);
        if (s.session.load(std::memory_order_relaxed) == session) s.write_locked(full);  // no-op once stopped
      }
      // The storage back to the buffer: one allocation per thread, not one
      // per buffer_events events.
      full.clear();
      std::lock_guard<spinlock> lk(b.lock);
      if (b.events.capacity() == 0) b.events.swap(full);
    }
  }
  GORO_CATCH_ALL {
    // Out of memory while tracing: the event is lost, the program goes on.
  }
}

}  // namespace goro::detail::tracing
