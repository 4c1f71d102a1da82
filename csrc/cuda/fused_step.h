// fused_step.h: a whole run (every step of it) as ONE cooperative kernel launch, for networks
// small enough that launches and not arithmetic bound the step (see fused_step.cu).
#pragma once
#include <vector>

#include "../include/nn_arena.h"
#include "../train/train.h"
#include "cublas_loader.h"

namespace nna {

// Multiprocessors of the current device (read once); the per-layer path sizes its tiles by it.
int multiprocessors();

// Where a fused clipping run leaves every step's norms on the device (count 0: nowhere), for the
// caller to read once the stream is synchronised (RunParams::gradNorms).
struct FusedNorms {
  const double* at = nullptr;
  uint64_t count = 0;
};

// Launches `p` with the fused kernel on lane.stream and returns true (the caller synchronises),
// or returns false (nothing launched) where the fused path does not apply: a layer too large, a
// device without cooperative launch, or NN_ARENA_STEP_PATH=layers.
bool runFused(void* devBase, const nna_header& h, const std::vector<nna_layer>& layers, const RunParams& p, const Lane& lane, FusedNorms* norms);

}  // namespace nna
