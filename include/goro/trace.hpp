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

#include <string>

#include "detail/config.hpp"

namespace goro::trace {

// Starts tracing into the file at `path` (created or truncated at once).
// One trace at a time: usage_error if one is running; std::system_error if
// the file cannot be created.
GORO_DECL void start(const std::string& path);

// Stops tracing, writes what the buffers hold and closes the file.
// usage_error if no trace is running; std::system_error if writing failed.
GORO_DECL void stop();

// Whether a trace is running.
GORO_DECL bool running() noexcept;

}  // namespace goro::trace

#if GORO_COMPILE_RUNTIME
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "detail/trace.hpp"
#include "error.hpp"
#include "os/os.hpp"

namespace goro::trace {

// Starts tracing into the file at `path` (created or truncated at once).
// One trace at a time: usage_error if one is running; std::system_error if
// the file cannot be created.
GORO_DECL void start(const std::string& path) {
  auto& s = detail::tracing::global_state();
  std::lock_guard<std::mutex> ctl(s.ctl);
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.fd >= 0) detail::raise_usage("trace::start: a trace is already running (call trace::stop first)");
    const int fd = detail::os::create_file(path.c_str());
    if (fd < 0) detail::raise_system(errno, ("trace::start: cannot create " + path).c_str());
    s.fd = fd;
    s.write_err = 0;
    s.first = true;
    s.p_tracks.clear();
    s.m_tracks.clear();
    s.runtimes.clear();
    s.text = "[";  // the JSON array form: loadable without its closing bracket
    s.write_text_locked();
    s.epoch = detail::tracing::now();
    s.flusher_stop = false;
    s.session.fetch_add(1, std::memory_order_release);  // buffers drop what an earlier trace left
  }
  GORO_TRY { s.flusher = std::thread([&s] { s.flusher_loop(); }); }
  GORO_CATCH_ALL {
    std::lock_guard<std::mutex> lk(s.mu);
    detail::os::close_fd(s.fd);
    s.fd = -1;
    GORO_RETHROW;
  }
  detail::tracing::on.store(true, std::memory_order_seq_cst);
}

// Stops tracing, writes what the buffers hold and closes the file.
// usage_error if no trace is running; std::system_error if writing failed.
GORO_DECL void stop() {
  auto& s = detail::tracing::global_state();
  std::lock_guard<std::mutex> ctl(s.ctl);
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.fd < 0) detail::raise_usage("trace::stop: no trace is running");
    detail::tracing::on.store(false, std::memory_order_seq_cst);
    s.flusher_stop = true;
  }
  s.flusher_cv.notify_all();
  if (s.flusher.joinable()) s.flusher.join();
  std::lock_guard<std::mutex> lk(s.mu);
  s.drain_locked();
  // Buffers of threads that have exited (the list holds the last
  // reference): nobody records into them any more.
  std::erase_if(s.buffers, [](const auto& b) { return b.use_count() == 1; });
  s.text += "\n]\n";
  s.write_text_locked();
  int err = s.write_err;
  if (int e = detail::os::close_fd(s.fd); e != 0 && err == 0) err = e;
  s.fd = -1;  // events still in flight are dropped (write_locked checks)
  if (err != 0) detail::raise_system(err, "trace::stop: writing the trace failed");
}

// Whether a trace is running.
GORO_DECL bool running() noexcept { return detail::tracing::enabled(); }

}  // namespace goro::trace
#endif  // GORO_COMPILE_RUNTIME
