// train.h: one training/evaluation run over an arena, the same contract for both backends.
// A run executes `numBatches` steps back to back with no host round trip: rows come from the
// resident data set (xdata/ydata, through a seeded permutation) or from z[0]/y as they stand.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "../core/run_copies.h"
#include "../descriptors/optimizers.h"
#include "../descriptors/precisions.h"
#include "loss_scale.h"
#include "losses.h"

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
// Loss: the table NNA_LOSSES in losses.h.
// How the matrix products of a float32 run are computed (storage stays float32): Precision and
// its descriptors, csrc/descriptors/precisions.h.

struct RunParams {
  Op op = Op::Train;
  Loss loss = Loss::CrossEntropy;
  bool resident = false;          // rows from xdata/ydata (else z[0]/y as they are)
  bool resetStats = true;         // zero the stats region first (BAD_STEP = -1)
  uint64_t rows = 0;              // non-resident: rows of z[0]/y to use (1..batch); Update: ignored
  uint64_t samples = 0;           // resident: samples in the data set (<= header samples)
  uint64_t firstBatch = 0;        // resident: first batch of the epoch to run
  uint64_t numBatches = 1;        // steps in this run
  uint64_t permA = 1, permC = 0;  // resident row k of the epoch is sample (permA * k + permC) % samples
  uint64_t stepBase = 0;          // optimizer step count before this run (Adam's t starts at stepBase + 1)
  Precision precision = Precision::Fp32;
  double lr = 0.01;           // base learning rate (scheduled per step: opt.schedule)
  OptimizerParams opt;        // the other hyperparameters, the schedule, clipping (optimizers.h)
  double labelSmoothing = 0;  // losses whose row of NNA_LOSSES takes it: eps in [0, 1]
  uint64_t dropoutSeed = 0;   // dropout layers' masks (nna_dropout_keep): the Trainer's dropoutSeed
  // Data parallelism (one replica of a group; 0 / false: a run of its own, as before):
  uint64_t globalBatch = 0;  // resident: rows one step of the whole group takes (>= batch)
  uint64_t shardOffset = 0;  // resident: this replica's first row within each global batch
  uint64_t lossRows = 0;     // z[0]/y runs: rows the loss mean divides by (the group's rows)
  bool reduce = false;       // all-reduce gradients and stats over the arena's communicator
  // K-model arenas (nna_header.models): model m's learning rate, or empty for `lr` everywhere.
  // A run argument, not arena state: it belongs to the Trainer's options, like `lr`.
  std::vector<double> lrs;
  double lrOf(uint64_t m) const { return lrs.empty() ? lr : lrs[m]; }
  // Where a clipping run records the global gradient norm of each step (step s, model m at
  // s * models + m; set by the dispatch to the arena's Block), or null.
  std::vector<double>* gradNorms = nullptr;
  // Dynamic loss scaling (precision 'fp16': loss_scale.h): the state at the run's start, and
  // where the run leaves it at its end (the arena's Block), or null.
  LossScale lossScale;
  LossScale* lossScaleOut = nullptr;
  // Where a CUDA per-layer run records how many of its steps (a fed run: its batches) ran as a CUDA
  // graph launch, or null.
  uint64_t* graphSteps = nullptr;
  // Where a CUDA per-layer run records how many products of its first step carried a fused
  // cuBLASLt epilogue (0: none), or null. What tests observe of the epilogues.
  uint64_t* epilogues = nullptr;
  // The arena's cache between runs (Block::runCache), or null.
  std::shared_ptr<void>* runCache = nullptr;
  // Copies between the arena's host and device sides that travel with the run on its stream (a
  // step or a forward pass of a caller's batch: the upload, the run and the read-back end in one
  // wait): `in` before its first kernel, `out` after its last. Checked by the caller
  // (Block::checkRunCopies); a CUDA run of plain device memory only, else null.
  const RunCopies* copies = nullptr;
  // A forward run of many batches, each staged by the host as the device runs the one before
  // (RunFeed), or null. CUDA, plain device memory, op Forward, not with `copies`.
  const RunFeed* feed = nullptr;
  // Leaves the run's work queued on its stream (a feed's batch: the feed waits once, at its end).
  bool queued = false;
  bool clips() const { return opt.clipGradNorm > 0 && (op == Op::Train || op == Op::Update); }
};

// The output routines' view of the loss (losses.h): the output layer's activation `act`, the
// header's act_param, the run's loss and label smoothing.
inline OutputLoss outputLoss(uint32_t act, double actParam, const RunParams& p) {
  OutputLoss o;
  o.act = act;
  o.loss = uint32_t(p.loss);
  o.param = actParam;
  o.smoothing = p.labelSmoothing;
  return o;
}

// The rows of step `s` of a run: which rows of the epoch it reads (resident), how many (0 for a
// replica whose shard of the last global batch is empty) and what the mean loss divides by
// (the rows of the whole group's step, so that summed gradients are the group's mean).
struct StepRows {
  uint64_t first = 0, rows = 0, scale = 0;
};
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
// The part of checkRun that the loss's row of NNA_LOSSES decides (output layer, labelSmoothing):
// the one owner of those rules, also asked by the Trainer at construction (addon checkLoss).
void checkLoss(const void* header, const RunParams& p);
// What a data-parallel group needs of its plan (one model, not compact): checkRun's rule for a
// reduce run, also asked before a group's arenas exist (addon checkGroup).
void checkGroup(const void* header);
// Where a run goes: the CUDA backend or the CPU one; a device budget or none.
struct RunTarget {
  bool cuda = false, budgeted = false;
};
// What a run needs of where it runs: its layers' ops (other than dense) the CPU backend; its precision (precisions.h) a backend that runs it (the CPU
// computes fp32 and emulates bf16 and fp16) and no device budget when it takes a workspace beside
// the arena; clipping no device budget (its schedulers free each dw early). The
// backends check it before a run, the addon's checkRun with an arena's target (a Trainer
// refuses at construction with the same message).
void checkTarget(const void* header, const RunParams& p, RunTarget target);

// What a run of `op` does besides the forward pass, for the backends' loops.
inline bool isPrimitive(Op op) { return op == Op::Backward || op == Op::BackwardFromOutput || op == Op::Update; }

// The name of a precision ("fp32", "tf32", "tf32x3"), for messages.
const char* precisionName(Precision p);

}  // namespace nna
