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
  // Data parallelism (one replica of a group; 0 / false: a run of its own, as before):
  uint64_t globalBatch = 0;  // resident: rows one step of the whole group takes (>= batch)
  uint64_t shardOffset = 0;  // resident: this replica's first row within each global batch
  uint64_t lossRows = 0;     // z[0]/y runs: rows the loss mean divides by (the group's rows)
  bool reduce = false;       // all-reduce gradients and stats over the arena's communicator
};

// The rows of step `s` of a run: which rows of the epoch it reads (resident), how many (0 for a
// replica whose shard of the last global batch is empty) and what the mean loss divides by
// (the rows of the whole group's step, so that summed gradients are the group's mean).
struct StepRows { uint64_t first = 0, rows = 0, scale = 0; };
inline StepRows stepRows(uint64_t batch, const RunParams& p, uint64_t s) {
  StepRows r;
  if (!p.resident) {
    r.rows = p.rows;
    r.scale = p.lossRows ? p.lossRows : p.rows;
    return r;
  }
  const uint64_t global = p.globalBatch ? p.globalBatch : batch;
  const uint64_t groupFirst = (p.firstBatch + s) * global;
  r.scale = global < p.samples - groupFirst ? global : p.samples - groupFirst;
  r.first = groupFirst + p.shardOffset;
  const uint64_t left = r.first < groupFirst + r.scale ? groupFirst + r.scale - r.first : 0;
  r.rows = left < batch ? left : batch;
  return r;
}

// Checks that do not depend on the backend (rows, batches, data set present). The runs
// themselves: csrc/cpu/cpu_train.h, csrc/cuda/cuda_train.h, csrc/budget/budgeted_block.h.
void checkRun(const void* header, const RunParams& p);

}  // namespace nna
