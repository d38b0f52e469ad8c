// bounded_pool: a bounded worker pool with goro::group -- 40 jobs, at most
// 4 running at once (set_limit), the first failing job cancels the rest
// through the group's context. The first run succeeds; the second has job
// 13 fail with an error code, and the jobs still waiting see the
// cancellation and skip their work. Exits 0 when both runs behave so.
#include <goro/goro.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <system_error>

using namespace std::chrono_literals;

namespace {

struct result {
  std::error_code ec;
  int done = 0, skipped = 0, peak = 0;
};

result run_jobs(int failing_job) {
  result r;
  std::atomic<int> running{0}, peak{0}, done{0}, skipped{0};
  goro::group g;
  g.set_limit(4);
  for (int job = 0; job < 40; ++job) {
    g.go([&, job]() -> std::error_code {  // blocks while 4 jobs run
      if (g.ctx().err() != goro::cancel_reason::none) {
        skipped.fetch_add(1);  // another job failed: don't start
        return {};
      }
      int now = running.fetch_add(1) + 1;
      for (int p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
      }
      goro::sleep_for(2ms);  // the work
      running.fetch_sub(1);
      if (job == failing_job) return std::make_error_code(std::errc::io_error);
      done.fetch_add(1);
      return {};
    });
  }
  r.ec = g.wait();
  r.done = done.load();
  r.skipped = skipped.load();
  r.peak = peak.load();
  return r;
}

}  // namespace

int main() {
  bool ok = true;
  goro::run([&] {
    result a = run_jobs(-1);
    std::printf("all ok: %d done, peak %d running, error '%s'\n", a.done, a.peak, a.ec.message().c_str());
    ok = ok && !a.ec && a.done == 40 && a.peak <= 4;
    result b = run_jobs(13);
    std::printf("job 13 fails: %d done, %d skipped, peak %d running, error '%s'\n", b.done, b.skipped, b.peak,
                b.ec.message().c_str());
    ok = ok && b.ec == std::errc::io_error && b.skipped > 0 && b.peak <= 4;
  });
  return ok ? 0 : 1;
}
