// scheduled_run.h: the memory schedulers of budgeted arenas, as LayerHooks for the per-layer
// CUDA path (layer_hooks.h). Each is made for one run of one arena and checks, hook by hook,
// that the launches follow the phase table it plans from (csrc/train/phases.h).
#pragma once
#include <memory>

#include "budgeted_block.h"
#include "../train/train.h"
#include "../cuda/layer_hooks.h"

namespace nna {

// Managed memory: prefetches ahead of need and evicts (prefetch to host, discard) on host
// threads of its own, keeping the device-resident part within the budget (um_scheduler.cu).
std::unique_ptr<LayerHooks> makeUmScheduler(BudgetedBlock& block, const RunParams& p);

// Staged memory: copies regions between the pinned image and the device pool with
// cudaMemcpyAsync, double-buffered with events (staging.cu).
std::unique_ptr<LayerHooks> makeStager(BudgetedBlock& block, const RunParams& p);

// Managed memory without a scheduler (residency 'on-demand'): pages fault in as kernels touch
// them; only the device memory in use is measured, for the report (um_scheduler.cu).
std::unique_ptr<LayerHooks> makeMeterOnly(BudgetedBlock& block);

}  // namespace nna
