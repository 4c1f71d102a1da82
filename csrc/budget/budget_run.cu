// budget_run.cu: a run on a budgeted arena (the scheduler or stager of its memory kind as the
// per-layer path's hooks), and where a managed range was last prefetched, for the report.
#include "budgeted_block.h"
#include "../train/phases.h"
#include "../train/train.h"
#include "../cuda/check.cuh"
#include "../cuda/cuda_train.h"
#include "scheduled_run.h"

namespace nna {

const char* runBudgeted(BudgetedBlock& block, const RunParams& p) {
  checkRun(block.header(), p);  // before a plan is made from them
  requireScheduled(p.op);       // the trainer primitives: not on budgeted arenas (phases.h)
  checkTarget(block.header(), p, RunTarget{/*cuda=*/true, /*budgeted=*/true});
  std::unique_ptr<LayerHooks> hooks;
  void* base = block.device();
  if (block.options().memory == Memory::Staged) {
    hooks = makeStager(block, p);
    base = block.pool();  // the kernels bind from the shadow header at the pool's base
  } else if (block.budget().scheduled) {
    hooks = makeUmScheduler(block, p);
  } else {
    hooks = makeMeterOnly(block);
  }
  return runCuda(base, block.header(), p, hooks.get());
}

const char* managedLastPrefetch(const void* p, size_t bytes) {
  cudaMemLocationType type = cudaMemLocationTypeInvalid;
  CUDA_CHECK(cudaMemRangeGetAttribute(&type, sizeof type, cudaMemRangeAttributeLastPrefetchLocationType, p, bytes));
  switch (type) {
    case cudaMemLocationTypeDevice: return "device";
    case cudaMemLocationTypeHost:
    case cudaMemLocationTypeHostNuma:
    case cudaMemLocationTypeHostNumaCurrent: return "host";
    default: return "none";
  }
}

}  // namespace nna
