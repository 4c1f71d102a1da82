// thread_pool.h: one persistent pool of worker threads over all cores (NN_ARENA_THREADS caps it)
// for the CPU backend's products and for the host passes over user data (split.h), so no call
// creates threads and nothing oversubscribes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>

namespace nna {

// Threads in the pool, the caller included (>= 1).
unsigned poolThreads();

// How a job uses the pool: whether its workers `linger`, spinning a little after it before they
// sleep. The CPU backend's products come back to back and linger; a pass over user rows is
// followed by a wait on the GPU, which workers spinning on every core would slow.
struct PoolUse {
  bool linger = true;
};

// Runs task(i) for i in [0, tasks) and returns when all are done. Any thread of the pool, the
// caller included, may run any task, so a task's result must not depend on which thread runs
// it. A call made while the pool is busy (a run in a second Node worker, or a nested call) runs
// its tasks inline on the caller.
void parallel(unsigned tasks, const std::function<void(unsigned)>& task, PoolUse use = {});

// Runs f(begin, end) over [0, count) in one contiguous chunk per pool thread when the work
// (count * costPerItem) is worth waking them; otherwise inline.
template <typename F> void parallelFor(uint64_t count, uint64_t costPerItem, F&& f) {
  const uint64_t work = count * std::max<uint64_t>(costPerItem, 1);
  const unsigned t = unsigned(std::min<uint64_t>({poolThreads(), count, std::max<uint64_t>(work / 200000, 1)}));
  if (t <= 1) {
    f(uint64_t(0), count);
    return;
  }
  parallel(t, [&](unsigned i) { f(count * i / t, count * (i + 1) / t); });
}

}  // namespace nna
