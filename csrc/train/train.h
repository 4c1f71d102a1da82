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
  // The trainer primitives (Trainer.forward / backward / update): a step split in three runs
  // that together give what one Train run gives. Non-resident, one step, never fused.
  Backward = 4,            // loss (from the outputs a Forward run left in z) and backward: dw, db
  BackwardFromOutput = 5,  // backward from dL/dz of the output layer, which the caller left in
                           // its d region (no loss): d becomes dL/d(pre-activation), then dw, db
  Update = 6,              // the optimizer step from dw / db (Adam's t = stepBase + 1); rows unused
};
enum class Loss : uint32_t { CrossEntropy = 0, Mse = 1 };

struct RunParams {
  Op op = Op::Train;
  Loss loss = Loss::CrossEntropy;
  bool resident = false;    // rows from xdata/ydata (else z[0]/y as they are)
  bool resetStats = true;   // zero the stats region first (BAD_STEP = -1)
  uint64_t rows = 0;        // non-resident: rows of z[0]/y to use (1..batch); Update: ignored
  uint64_t samples = 0;     // resident: samples in the data set (<= header samples)
  uint64_t firstBatch = 0;  // resident: first batch of the epoch to run
  uint64_t numBatches = 1;  // steps in this run
  uint64_t permA = 1, permC = 0;  // resident row k of the epoch is sample (permA * k + permC) % samples
  uint64_t stepBase = 0;    // optimizer step count before this run (Adam's t starts at stepBase + 1)
  double lr = 0.01, momentum = 0.9, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

// Checks that do not depend on the backend (rows, batches, data set present). The runs
// themselves: csrc/cpu/cpu_train.h, csrc/cuda/cuda_train.h, csrc/budget/budgeted_block.h.
void checkRun(const void* header, const RunParams& p);

// What a run of `op` does besides the forward pass, for the backends' loops.
inline bool isPrimitive(Op op) { return op == Op::Backward || op == Op::BackwardFromOutput || op == Op::Update; }

}  // namespace nna
