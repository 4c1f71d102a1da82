// output_kernels.cuh: the output layer's passes: its activation, the loss and its gradient a row
// at a time (a warp, a segment of a warp, or a block per row), and the gradient of a caller's
// dL/dz (BackwardFromOutput).
#pragma once
#include "../ops/embedding.h"
#include "kernel_base.cuh"

namespace nna {

// The copies of d a Train run's outputWarpKernel makes beside d (rows of up to 32 units): the
// 16-bit copy the error product reads, and where K models' SGD steps fold with their own lrs
// (LayerRun::scalesD), d times model z's lr (hp's, scheduled) for the weight-gradient
// product: in 16 bits (scaledHalf) or the run's dtype (scaled, model z's at z * stride).
template <typename T> struct OutputCopies {
  HalfOut dHalf, scaledHalf;
  T* scaled = nullptr;
  uint64_t stride = 0;
  const double* lrs = nullptr;
  Hyper<T> hp{};
};

// The output kernels: `rows` rows of this arena; the mean loss whose gradient d is divides by
// `scaleRows` (rows, or a data-parallel group's rows of the step).
// One warp per row: output layers of up to 32 units, and rows wider than outputBlockKernel holds;
// a row a W-lane segment where it has up to W = 16 or 8 units (two or four rows a warp: with a
// warp a row, K = 256 S models' 25,600 rows of 10 were as many warps, most of their lanes idle,
// and the launch was bound by instruction issue). addBias (rows of up to 32 units): z holds the
// product alone; b is added and f applied here (biasActivateKernel's expression: the same bits).
// poison (rows of up to W units): a row of x that names no row of some embedding table takes NaN
// outputs here (ops/embedding.h embedRowBad), in place of embedPoisonKernel's launch.
template <typename T, unsigned W = 32>
__global__ void outputWarpKernel(void* base, uint32_t last, uint64_t rows, uint64_t scaleRows, OutputLoss ol, bool grad, bool accumulate, uint64_t step, int fracBits,
                                 OutputCopies<T> copies = {}, bool addBias = false, bool poison = false) {
  const nna_bound_layer<T> O = bindModel<T>(base, last);
  const uint64_t t = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x, n = O.units;
  if (t / 32 * (32 / W) >= rows) return;  // whole warps leave together (the warp's first row)
  const uint64_t r = t / W;
  const bool live = r < rows;  // a segment past the last row still takes part in the shuffles
  T *z = O.z + r * n, *d = O.d + r * n;
  const T* y = O.y + r * n;
  RowResult res;
  if (n <= W) {  // the row in registers, read once (the same bits: output_row.cuh)
    const uint32_t lane = threadIdx.x % W;
    const uint64_t units = live ? n : 0;  // a dead segment: no unit is its lane's
    T dj, zj = lane < units ? z[lane] : T(0);
    const T yj = lane < units ? y[lane] : T(0);
    if (poison && lane < units) {  // embedPoisonKernel's NaN, read as that launch would have left z
      const nna_bound_layer<T> X = bindModel<T>(base, 0), E = bindModel<T>(base, 1);
      if (ops::embedRowBad(X.z + r * X.units, E.from, E.cols, E.cols_count)) z[lane] = zj = T(NAN);
    }
    if (addBias && lane < units) zj = activateAt(O, r * n + lane, zj + O.b[lane]);
    res = outputRowLane<T, W>(zj, yj, z, d, units, ol, scaleRows, grad, dj);
    if (!live) return;  // its shuffles are done
    if (grad && lane < n) {
      const uint64_t e = r * n + lane;
      if (copies.dHalf) copies.dHalf.store(e, float(dj));
      if (copies.lrs) {
        const T v = dj * withLr(copies.hp, copies.lrs[blockIdx.z]).lr;
        if (copies.scaledHalf)
          copies.scaledHalf.store(e, float(v));
        else
          copies.scaled[blockIdx.z * copies.stride + e] = v;
      }
    }
  } else {
    if constexpr (W < 32) return;  // launched for rows of up to W units only (LayerRun::output)
    res = outputRowWarp<T>(z, y, d, n, ol, scaleRows, grad);
  }
  if (accumulate && threadIdx.x % W == 0) accumulateRowStats(O.stats, res.loss, res.correct, r, rows, step, fracBits);
}

// Wide output layers: a block of 256 threads per row, each thread holding up to kOutPerThread
// of the row's values in registers, so z and y are read once and z and d written once (a warp
// per row walked the 4096-unit row of the L network five times). Same
// definitions as outputRow; sums in a fixed order.
constexpr int kOutPerThread = 16;
constexpr uint64_t kOutBlockMaxUnits = 256 * kOutPerThread;

template <typename T>
__global__ void __launch_bounds__(256)
    outputBlockKernel(void* base, uint32_t last, uint64_t rows, uint64_t scaleRows, OutputLoss ol, bool grad, bool accumulate, uint64_t step, int fracBits) {
  const nna_bound_layer<T> O = bindModel<T>(base, last);
  const uint64_t n = O.units;
  __shared__ T sv[8];
  __shared__ uint64_t si[8];
  for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    T* z = O.z + r * n;
    const T* y = O.y + r * n;
    T zv[kOutPerThread], yv[kOutPerThread];
#pragma unroll
    for (int q = 0; q < kOutPerThread; ++q) {
      const uint64_t j = threadIdx.x + uint64_t(q) * 256;
      zv[q] = j < n ? z[j] : T(0);
      yv[q] = j < n ? y[j] : T(0);
    }
    auto on = [&](int q) { return threadIdx.x + uint64_t(q) * 256 < n; };
    const LossInfo info = lossInfo(ol.loss);
    T l = T(0);
    if (info.softmax) {
      T mx = -INFINITY;
      uint64_t unused = 0;
#pragma unroll
      for (int q = 0; q < kOutPerThread; ++q)
        if (on(q) && zv[q] > mx) mx = zv[q];
      blockArgmax(mx, unused, sv, si);
      T sum = T(0);
#pragma unroll
      for (int q = 0; q < kOutPerThread; ++q)
        if (on(q)) sum += nexp(zv[q] - mx);
      const T lse = mx + nlog(blockSum(sum, sv));
#pragma unroll
      for (int q = 0; q < kOutPerThread; ++q)
        if (on(q)) {
          l += lossTerm(ol.loss, zv[q], lossTarget(ol, yv[q], n), lse);
          zv[q] = nexp(zv[q] - lse);
        }
    } else {
#pragma unroll
      for (int q = 0; q < kOutPerThread; ++q)
        if (on(q)) l += lossTerm(ol.loss, zv[q], yv[q], T(0));
    }
    double loss = double(blockSum(l, sv));
    if (info.meanUnits) loss /= double(n);
    bool correct;
    if (info.multilabel) {
      T miss = T(0);
#pragma unroll
      for (int q = 0; q < kOutPerThread; ++q)
        if (on(q) && labelMiss(zv[q], yv[q])) miss += T(1);
      correct = blockSum(miss, sv) == T(0);
    } else {
      // First maxima of z and y: a thread walks its units in increasing order, the block keeps
      // the smaller index among equal values.
      T zMax = -INFINITY, yMax = -INFINITY;
      uint64_t zArg = ~uint64_t(0), yArg = ~uint64_t(0);
#pragma unroll
      for (int q = 0; q < kOutPerThread; ++q)
        if (on(q)) {
          const uint64_t j = threadIdx.x + uint64_t(q) * 256;
          if (zArg == ~uint64_t(0) || zv[q] > zMax) {
            zMax = zv[q];
            zArg = j;
          }
          if (yArg == ~uint64_t(0) || yv[q] > yMax) {
            yMax = yv[q];
            yArg = j;
          }
        }
      blockArgmax(zMax, zArg, sv, si);
      blockArgmax(yMax, yArg, sv, si);
      correct = zArg == yArg;
    }
    T* d = O.d + r * n;
    const T scale = lossGradScale<T>(ol.loss, scaleRows, n);
#pragma unroll
    for (int q = 0; q < kOutPerThread; ++q)
      if (on(q)) {
        const uint64_t j = threadIdx.x + uint64_t(q) * 256;
        z[j] = zv[q];
        if (grad) d[j] = lossGrad(ol, zv[q], lossTarget(ol, yv[q], n), scale);
      }
    if (accumulate && threadIdx.x == 0) accumulateRowStats(O.stats, loss, correct, r, rows, step, fracBits);
  }
}

// BackwardFromOutput: d of the output layer holds the caller's dL/dz; make it dL/d(pre-activation)
// (outputGradRow), a thread per row.
template <typename T> __global__ void outputGradKernel(void* base, uint32_t last, uint64_t rows) {
  const nna_bound_layer<T> O = bindModel<T>(base, last);
  const uint64_t r = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x;
  if (r < rows) outputGradRow<T>(O.z + r * O.units, O.d + r * O.units, O.units, O.activation, T(O.act_param));
}

}  // namespace nna
