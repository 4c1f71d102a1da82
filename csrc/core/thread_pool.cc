// thread_pool.cc: workers wait on a generation counter; they spin briefly after a job that
// lingers (training issues products back to back; PoolUse) and then sleep on a condition variable.
#include "thread_pool.h"
#include "env.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#define NNA_PAUSE() _mm_pause()
#else
#define NNA_PAUSE() std::this_thread::yield()
#endif

namespace nna {
namespace {

// Tasks are claimed from one atomic word (job number : task count : next task), so a worker that
// wakes late, or is descheduled by another process, never holds the others up: whoever is free
// takes the next task, the caller included, and a stale worker cannot claim from a newer job.
class Pool {
 public:
  explicit Pool(unsigned threads) : threads_(threads) {
    for (unsigned t = 1; t < threads_; ++t) workers_.emplace_back([this] { work(); });
  }
  unsigned threads() const { return threads_; }

  void run(unsigned tasks, const std::function<void(unsigned)>& task, PoolUse use) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (tasks <= 1 || threads_ <= 1 || !busy.owns_lock() || tasks >= kField) {
      for (unsigned i = 0; i < tasks; ++i) task(i);
      return;
    }
    uint64_t job;
    {
      std::lock_guard<std::mutex> lk(mu_);
      task_ = &task;
      done_.store(0, std::memory_order_relaxed);
      job = (gen_.load(std::memory_order_relaxed) + 1) & kGenMask;
      claim_.store(job << 40 | uint64_t(tasks) << 20, std::memory_order_release);
      linger_.store(use.linger, std::memory_order_relaxed);
      gen_.store(job, std::memory_order_release);
    }
    cv_.notify_all();  // one call for all: waking a chosen few costs the caller a call each
    drain(job);
    // A worker still in a task may have been descheduled by another process: after a short
    // spin, give the core up so it can finish.
    for (int s = 0; done_.load(std::memory_order_acquire) != tasks; ++s) {
      if (s < 1000)
        NNA_PAUSE();
      else
        std::this_thread::yield();
    }
  }

 private:
  static constexpr uint64_t kField = 1u << 20, kGenMask = (uint64_t(1) << 24) - 1;

  // Runs tasks of job `job` until none is left to claim.
  void drain(uint64_t job) {
    uint64_t c = claim_.load(std::memory_order_acquire);
    for (;;) {
      const uint64_t next = c & (kField - 1), tasks = (c >> 20) & (kField - 1);
      if ((c >> 40) != job || next >= tasks) return;
      if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      (*task_)(unsigned(next));  // the job cannot end while this task is unfinished
      done_.fetch_add(1, std::memory_order_release);
      c = claim_.load(std::memory_order_acquire);
    }
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      // Spin a little (tens of microseconds) before sleeping after a job that lingers.
      const int spin = linger_.load(std::memory_order_relaxed) ? 2000 : 0;
      for (int s = 0; s < spin && gen_.load(std::memory_order_acquire) == seen; ++s) NNA_PAUSE();
      if (gen_.load(std::memory_order_acquire) == seen) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return gen_.load(std::memory_order_acquire) != seen; });
      }
      seen = gen_.load(std::memory_order_acquire);
      drain(seen);
    }
  }

  const unsigned threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_, busy_;
  std::condition_variable cv_;
  std::atomic<uint64_t> gen_{0}, claim_{0};
  std::atomic<unsigned> done_{0};
  std::atomic<bool> linger_{true};
  const std::function<void(unsigned)>* task_ = nullptr;
};

Pool& pool() {
  // Never destroyed: workers may still be asleep in it when the process exits.
  static Pool* p = new Pool([] {
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    return unsigned(knobInt(Knob::Threads, hw, 1, 256));
  }());
  return *p;
}

}  // namespace

unsigned poolThreads() { return pool().threads(); }
void parallel(unsigned tasks, const std::function<void(unsigned)>& task, PoolUse use) { pool().run(tasks, task, use); }

}  // namespace nna
