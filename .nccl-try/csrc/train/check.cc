// check.cc: validation of a run's parameters against the arena header, shared by both backends.
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "../core/failure.h"
#include "../include/nn_arena.h"
#include "train.h"

namespace nna {

void checkRun(const void* header, const RunParams& p) {
  nna_header h;
  std::memcpy(&h, header, sizeof h);
  nna_layer out;
  std::memcpy(&out, static_cast<const char*>(header) + h.layers_offset + size_t(h.num_layers - 1) * sizeof(nna_layer), sizeof out);
  if (uint32_t(p.op) > uint32_t(Op::Forward)) NNA_FAIL("BAD_ARGUMENT", "unknown op " + std::to_string(uint32_t(p.op)));
  if (uint32_t(p.loss) > uint32_t(Loss::Mse)) NNA_FAIL("BAD_ARGUMENT", "unknown loss " + std::to_string(uint32_t(p.loss)));
  const bool softmax = out.activation == NNA_ACT_SOFTMAX;
  if (softmax != (p.loss == Loss::CrossEntropy))
    NNA_FAIL("BAD_LOSS", softmax ? "a softmax output layer trains with cross-entropy, not mse"
                                 : "cross-entropy needs a softmax output layer; use mse for other output activations");
  for (double x : {p.lr, p.momentum, p.beta1, p.beta2, p.eps})
    if (!std::isfinite(x)) NNA_FAIL("BAD_ARGUMENT", "hyper-parameters must be finite");
  if (p.numBatches == 0) NNA_FAIL("BAD_ARGUMENT", "numBatches must be at least 1");
  if (p.reduce && p.op != Op::Train && p.op != Op::Grad) NNA_FAIL("BAD_ARGUMENT", "reduce applies to train and grad runs");
  if (!p.resident) {
    if (p.globalBatch || p.shardOffset) NNA_FAIL("BAD_ARGUMENT", "globalBatch and shardOffset apply to resident runs; use lossRows");
    // A replica may have no rows of a group's step (lossRows says the group has some).
    if ((p.rows == 0 && p.lossRows == 0) || p.rows > h.batch)
      NNA_FAIL("BAD_ARGUMENT", "rows " + std::to_string(p.rows) + " outside [1, batch " + std::to_string(h.batch) + "]");
    if (p.lossRows && p.lossRows < p.rows)
      NNA_FAIL("BAD_ARGUMENT", "lossRows " + std::to_string(p.lossRows) + " is below rows " + std::to_string(p.rows));
    if (p.numBatches != 1) NNA_FAIL("BAD_ARGUMENT", "a run on z[0]/y as they stand is one step");
    return;
  }
  if (h.samples == 0) NNA_FAIL("NO_DATA", "the arena holds no resident data set (plan it with samples > 0)");
  if (p.samples == 0 || p.samples > h.samples || p.samples >= (uint64_t(1) << 32))
    NNA_FAIL("BAD_ARGUMENT", "samples " + std::to_string(p.samples) + " outside [1, " + std::to_string(h.samples) + "]");
  if (p.lossRows) NNA_FAIL("BAD_ARGUMENT", "lossRows applies to runs on z[0]/y; a resident run takes the group's rows from globalBatch");
  const uint64_t global = p.globalBatch ? p.globalBatch : h.batch;
  if (global < h.batch || global >= (uint64_t(1) << 40) || p.shardOffset > global - h.batch)
    NNA_FAIL("BAD_ARGUMENT", "shard [" + std::to_string(p.shardOffset) + ", +" + std::to_string(h.batch) + ") outside the global batch of " + std::to_string(global));
  const uint64_t batches = (p.samples + global - 1) / global;
  if (p.firstBatch >= batches || p.numBatches > batches - p.firstBatch)
    NNA_FAIL("BAD_ARGUMENT", "batches [" + std::to_string(p.firstBatch) + ", +" + std::to_string(p.numBatches) + ") outside the epoch of " + std::to_string(batches));
  if (p.permA == 0 || p.permA >= p.samples + (p.samples == 1) || p.permC >= p.samples || std::gcd(p.permA, p.samples) != 1)
    NNA_FAIL("BAD_ARGUMENT", "permutation (a=" + std::to_string(p.permA) + ", c=" + std::to_string(p.permC) + ") is not a bijection of " + std::to_string(p.samples) + " samples");
}

}  // namespace nna
