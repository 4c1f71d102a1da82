// fused_rows.cuh: the fused kernel's output rows (activation, loss, d), bias gradients and the clipping phase.
// Included by fused_step.cu only (one translation unit: the anonymous namespace is its own).
#pragma once

#include "fused_common.cuh"

namespace nna {
namespace {

// A finished row into the stats (not for Forward runs, which leave the stats alone).
template <typename T> __device__ void accumulateRow(const FusedParams& p, const StepInfo& st, const nna_bound_layer<T>& O, uint64_t r, uint64_t s, const RowResult& res) {
  if (p.op != uint32_t(Op::Forward)) accumulateRowStats(O.stats, res.loss, res.correct, r, st.rows, s, p.lossFracBits);
}

// Row r's targets from ydata through the permutation (resident runs), lanes striding the units.
template <typename T> __device__ void gatherTargets(const FusedParams& p, const StepInfo& st, const nna_bound_layer<T>& O, uint64_t r, uint32_t lane, uint32_t lanes) {
  if (!p.resident) return;
  const uint64_t k = permIndex(st.first + r, p.permA, p.permC, p.samples);
  for (uint64_t j = lane; j < O.units; j += lanes) O.y[r * O.units + j] = O.ydata[k * O.units + j];
}

// The last layer (units <= kFusedOutMax) and the output, one warp per row: lanes walk the
// inputs and keep one partial sum per output unit (all loads in flight at once), a shuffle tree
// gives lane j the value z[r][j]; lane 0 finishes the row (outputRow, the code the CPU backend
// runs); then, when gradients are wanted, the warp computes the row's
// d[L-1] = (d[L] w[L]) * act'(z[L-1]) with lanes over the inputs, so the backward pass starts
// one phase later.
constexpr int kFusedOutMax = int(kFusedOutputMaxUnits);  // phases.h: the table knows this order

// outputRow (math.h) for a row of n <= 32 units held one per lane: softmax (z becomes the
// probabilities), the loss, and whether the first maximum of z and y fall on the same unit.
// Same definitions; the sums run as shuffle trees.
template <typename T> __device__ RowResult outputRowLanes(T& z, T y, bool on, uint32_t n, const OutputLoss& o, uint64_t rows) {
  const uint32_t lane = threadIdx.x % 32;
  RowResult res{0.0, false};
  const LossInfo info = lossInfo(o.loss);
  if (info.softmax) {
    T mx = on ? z : -INFINITY;
    uint64_t at = lane;
    warpArgmax(mx, at);
    const T lse = mx + nlog(warpSum(on ? nexp(z - mx) : T(0)));
    res.loss = double(warpSum(on ? lossTerm(o.loss, z, lossTarget(o, y, n), lse) : T(0)));
    if (on) z = nexp(z - lse);
  } else {
    res.loss = double(warpSum(on ? lossTerm(o.loss, z, y, T(0)) : T(0)));
  }
  if (info.meanUnits) res.loss /= double(n);
  if (info.multilabel) {
    res.correct = warpSum(on && labelMiss(z, y) ? T(1) : T(0)) == T(0);
  } else {
    T zm = on ? z : -INFINITY, ym = on ? y : -INFINITY;
    uint64_t za = on ? lane : 32, ya = on ? lane : 32;
    warpArgmax(zm, za);
    warpArgmax(ym, ya);
    res.correct = za == ya;
  }
  return res;
}

constexpr int kOutChunks = 2;  // 2 x 32 inputs per lane of the output row, every load in flight

// One lane's loads for inputs k = k0 + 32c of the output row: z[k] of the layer below and
// w[j][k] for each unit j (zero past m or n), issued before any is used. The forward product
// and the error of the layer below walk the same inputs.
template <typename T>
__device__ __forceinline__ void loadOutputChunks(const T* zp, const T* w, uint32_t n, uint32_t m, uint32_t k0, T (&zk)[kOutChunks], T (&wk)[kOutChunks][kFusedOutMax]) {
#pragma unroll
  for (int c = 0; c < kOutChunks; ++c) {
    const uint32_t k = k0 + 32 * c;
    zk[c] = k < m ? zp[k] : T(0);
#pragma unroll
    for (int j = 0; j < kFusedOutMax; ++j) wk[c][j] = j < n && k < m ? w[j * m + k] : T(0);
  }
}

template <typename T> __device__ void outputRowFused(const FusedParams& p, const StepInfo& st, uint32_t r, uint64_t s) {
  const nna_bound_layer<T> O = bound<T>(p.last, st.model);
  const nna_bound_layer<T> P = bound<T>(p.last - 1, st.model);
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t n = uint32_t(O.units), m = uint32_t(O.fan_in);
  const T* zp = P.z + r * m;
  T part[kFusedOutMax];
#pragma unroll
  for (int j = 0; j < kFusedOutMax; ++j) part[j] = T(0);
  const T bl = lane < n ? O.b[lane] : T(0);
  T yl = T(0);  // the row's target: from the data set through the permutation (and kept in y)
  if (lane < n) {
    if (p.resident) {
      yl = O.ydata[permIndex(st.first + r, p.permA, p.permC, p.samples) * n + lane];
      if (st.model == 0) O.y[r * n + lane] = yl;  // y is shared: model 0 writes it
    } else {
      yl = O.y[r * n + lane];
    }
  }
  for (uint32_t k0 = lane; k0 < m; k0 += 32 * kOutChunks) {
    T zk[kOutChunks], wk[kOutChunks][kFusedOutMax];
    loadOutputChunks(zp, O.w, n, m, k0, zk, wk);
#pragma unroll
    for (int c = 0; c < kOutChunks; ++c)
#pragma unroll
      for (int j = 0; j < kFusedOutMax; ++j) part[j] += zk[c] * wk[c][j];
  }
  T mine = T(0);
#pragma unroll
  for (int j = 0; j < kFusedOutMax; ++j)
    if (j < n) {
      const T v = warpSum(part[j]);
      if (lane == j) mine = v;
    }
  // The row's values stay in registers (lane j: unit j): a thread walking the row in global
  // memory, as outputRow does, waits on a cache miss per value.
  const bool on = lane < n;
  const T y = yl;
  T z = on ? activate<T>(O.activation, mine + bl, T(O.act_param)) : T(0);
  const RowResult res = outputRowLanes<T>(z, y, on, n, p.loss, st.rows);
  if (on) O.z[r * n + lane] = z;
  T dl = T(0);
  if (st.grad && on) {
    dl = lossGrad(p.loss, z, lossTarget(p.loss, y, n), lossGradScale<T>(p.loss.loss, st.rows, n));  // as outputRow
    O.d[r * n + lane] = dl;
  }
  if (lane == 0) accumulateRow(p, st, O, r, s, res);
  if (!st.grad) return;
  T dj[kFusedOutMax];
#pragma unroll
  for (int j = 0; j < kFusedOutMax; ++j) dj[j] = __shfl_sync(0xffffffffu, dl, j);
  // f' reads the layer's pre-activations where it keeps them (GELU, SiLU, ...), else z: loaded
  // with the chunk's weights, not after the sums (a dependent load at the end of every row).
  const T* gin = activationGradInput(P) + r * m;
  for (uint32_t i0 = lane; i0 < m; i0 += 32 * kOutChunks) {
    T wi[kOutChunks][kFusedOutMax], vi[kOutChunks];
    loadOutputChunks(gin, O.w, n, m, i0, vi, wi);
#pragma unroll
    for (int c = 0; c < kOutChunks; ++c) {
      T acc = T(0);
#pragma unroll
      for (int j = 0; j < kFusedOutMax; ++j) acc += dj[j] * wi[c][j];
      const uint32_t i = i0 + 32 * c;
      if (i < m) P.d[r * m + i] = acc * activationGrad<T>(P.activation, vi[c], T(P.act_param));
    }
  }
}

template <typename T> __device__ void biasGradItem(const FusedParams& p, const StepInfo& st, uint32_t l, uint32_t item, Smem<T>& sm, const Hyper<T>& hb, bool updateNow) {
  const nna_bound_layer<T> C = bound<T>(l, st.model);
  const uint32_t col = threadIdx.x % kBiasCols, stripe = threadIdx.x / kBiasCols;
  const uint32_t j = item * kBiasCols + col, n = uint32_t(C.units), rows = uint32_t(st.rows);
  T s = T(0);
  if (j < n)
    for (uint32_t r0 = stripe; r0 < rows; r0 += kBiasStripes * 4) {  // 4 loads in flight, added in row order
      T v[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) v[q] = r0 + q * kBiasStripes < rows ? C.d[(r0 + q * kBiasStripes) * n + j] : T(0);
#pragma unroll
      for (int q = 0; q < 4; ++q)
        if (r0 + q * kBiasStripes < rows) s += v[q];
    }
  sm.bias[stripe][col] = s;
  __syncthreads();
  if (stripe == 0 && j < n) {
    T total = T(0);
    for (int y = 0; y < kBiasStripes; ++y) total += sm.bias[y][col];
    C.db[j] = total;
    if (updateNow)
      updateBias<T>(p.optimizer, C, j, total, hb);  // hb: forBiases
    else if (clipping(p, st))
      clipAdd(double(total));
  }
  __syncthreads();
}

// The block's sum of every thread's v in one fixed order (warp trees, then the 8 warp totals in
// order), as thread 0's result; every thread calls it. clipWarp is free again once the block
// has passed another barrier.
__device__ double clipBlockSum(double v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) clipWarp[threadIdx.x / 32] = v;
  __syncthreads();
  double total = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < kWarps; ++w) total += clipWarp[w];
  return total;
}

