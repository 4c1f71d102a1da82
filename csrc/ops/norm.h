// norm.h: the layernorm and rmsnorm ops over one row of n values (nn.LayerNorm and nn.RMSNorm
// over the last dimension): xhat = (x - mean) * rstd, or x * rstd without centring, with rstd =
// 1 / sqrt(var + eps) (biased variance) or 1 / sqrt(mean(x^2) + eps); y = xhat * gain (+ bias).
// Row sums are taken in double in index order, so every backend that calls these gets the same
// bits. Compiled for the host and the device.
#pragma once
#include <stdint.h>

#include "../descriptors/host_device.h"
#include "../include/nn_arena.h"

namespace nna::ops {

struct NormRow {
  double mean = 0, rstd = 0;  // mean is 0 for rmsnorm
};

// Whether the op is a norm (layernorm or rmsnorm).
NNA_FN bool isNorm(uint32_t op) { return op == NNA_OP_LAYERNORM || op == NNA_OP_RMSNORM; }

// Whether the op's norm takes the row's mean out (layernorm) or not (rmsnorm).
NNA_FN bool normCentred(uint32_t op) { return op == NNA_OP_LAYERNORM; }

// rstd from the row's sum of squared deviations from its mean (or of squares: rmsnorm).
NNA_FN double normRstd(double sq, uint64_t n, double eps) { return 1.0 / nsqrt(sq / double(n) + eps); }

template <typename T> NNA_FN NormRow normRow(const T* x, uint64_t n, double eps, bool centred) {
  NormRow s;
  if (centred) {
    double sum = 0;
    for (uint64_t i = 0; i < n; ++i) sum += double(x[i]);
    s.mean = sum / double(n);
  }
  double sq = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const double c = double(x[i]) - s.mean;
    sq += c * c;
  }
  s.rstd = normRstd(sq, n, eps);
  return s;
}

NNA_FN double normHat(double x, const NormRow& s) { return (x - s.mean) * s.rstd; }

// One output: xhat * gain + bias (bias 0: rmsnorm).
NNA_FN double normOut(double x, const NormRow& s, double gain, double bias) { return normHat(x, s) * gain + bias; }

// The backward's row sums: a = sum(dxhat), b = sum(dxhat * xhat), dxhat = dy * gain; add() one
// element, then finish() before in() (rmsnorm, not centred, has no mean(dxhat) term).
struct NormGradSums {
  double a = 0, b = 0;
  NNA_FN void add(double x, double dy, double gain, const NormRow& s) {
    const double g = dy * gain;
    a += g;
    b += g * normHat(x, s);
  }
  NNA_FN void finish(uint64_t n, bool centred) {
    a = centred ? a / double(n) : 0.0;
    b /= double(n);
  }
  // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
  NNA_FN double in(double x, double dy, double gain, const NormRow& s) const { return s.rstd * (dy * gain - a - normHat(x, s) * b); }
};

// y = xhat * gain + bias (bias null: rmsnorm).
template <typename T> NNA_FN void normForward(const T* x, T* y, const T* gain, const T* bias, uint64_t n, const NormRow& s) {
  for (uint64_t i = 0; i < n; ++i) y[i] = T(normOut(double(x[i]), s, double(gain[i]), bias ? double(bias[i]) : 0.0));
}

template <typename T> NNA_FN void normBackward(const T* x, const T* dy, const T* gain, T* dx, uint64_t n, const NormRow& s, bool centred) {
  NormGradSums g;
  for (uint64_t i = 0; i < n; ++i) g.add(double(x[i]), double(dy[i]), double(gain[i]), s);
  g.finish(n, centred);
  for (uint64_t i = 0; i < n; ++i) dx[i] = T(g.in(double(x[i]), double(dy[i]), double(gain[i]), s));
}

}  // namespace nna::ops
