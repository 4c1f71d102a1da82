// run_cache.cuh: what an arena keeps between its CUDA runs (Block::runCache, RunParams::runCache):
// the per-layer path's step graphs and the buffers beside the arena (ScratchShelf), for the lane
// whose cuBLAS handle the graph was captured with (cuBLAS's kernels in it use that handle's
// workspace, which only the run holding the lane may touch).
#pragma once
#include <memory>

#include "../train/train.h"
#include "cublas_loader.h"
#include "scratch_shelf.h"
#include "step_graph.cuh"

namespace nna {

struct RunCache {
  void* blas = nullptr;
  ScratchShelf shelf;
  StepGraph graph;    // a training step's; names the shelf's bytes: it goes first
  StepGraph forward;  // a forward run's (predict()'s batch), kept apart so that the two alternate
  StepGraph fed;      // a fed run's batches' (run_feed.cuh: no copies of its own, the plan's rows)
};

// The arena's cache for a run on `lane` (a new one where the last run held another lane), or
// null where the run has none. Only this header's callers store in the slot.
inline std::shared_ptr<RunCache> runCacheOf(const RunParams& p, const Lane& lane) {
  if (!p.runCache) return nullptr;
  std::shared_ptr<void>& slot = *p.runCache;
  std::shared_ptr<RunCache> cache = std::static_pointer_cast<RunCache>(slot);
  if (!cache || cache->blas != lane.blas) slot = cache = std::make_shared<RunCache>();
  cache->blas = lane.blas;
  return cache;
}

}  // namespace nna
