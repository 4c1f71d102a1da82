// budget_run.cu: a run on a budgeted arena (the scheduler or stager of its memory kind as the
// per-layer path's hooks), and where a managed range was last prefetched, for the report.
#include <climits>
#include <cstdlib>
#include <string>

#include "../core/block.h"
#include "../train/train.h"
#include "../cuda/check.cuh"
#include "../cuda/cublas_loader.h"
#include "scheduled_run.h"

namespace nna {

namespace {

// Whether the per-layer path will run its products through cuBLAS (cuda_train.cu, LayerRun:
// the library loaded, NN_ARENA_GEMM not 'tiled', every size within an int). A wrong answer
// costs only speed: a region the plan leaves out is still reached where it is.
bool productsUseBlas(const StepModel& m) {
  const char* gemm = std::getenv("NN_ARENA_GEMM");
  if (!cublasAvailable() || (gemm && std::string(gemm) == "tiled") || m.header().batch > INT_MAX) return false;
  for (const nna_layer& l : m.layers())
    if (l.units > INT_MAX || l.fan_in > INT_MAX) return false;
  return true;
}

}  // namespace

const char* runBudgeted(Block& block, const RunParams& p) {
  checkRun(block.header(), p);  // before a plan is made from them
  std::unique_ptr<LayerHooks> hooks;
  void* base = block.device();
  const bool blas = productsUseBlas(block.residency()->model());
  if (block.options().memory == Memory::Staged) {
    hooks = makeStager(block, p, blas);
    base = block.pool();  // the kernels bind from the shadow header at the pool's base
  } else if (block.options().scheduled) {
    hooks = makeUmScheduler(block, p, blas);
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
    case cudaMemLocationTypeHost: case cudaMemLocationTypeHostNuma: case cudaMemLocationTypeHostNumaCurrent: return "host";
    default: return "none";
  }
}

}  // namespace nna
