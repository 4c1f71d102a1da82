// thread_pool.h: one persistent pool of worker threads over all cores for the CPU backend
// (NN_ARENA_THREADS caps it), so no product creates threads and nothing oversubscribes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>

namespace nna {
namespace cpu {

// Threads in the pool, the caller included (>= 1).
unsigned poolThreads();

// Runs task(i) for i in [0, tasks) and returns when all are done. Any thread of the pool, the
// caller included, may run any task, so a task's result must not depend on which thread runs
// it. A call made while the pool is busy (a run in a second Node worker, or a nested call) runs
// its tasks inline on the caller.
void parallel(unsigned tasks, const std::function<void(unsigned)>& task);

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

}  // namespace cpu
}  // namespace nna
