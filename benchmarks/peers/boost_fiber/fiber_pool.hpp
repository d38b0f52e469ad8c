// Boost.Fiber harness shared by the peer workloads: `procs` threads, each
// with boost::fibers::algo::work_stealing (the main thread is one of them),
// plus a fiber-aware wait_group like goro's / Go's.
#pragma once

#include <boost/fiber/all.hpp>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace fiber_bench {

// add(n) / done() / wait(). done() is one atomic decrement; only the last
// one takes the lock. The waiter checks `released_` (set under the lock),
// not the counter, so it cannot return while the last done() still holds
// the lock: the wait_group may live on the waiter's stack.
class wait_group {
public:
  void add(long n) { count_.fetch_add(n, std::memory_order_relaxed); }
  void done() {
    if (count_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::unique_lock<boost::fibers::mutex> lk(m_);
      released_ = true;
      cv_.notify_all();
    }
  }
  void wait() {
    std::unique_lock<boost::fibers::mutex> lk(m_);
    cv_.wait(lk, [this] { return released_; });
  }

private:
  std::atomic<long> count_{0};
  boost::fibers::mutex m_;
  boost::fibers::condition_variable cv_;
  bool released_ = false;
};

// Runs `body` in the main fiber of the calling thread while procs - 1 more
// threads serve the shared work_stealing pool. `suspend`: idle threads sleep
// on a condition variable instead of spinning (work_stealing's flag; off by
// default, as in Boost's own benchmarks).
template <class F>
void run_pool(unsigned procs, bool suspend, F&& body) {
  std::atomic<bool> finished{false};
  boost::fibers::mutex m;
  boost::fibers::condition_variable_any cv;
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < procs; ++i)
    threads.emplace_back([&] {
      boost::fibers::use_scheduling_algorithm<boost::fibers::algo::work_stealing>(procs, suspend);
      std::unique_lock<boost::fibers::mutex> lk(m);
      cv.wait(lk, [&] { return finished.load(); });
    });
  boost::fibers::use_scheduling_algorithm<boost::fibers::algo::work_stealing>(procs, suspend);
  body();
  {
    std::unique_lock<boost::fibers::mutex> lk(m);
    finished = true;
  }
  cv.notify_all();
  for (auto& t : threads) t.join();
}

// Spawns a detached fiber (launch::post: queued, like a goroutine).
template <class F>
void go(F&& f) {
  boost::fibers::fiber(std::forward<F>(f)).detach();
}

}  // namespace fiber_bench
