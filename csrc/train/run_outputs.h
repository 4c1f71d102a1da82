// run_outputs.h: what the last run of an arena left for its caller to read, kept per arena
// (Block::runOutputs): the gradient norms of a clipping run, the loss scale after a scaling run,
// the steps that were graph launches, the products that took a fused epilogue. A run's
// RunParams point into it (the addon's runReplica sets them). Here, not in core: the loss scale
// is the trainer's rule (loss_scale.h), which the memory layer does not know.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "../core/block.h"
#include "loss_scale.h"

namespace nna {

struct RunOutputs {
  std::vector<double> gradNorms;  // each step's global gradient norm, of the last run that clipped (RunParams::gradNorms)
  LossScale lossScale;            // after the last run that scaled its loss (RunParams::lossScaleOut)
  uint64_t graphSteps = 0;        // steps of the last run that ran as a CUDA graph launch (RunParams::graphSteps)
  uint64_t epilogues = 0;         // products of the last run's first step with a fused cuBLASLt epilogue (RunParams::epilogues)
};

// The arena's outputs, made at their first use: by a run (with the block's mutex held) or by a
// reader on the JS thread while the arena is idle.
inline RunOutputs& runOutputsOf(Block& b) {
  std::shared_ptr<void>& slot = b.runOutputs();
  if (!slot) slot = std::make_shared<RunOutputs>();
  return *static_cast<RunOutputs*>(slot.get());
}

}  // namespace nna
