// goro::trace: an execution trace of every goroutine runtime in the
// process, written as Chrome trace events (JSON) that chrome://tracing and
// https://ui.perfetto.dev open. Each runtime shows as two processes: its Ps
// (a track per P: the goroutines that ran on it, steals, preemptions,
// blocks, wake-ups) and its Ms (a track per OS thread: the goroutines it
// ran and its goro::blocking calls). See docs/debugging.md.
//
//   goro::trace::start("trace.json");
//   ... run goroutines ...
//   goro::trace::stop();
#pragma once

#include <cerrno>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "detail/trace.hpp"
#include "error.hpp"

namespace goro::trace {

// Starts tracing into the file at `path` (created or truncated at once).
// One trace at a time: usage_error if one is running; std::system_error if
// the file cannot be created.
inline void start(const std::string& path) {
  auto& s = detail::tracing::global_state();
  std::lock_guard<std::mutex> lk(s.mu);
  if (s.out) detail::raise_usage("trace::start: a trace is already running (call trace::stop first)");
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) detail::raise_system(errno, ("trace::start: cannot create " + path).c_str());
  s.out = f;
  s.first = true;
  s.p_tracks.clear();
  s.m_tracks.clear();
  s.epoch = detail::tracing::now();
  s.session.fetch_add(1, std::memory_order_release);  // buffers drop what an earlier trace left
  std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", f);
  detail::tracing::on.store(true, std::memory_order_seq_cst);
}

// Stops tracing, writes what the buffers hold and closes the file.
// usage_error if no trace is running; std::system_error if writing failed.
inline void stop() {
  auto& s = detail::tracing::global_state();
  std::lock_guard<std::mutex> lk(s.mu);
  if (!s.out) detail::raise_usage("trace::stop: no trace is running");
  detail::tracing::on.store(false, std::memory_order_seq_cst);
  const std::uint64_t session = s.session.load(std::memory_order_relaxed);
  std::vector<detail::tracing::event> evs;
  for (auto& b : s.buffers) {
    evs.clear();
    {
      std::lock_guard<detail::spinlock> bl(b->lock);
      if (b->session == session) evs.swap(b->events);
    }
    s.write_locked(evs);
  }
  // Buffers of threads that have exited (the list holds the last
  // reference): nobody records into them any more.
  std::erase_if(s.buffers, [](const auto& b) { return b.use_count() == 1; });
  s.write_tail_locked();
  int err = std::ferror(s.out) ? EIO : 0;
  if (std::fclose(s.out) != 0 && err == 0) err = errno;
  s.out = nullptr;  // events still in flight are dropped (write_locked checks)
  if (err != 0) detail::raise_system(err, "trace::stop: writing the trace failed");
}

// Whether a trace is running.
inline bool running() noexcept { return detail::tracing::enabled(); }

}  // namespace goro::trace
