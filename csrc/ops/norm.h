// norm.h: the layernorm and rmsnorm ops over one row of n values (nn.LayerNorm and nn.RMSNorm
// over the last dimension): xhat = (x - mean) * rstd, or x * rstd without centring, with rstd =
// 1 / sqrt(var + eps) (biased variance) or 1 / sqrt(mean(x^2) + eps); y = xhat * gain (+ bias).
// Row sums are taken in double in index order, so every backend that calls these gets the same
// bits. Compiled for the host and the device.
#pragma once
#include <stdint.h>

#include "../descriptors/host_device.h"

namespace nna::ops {

struct NormRow {
  double mean = 0, rstd = 0;  // mean is 0 for rmsnorm
};

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
  s.rstd = 1.0 / nsqrt(sq / double(n) + eps);
  return s;
}

NNA_FN double normHat(double x, const NormRow& s) { return (x - s.mean) * s.rstd; }

// y = xhat * gain + bias (bias null: rmsnorm).
template <typename T> NNA_FN void normForward(const T* x, T* y, const T* gain, const T* bias, uint64_t n, const NormRow& s) {
  for (uint64_t i = 0; i < n; ++i) y[i] = T(normHat(double(x[i]), s) * double(gain[i]) + (bias ? double(bias[i]) : 0.0));
}

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * gain; rmsnorm
// (not centred) has no mean(dxhat) term.
template <typename T> NNA_FN void normBackward(const T* x, const T* dy, const T* gain, T* dx, uint64_t n, const NormRow& s, bool centred) {
  double a = 0, b = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const double g = double(dy[i]) * double(gain[i]);
    a += g;
    b += g * normHat(double(x[i]), s);
  }
  a = centred ? a / double(n) : 0.0;
  b /= double(n);
  for (uint64_t i = 0; i < n; ++i) dx[i] = T(s.rstd * (double(dy[i]) * double(gain[i]) - a - normHat(double(x[i]), s) * b));
}

}  // namespace nna::ops
