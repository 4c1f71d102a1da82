// losses.h: the losses, one row each in NNA_LOSSES, and their per-element math, one definition
// compiled for the host and the device. Every output routine (math.h outputRow on the CPU and
// a thread per row on CUDA; output_row.cuh a warp per row; the block-per-row kernel; the fused
// kernel's lanes) computes a row as: the row's log-sum-exp where the loss takes softmax logits,
// lossTerm per element summed (divided by the units where mean_units), lossGrad per element,
// and whether the row is correct (argmax, or every label for multi-label losses).
#pragma once
#include <stdint.h>

#include "activations.h"

// X(Enum, code, "name", softmax, logits, smoothing, mean_units, multilabel)
//   softmax     1: the output layer must be softmax (the loss takes its logits, z becomes the
//               probabilities); 0: it must not be
//   logits      1: the output layer must be identity (z holds logits; the loss applies sigmoid)
//   smoothing   1: takes label smoothing (RunParams::labelSmoothing)
//   mean_units  1: a row's loss is the mean over its units (else their sum)
//   multilabel  1: a row is correct when every unit's prediction (logit > 0) matches its target
//               (> 0.5); 0: when the first maxima of z and y fall on the same unit
// The TypeScript table is generated from this one (scripts/gen-tables.cjs).
#define NNA_LOSSES(X)                                \
  X(CrossEntropy, 0, "cross-entropy", 1, 0, 1, 0, 0) \
  X(Mse, 1, "mse", 0, 0, 0, 1, 0)                    \
  X(BceWithLogits, 2, "bce-with-logits", 0, 1, 0, 1, 1)

namespace nna {

#define NNA_LOSS_ENUM_(e, code, name, softmax, logits, smoothing, mean, multi) e = code,
#define NNA_LOSS_COUNT_(e, code, name, softmax, logits, smoothing, mean, multi) +1
enum class Loss : uint32_t { NNA_LOSSES(NNA_LOSS_ENUM_) };
constexpr uint32_t kLossCount = 0 NNA_LOSSES(NNA_LOSS_COUNT_);

struct LossInfo {
  const char* name;
  bool softmax, logits, smoothing, meanUnits, multilabel;
};
NNA_FN LossInfo lossInfo(uint32_t loss) {
#define NNA_LOSS_INFO_(e, code, name, softmax, logits, smoothing, mean, multi) \
  case code: return LossInfo{name, softmax != 0, logits != 0, smoothing != 0, mean != 0, multi != 0};
  switch (loss) { NNA_LOSSES(NNA_LOSS_INFO_) default : return LossInfo{"unknown", false, false, false, false, false}; }
#undef NNA_LOSS_INFO_
}

// What an output routine needs besides the row: the output layer's activation and act_param,
// the loss, its label smoothing.
struct OutputLoss {
  uint32_t act = 0;
  uint32_t loss = 0;
  double param = 0;
  double smoothing = 0;
};

// Element j's target: y, or under label smoothing eps (1 - eps) y + eps / n (F.cross_entropy's
// label_smoothing for probability targets; one-hot rows give its class-index result).
template <typename T> NNA_FN T lossTarget(const OutputLoss& o, T y, uint64_t n) {
  if (o.smoothing == 0) return y;
  return (T(1) - T(o.smoothing)) * y + T(o.smoothing) / T(n);
}

// Element j's share of the row's loss from output z (softmax: the logit, lse the row's
// log-sum-exp) and target t.
template <typename T> NNA_FN T lossTerm(uint32_t loss, T z, T t, T lse) {
  switch (loss) {
    case uint32_t(Loss::CrossEntropy): return t != T(0) ? -t * (z - lse) : T(0);  // 0 * -inf is not a loss
    case uint32_t(Loss::BceWithLogits): {
      // (1 - t) z - log sigmoid(z), log sigmoid(z) = min(z, 0) - log1p(exp(-|z|)) (PyTorch's form)
      const T mn = z < T(0) ? z : T(0), az = z < T(0) ? -z : z;
      return (T(1) - t) * z - (mn - nlog1p(nexp(-az)));
    }
    default: return (z - t) * (z - t);
  }
}

// The scale of dL/dz of the mean loss over `rows` rows of n units.
template <typename T> NNA_FN T lossGradScale(uint32_t loss, uint64_t rows, uint64_t n) {
  switch (loss) {
    case uint32_t(Loss::CrossEntropy): return T(1) / T(rows);
    case uint32_t(Loss::BceWithLogits): return T(1) / (T(rows) * T(n));
    default: return T(2) / (T(rows) * T(n));
  }
}

// dL/d(pre-activation) of element j, the D kind: z the output (softmax: the probability).
template <typename T> NNA_FN T lossGrad(const OutputLoss& o, T z, T t, T scale) {
  switch (o.loss) {
    case uint32_t(Loss::CrossEntropy): return scale * (z - t);
    case uint32_t(Loss::BceWithLogits): return scale * (T(1) / (T(1) + nexp(-z)) - t);
    default: return scale * (z - t) * activationGrad<T>(o.act, z, T(o.param));
  }
}

// Multi-label losses: whether element j's prediction misses its target.
template <typename T> NNA_FN bool labelMiss(T z, T y) { return (z > T(0)) != (y > T(0.5)); }

}  // namespace nna
