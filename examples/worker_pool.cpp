// worker_pool: a fixed pool of worker goroutines takes jobs from a queue
// guarded by a goro::mutex, sleeping on a goro::cond while it is empty.
// Jobs come from the main goroutine and from a plain std::thread (the same
// mutex and cond work there: the thread blocks instead of parking). A
// semaphore bounds the jobs in flight, a once sets up shared state, and a
// wait_group waits for the workers. Exits 0 on success.
#include <goro/goro.hpp>

#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

class worker_pool {
 public:
  worker_pool(int workers, int max_queued) : slots_(static_cast<std::uint64_t>(max_queued)) {
    workers_done_.add(workers);
    for (int i = 0; i < workers; ++i) goro::go([this] { work(); });
  }

  // Queues a job; blocks (parks, or sleeps on a plain thread) while
  // max_queued jobs are already waiting.
  void submit(std::function<void()> job) {
    slots_.acquire();
    std::lock_guard<goro::mutex> lk(m_);
    jobs_.push_back(std::move(job));
    not_empty_.notify_one();
  }

  // No more jobs: workers finish the queue and exit; waits for them.
  void close_and_wait() {
    {
      std::lock_guard<goro::mutex> lk(m_);
      closed_ = true;
    }
    not_empty_.notify_all();
    workers_done_.wait();
  }

 private:
  void work() {
    std::unique_lock<goro::mutex> lk(m_);
    for (;;) {
      not_empty_.wait(lk, [this] { return !jobs_.empty() || closed_; });
      if (jobs_.empty()) break;  // closed and drained
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lk.unlock();  // run the job without holding the queue's lock
      slots_.release();
      job();
      lk.lock();
    }
    lk.unlock();
    workers_done_.done();
  }

  goro::mutex m_;
  goro::cond not_empty_;
  std::deque<std::function<void()>> jobs_;  // guarded by m_
  bool closed_ = false;                     // guarded by m_
  goro::semaphore slots_;
  goro::wait_group workers_done_;
};

int main() {
  constexpr int jobs_per_source = 5000;
  goro::runtime rt{goro::options{.maxprocs = 2, .detect_deadlock = false}};  // a plain thread submits jobs

  goro::once init;
  goro::mutex results_m;
  std::vector<long> results;  // guarded by results_m
  auto job = [&](long x) {
    return [&, x] {
      init.call([&] { results.reserve(2 * jobs_per_source); });  // first job only
      long y = x * x % 1009;
      std::lock_guard<goro::mutex> lk(results_m);
      results.push_back(y);
    };
  };

  long expected = 0;
  for (long x = 0; x < 2 * jobs_per_source; ++x) expected += x * x % 1009;

  std::thread feeder;
  rt.run([&] {
    worker_pool pool(/*workers=*/8, /*max_queued=*/64);
    goro::wait_group fed;
    fed.add(1);
    feeder = std::thread([&] {  // a plain thread submits half of the jobs
      for (long x = jobs_per_source; x < 2 * jobs_per_source; ++x) pool.submit(job(x));
      fed.done();
    });
    for (long x = 0; x < jobs_per_source; ++x) pool.submit(job(x));
    fed.wait();  // parks this goroutine (a join would block its thread)
    pool.close_and_wait();
  });
  feeder.join();

  long sum = 0;
  for (long y : results) sum += y;
  std::printf("worker_pool: %zu jobs, checksum %ld (expected %ld)\n", results.size(), sum, expected);
  return results.size() == 2u * jobs_per_source && sum == expected ? 0 : 1;
}
