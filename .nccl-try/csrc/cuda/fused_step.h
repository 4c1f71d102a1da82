// fused_step.h: a whole run (every step of it) as ONE cooperative kernel launch, for networks
// small enough that launches and not arithmetic bound the step (see fused_step.cu).
#pragma once
#include <vector>

#include "../include/nn_arena.h"
#include "../train/train.h"
#include "cublas_loader.h"

namespace nna {

// Runs `p` with the fused kernel and returns true, or returns false (nothing launched) where
// the fused path does not apply: a layer too large, a device without cooperative launch, or
// NN_ARENA_STEP_PATH=layers.
// Multiprocessors of the current device (read once); the per-layer path sizes its tiles by it.
int multiprocessors();

bool runFused(void* devBase, const nna_header& h, const std::vector<nna_layer>& layers, const RunParams& p, const Lane& lane);

}  // namespace nna
