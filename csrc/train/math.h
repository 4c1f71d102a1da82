// math.h: the per-element math of training (the optimizers' updates: optimizers.h), one definition compiled for the host (CPU
// backend) and the device (CUDA kernels), so both backends compute the same thing.
#pragma once
#include <math.h>
#include <stdint.h>

#include "../include/nn_arena.h"
#include "../descriptors/optimizers.h"  // the optimizers' element updates and hyperparameters (Hyper, hyperAt)

#if defined(__CUDACC__)
#define NNA_FN __host__ __device__ __forceinline__
#else
#define NNA_FN inline
#endif

namespace nna {

NNA_FN float nexp(float x) { return expf(x); }
NNA_FN double nexp(double x) { return exp(x); }
NNA_FN float nlog(float x) { return logf(x); }
NNA_FN double nlog(double x) { return log(x); }
NNA_FN float ntanh(float x) { return tanhf(x); }
NNA_FN double ntanh(double x) { return tanh(x); }

// Hidden or output activation (softmax is applied per row elsewhere; here it passes through).
template <typename T>
NNA_FN T activate(uint32_t act, T x) {
  switch (act) {
    case NNA_ACT_RELU: return x > T(0) ? x : T(0);
    case NNA_ACT_SIGMOID: return T(1) / (T(1) + nexp(-x));
    case NNA_ACT_TANH: return ntanh(x);
    default: return x;
  }
}

// Derivative expressed through the activation's output z, so no pre-activation is stored.
template <typename T>
NNA_FN T activationGrad(uint32_t act, T z) {
  switch (act) {
    case NNA_ACT_RELU: return z > T(0) ? T(1) : T(0);
    case NNA_ACT_SIGMOID: return z * (T(1) - z);
    case NNA_ACT_TANH: return T(1) - z * z;
    default: return T(1);
  }
}

// Row k of a shuffled epoch. a is coprime to n and both are < 2^32, so a * k cannot overflow.
NNA_FN uint64_t permIndex(uint64_t k, uint64_t a, uint64_t c, uint64_t n) { return (a * (k % n) + c) % n; }

}  // namespace nna

namespace nna {

struct RowResult {
  double loss;
  bool correct;
};

// log(p) of a probability a Forward run left in z (Backward runs, which no longer have the
// logits): an underflowed p counts as the smallest normal, so a confident miss is a large finite
// loss (at most about 87 in float32, 708 in float64) as in a Train run, not a divergence.
template <typename T>
NNA_FN T logProb(T p) {
  const T tiny = sizeof(T) == 4 ? T(1.17549435e-38f) : T(2.2250738585072014e-308);
  return nlog(p < tiny ? tiny : p);  // NaN stays NaN
}

// The output layer for one row: softmax (when the layer's activation is softmax), the row's
// loss, whether its argmax matches the target's, and (wantGrad) the error d of the mean loss
// over `rows` rows. Cross-entropy goes with softmax, MSE with any other output activation.
// `activated`: z already holds the outputs of a Forward run (softmax applied); the loss comes
// from them and d is the same as a Train run's (it is computed from those very values).
template <typename T>
NNA_FN RowResult outputRow(T* z, const T* y, T* d, uint64_t n, uint32_t act, bool mse, uint64_t rows, bool wantGrad, bool activated = false) {
  RowResult res{0.0, false};
  if (act == NNA_ACT_SOFTMAX && activated) {
    T loss = T(0);
    for (uint64_t j = 0; j < n; ++j)
      if (y[j] != T(0)) loss -= y[j] * logProb(z[j]);
    res.loss = double(loss);
  } else if (act == NNA_ACT_SOFTMAX) {
    T mx = z[0];
    for (uint64_t j = 1; j < n; ++j) mx = z[j] > mx ? z[j] : mx;
    T sum = T(0);
    for (uint64_t j = 0; j < n; ++j) sum += nexp(z[j] - mx);
    const T lse = mx + nlog(sum);
    T loss = T(0);
    for (uint64_t j = 0; j < n; ++j) {
      if (y[j] != T(0)) loss -= y[j] * (z[j] - lse);
      z[j] = nexp(z[j] - lse);
    }
    res.loss = double(loss);
  }
  uint64_t zArg = 0, yArg = 0;
  for (uint64_t j = 1; j < n; ++j) {
    if (z[j] > z[zArg]) zArg = j;
    if (y[j] > y[yArg]) yArg = j;
  }
  res.correct = zArg == yArg;
  if (mse) {
    T loss = T(0);
    for (uint64_t j = 0; j < n; ++j) loss += (z[j] - y[j]) * (z[j] - y[j]);
    res.loss = double(loss) / double(n);
  }
  if (wantGrad) {
    if (mse) {
      const T scale = T(2) / (T(rows) * T(n));
      for (uint64_t j = 0; j < n; ++j) d[j] = scale * (z[j] - y[j]) * activationGrad(act, z[j]);
    } else {
      const T scale = T(1) / T(rows);
      for (uint64_t j = 0; j < n; ++j) d[j] = scale * (z[j] - y[j]);
    }
  }
  return res;
}

// BackwardFromOutput, one row: d holds the caller's dL/dz (z: the outputs of the Forward run)
// and becomes dL/d(pre-activation), the D kind: times act'(z), or for softmax the Jacobian's
// product d_j = z_j (g_j - sum_k g_k z_k).
template <typename T>
NNA_FN void outputGradRow(const T* z, T* d, uint64_t n, uint32_t act) {
  if (act == NNA_ACT_SOFTMAX) {
    T dot = T(0);
    for (uint64_t j = 0; j < n; ++j) dot += d[j] * z[j];
    for (uint64_t j = 0; j < n; ++j) d[j] = z[j] * (d[j] - dot);
  } else {
    for (uint64_t j = 0; j < n; ++j) d[j] *= activationGrad(act, z[j]);
  }
}

}  // namespace nna