// Clipping: the squares this block's threads added for model m (clipAcc) into the block's
// partial sum, warp trees then the 8 warps in order; clipAcc starts again from zero. Every
// thread of the block calls it (the items of a phase are uniform in a block).
__device__ void clipFlush(const FusedParams& p, uint32_t m) {
  const double v = clipAcc[threadIdx.x];
  clipAcc[threadIdx.x] = 0;
  const double total = clipBlockSum(v);
  if (threadIdx.x == 0) p.clipPartials[uint64_t(m) * gridDim.x + blockIdx.x] += total;
  __syncthreads();
}

// Before a clipping step's backward phases: this block's partials and its threads' sums at zero
// (only this block writes its slots; the last reader passed the previous step's final barrier).
__device__ void clipReset(const FusedParams& p) {
  clipAcc[threadIdx.x] = 0;
  for (uint32_t m = threadIdx.x; m < p.models; m += blockDim.x) p.clipPartials[uint64_t(m) * gridDim.x + blockIdx.x] = 0;
  __syncthreads();
}

// Clipping by global norm, after the backward phases of a step (which wrote dw and db, updated
// nothing, and left each block's sum of their squares in partials[model][block]): every block
// adds a model's partials in one fixed order (the same total in every block), records it (block
// 0), and takes its share of that model's updates with the clip factor. One barrier per step.
template <typename T> __device__ void clipPhase(const FusedParams& p, cg::grid_group& grid, uint64_t s, Hyper<T>& hpStep, Hyper<T>& hbStep, Hyper<T>& hpItem, Hyper<T>& hbItem) {
  const uint64_t thread = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x, threads = uint64_t(gridDim.x) * blockDim.x;
  for (uint32_t m = 0; m < p.models; ++m) {
    // The whole block reads the partials (one thread reading all of them in turn is a serial
    // chain of loads that the whole grid waits on), each thread its own in block order, then warp
    // trees and the 8 warp totals in order: the same order, so the same total, in every block.
    double part = 0;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) part += p.clipPartials[uint64_t(m) * gridDim.x + b];
    const double sq = clipBlockSum(part);
    // The clip factor into the step's hyperparameters (shared; the next step recomputes them),
    // or into the model's own where models have their own rates.
    if (threadIdx.x == 0) {
      const double norm = sqrt(sq);
      if (blockIdx.x == 0) p.clipNorms[s * p.models + m] = norm;
      const T gs = T(clipScale(p.opt.clipGradNorm, norm));
      if (p.lrs) {
        hpItem = hyperOf<T>(p, hpStep, m);
        hbItem = forBiases(hpItem);
        hpItem.gs = gs;
        hbItem.gs = gs;
      } else {
        hpStep.gs = gs;
        hbStep.gs = gs;
      }
    }
    __syncthreads();
    const Hyper<T>& hp = p.lrs ? hpItem : hpStep;
    const Hyper<T>& hb = p.lrs ? hbItem : hbStep;
    for (uint32_t l = 1; l <= p.last; ++l) {
      const nna_bound_layer<T> C = bound<T>(l, m);
      const uint64_t nw = C.units * C.fan_in, n = nw + C.units;
      for (uint64_t e = thread; e < n; e += threads) {
        if (e < nw)
          updateWeight<T>(p.optimizer, C, e, C.dw[e], hp);
        else
          updateBias<T>(p.optimizer, C, e - nw, C.db[e - nw], hb);
      }
    }
    __syncthreads();  // the hyperparameters and clipWarp are the next model's
  }
  grid.sync();
}

}  // namespace
}  // namespace nna
