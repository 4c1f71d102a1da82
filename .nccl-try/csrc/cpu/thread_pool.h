// thread_pool.h: one persistent pool of worker threads over all cores for the CPU backend
// (NN_ARENA_THREADS caps it), so no product creates threads and nothing oversubscribes.
#pragma once
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

}  // namespace cpu
}  // namespace nna
