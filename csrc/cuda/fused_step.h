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

// Whether `p` runs with the fused kernel: not where a layer is too large or not dense, the device
// has no cooperative launch, NN_ARENA_STEP_PATH=layers, or the per-layer path replays the run
// as one graph launch. Decided before anything is queued: the per-layer path queues its copies
// inside that graph.
bool fusedRuns(const nna_header& h, const std::vector<nna_layer>& layers, const RunParams& p);

// Launches `p` (fusedRuns) with the fused kernel on lane.stream; the caller synchronises.
void runFused(void* devBase, const nna_header& h, const std::vector<nna_layer>& layers, const RunParams& p, const Lane& lane, FusedNorms* norms);

}  // namespace nna
