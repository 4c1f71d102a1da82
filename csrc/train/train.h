// train.h: one training/evaluation run over an arena, the same contract for both backends.
// A run executes `numBatches` steps back to back with no host round trip: rows come from the
// resident data set (xdata/ydata, through a seeded permutation) or from z[0]/y as they stand.
#pragma once
#include <cstdint>

namespace nna {

enum class Op : uint32_t {
  Train = 0,    // forward, loss, backward, update
  Grad = 1,     // forward, loss, backward (gradients left in dw/db; weights untouched)
  Eval = 2,     // forward and loss only (stats accumulate)
  Forward = 3,  // forward only (outputs in z of the last layer)
};
enum class Loss : uint32_t { CrossEntropy = 0, Mse = 1 };

struct RunParams {
  Op op = Op::Train;
  Loss loss = Loss::CrossEntropy;
  bool resident = false;    // rows from xdata/ydata (else z[0]/y as they are)
  bool resetStats = true;   // zero the stats region first (BAD_STEP = -1)
  uint64_t rows = 0;        // non-resident: rows of z[0]/y to use (1..batch)
  uint64_t samples = 0;     // resident: samples in the data set (<= header samples)
  uint64_t firstBatch = 0;  // resident: first batch of the epoch to run
  uint64_t numBatches = 1;  // steps in this run
  uint64_t permA = 1, permC = 0;  // resident row k of the epoch is sample (permA * k + permC) % samples
  uint64_t stepBase = 0;    // optimizer step count before this run (Adam's t starts at stepBase + 1)
  double lr = 0.01, momentum = 0.9, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

// Each throws Failure on bad parameters; the header was validated when the arena was created.
void runCpu(void* base, const RunParams& p);
// `header` is the validated host copy (launch geometry); kernels bind from devBase. `hooks`
// (csrc/cuda/layer_hooks.h) lets a memory scheduler act between the per-layer launches; a run
// with hooks always takes the per-layer path.
struct LayerHooks;
// Returns which path ran: "fused", "layers (cublas)" or "layers (tiled)".
const char* runCuda(void* devBase, const void* header, const RunParams& p, LayerHooks* hooks = nullptr);  // csrc/cuda/cuda_train.cu, or absent.cc
// A run on an arena with a device budget: its memory scheduler (managed) or stager (staged)
// keeps the device's share of it within the budget (csrc/budget/budget_run.cu, or absent.cc).
class Block;
const char* runBudgeted(Block& block, const RunParams& p);

// Checks that do not depend on the backend (rows, batches, data set present).
void checkRun(const void* header, const RunParams& p);

}  // namespace nna
