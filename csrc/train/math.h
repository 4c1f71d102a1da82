// math.h: the per-element math of training, one definition compiled for the host (CPU
// backend) and the device (CUDA kernels), so both backends compute the same thing: the
// output row here; the optimizers' updates (descriptors/optimizers.h), the activations
// (activations.h) and losses (losses.h) in their descriptors.
#pragma once
#include <math.h>
#include <stdint.h>

#include "../include/nn_arena.h"
#include "../descriptors/optimizers.h"  // the optimizers' element updates and hyperparameters (Hyper, hyperAt)

#include "losses.h"

namespace nna {

// Row k of a shuffled epoch. a is coprime to n and both are < 2^32, so a * k cannot overflow.
NNA_FN uint64_t permIndex(uint64_t k, uint64_t a, uint64_t c, uint64_t n) { return (a * (k % n) + c) % n; }

}  // namespace nna

namespace nna {

struct RowResult {
  double loss;
  bool correct;
};

// The output layer for one row: softmax (when the loss takes softmax logits), the row's loss,
// whether it is correct (losses.h), and (wantGrad) the error d of the mean loss over `rows` rows.
template <typename T> NNA_FN RowResult outputRow(T* z, const T* y, T* d, uint64_t n, const OutputLoss& o, uint64_t rows, bool wantGrad) {
  RowResult res{0.0, false};
  const LossInfo info = lossInfo(o.loss);
  T loss = T(0);
  if (info.softmax) {
    T mx = z[0];
    for (uint64_t j = 1; j < n; ++j) mx = z[j] > mx ? z[j] : mx;
    T sum = T(0);
    for (uint64_t j = 0; j < n; ++j) sum += nexp(z[j] - mx);
    const T lse = mx + nlog(sum);
    for (uint64_t j = 0; j < n; ++j) {
      loss += lossTerm(o.loss, z[j], lossTarget(o, y[j], n), lse);
      z[j] = nexp(z[j] - lse);
    }
  } else {
    for (uint64_t j = 0; j < n; ++j) loss += lossTerm(o.loss, z[j], y[j], T(0));
  }
  res.loss = info.meanUnits ? double(loss) / double(n) : double(loss);
  if (info.multilabel) {
    bool miss = false;
    for (uint64_t j = 0; j < n; ++j) miss |= labelMiss(z[j], y[j]);
    res.correct = !miss;
  } else {
    uint64_t zArg = 0, yArg = 0;
    for (uint64_t j = 1; j < n; ++j) {
      if (z[j] > z[zArg]) zArg = j;
      if (y[j] > y[yArg]) yArg = j;
    }
    res.correct = zArg == yArg;
  }
  if (wantGrad) {
    const T scale = lossGradScale<T>(o.loss, rows, n);
    for (uint64_t j = 0; j < n; ++j) d[j] = lossGrad(o, z[j], lossTarget(o, y[j], n), scale);
  }
  return res;
}

// BackwardFromOutput, one row: d holds the caller's dL/dz (z: the outputs of the Forward run)
// and becomes dL/d(pre-activation), the D kind: times act'(z), or for softmax the Jacobian's
// product d_j = z_j (g_j - sum_k g_k z_k).
template <typename T> NNA_FN void outputGradRow(const T* z, T* d, uint64_t n, uint32_t act, T param) {
  if (act == NNA_ACT_SOFTMAX) {
    T dot = T(0);
    for (uint64_t j = 0; j < n; ++j) dot += d[j] * z[j];
    for (uint64_t j = 0; j < n; ++j) d[j] = z[j] * (d[j] - dot);
  } else {
    for (uint64_t j = 0; j < n; ++j) d[j] *= activationGrad(act, z[j], param);
  }
}

}  // namespace nna
