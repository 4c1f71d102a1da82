// output_row.cuh: the output layer for one row, computed by a whole warp (lanes over units).
// One thread per row (math.h outputRow, the CPU's) walks a wide row serially and uncoalesced
// (the 4096-unit output of the L network), and puts a narrow layer's rows on few
// multiprocessors (M's 256 rows of 10: one block).
// Same definition as outputRow: the loss's descriptor (losses.h), first-maximum argmax or every
// label for the accuracy, d of the mean loss; only the order of the sums differs (a fixed shuffle tree).
// (The layer path uses outputBlockKernel, a block per row, for rows of 33 to 4096 units.)
#pragma once
#include "../train/math.h"

namespace nna {

// Over the W-lane segment of the warp that the lane is in (W a power of two up to 32: xor offsets
// below W stay inside it). Lanes holding zero leave a sum's bits as they are, so a row of n <= W
// units sums to the same bits in a segment of any such width.
template <unsigned W = 32, typename T> __device__ __forceinline__ T warpSum(T v) {
#pragma unroll
  for (int off = W / 2; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// The segment's maximum by `>` (on ties the lane keeps its own): warpArgmax's value where every
// index is the same, at a third of its shuffles.
template <unsigned W = 32, typename T> __device__ __forceinline__ T warpMax(T v) {
#pragma unroll
  for (int off = W / 2; off > 0; off /= 2) {
    const T o = __shfl_xor_sync(0xffffffffu, v, off);
    if (o > v) v = o;
  }
  return v;
}

// The row's first-maximum index (outputRow's argmax) where lane j of the segment holds unit j's
// value v (`mine`: j < n) and v0 is unit 0's: the maximum by `>` of each lane's candidate (v where
// it exceeds v0, else v0), then the first unit holding it by one ballot; 0 where none does (v0
// NaN). The same index as candidates (v, j) / (v0, 0) through warpArgmax, which took 15 shuffles.
template <unsigned W = 32, typename T> __device__ __forceinline__ uint32_t rowArgmax(T v, T v0, bool mine) {
  const T m = warpMax<W>(mine && v > v0 ? v : v0);
  uint32_t bits = __ballot_sync(0xffffffffu, mine && v == m);
  if constexpr (W < 32) bits = (bits >> ((threadIdx.x % 32) & ~(W - 1))) & ((1u << W) - 1);
  return bits ? uint32_t(__ffs(int(bits)) - 1) : 0u;
}

// Maximum over the warp with the smallest index among equal maxima (outputRow keeps the first).
template <typename T> __device__ __forceinline__ void warpArgmax(T& v, uint64_t& at) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    const T ov = __shfl_xor_sync(0xffffffffu, v, off);
    const uint64_t oa = __shfl_xor_sync(0xffffffffu, at, off);
    if (ov > v || (ov == v && oa < at)) {
      v = ov;
      at = oa;
    }
  }
}

// Adds one row's loss to the step's exact sum (NNA_STAT_LOSS_FIXED): fixed point with
// `fracBits` fraction bits in one 64-bit word and the whole part in another, both added with
// fire-and-forget integer atomics, so the total does not depend on the order in which rows
// (warps, blocks) finish; float atomics made the reported loss differ from run to run. The
// fraction word cannot wrap: fracBits = lossFracBits(batch) leaves room for a batch of rows.
// A value the format cannot hold (negative, >= 2^62, NaN, inf) goes to NNA_STAT_LOSS directly.
template <typename T> __device__ __forceinline__ void addLossExact(T* stats, double loss, int fracBits) {
  if (!(loss >= 0.0 && loss < 4611686018427387904.0)) {
    atomicAdd(stats + NNA_STAT_LOSS, T(loss));
    return;
  }
  unsigned long long* w = reinterpret_cast<unsigned long long*>(stats + NNA_STAT_LOSS_FIXED);
  const double whole = floor(loss);
  atomicAdd(w, static_cast<unsigned long long>(ldexp(loss - whole, fracBits)));
  atomicAdd(w + 1, static_cast<unsigned long long>(whole));
}

// One finished row into the stats region: its loss (exact sum), whether it was classified
// correctly, the batch's row count (row 0 adds it) and the first step with a non-finite loss.
// Steps run in order on one stream, so only this step's rows can race on BAD_STEP, all with one
// value. Every output routine (thread, warp or block per row; fused or per layer) ends here.
template <typename T> __device__ __forceinline__ void accumulateRowStats(T* stats, double loss, bool correct, uint64_t r, uint64_t rows, uint64_t step, int fracBits) {
  addLossExact(stats, loss, fracBits);
  atomicAdd(stats + NNA_STAT_CORRECT, T(correct ? 1 : 0));
  if (r == 0) atomicAdd(stats + NNA_STAT_ROWS, T(rows));
  if (!isfinite(loss) && stats[NNA_STAT_BAD_STEP] < T(0)) stats[NNA_STAT_BAD_STEP] = T(step);
}

// After a step: the exact sum, rounded once, joins NNA_STAT_LOSS; the accumulator restarts.
template <typename T> __device__ __forceinline__ void foldLossExact(T* stats, int fracBits) {
  unsigned long long* w = reinterpret_cast<unsigned long long*>(stats + NNA_STAT_LOSS_FIXED);
  stats[NNA_STAT_LOSS] += T(double(w[1]) + ldexp(double(w[0]), -fracBits));
  w[0] = w[1] = 0;
}

// A row of up to W units (a W-lane segment of the warp: 32, or 16 / 8 where one warp takes two /
// four rows) with lane j of the segment holding unit j's z (zj) and y (yj) in registers (lanes
// from n on: anything): outputRowWarp's loops taken once, in the same order, so the same bits
// (a compact plan's output launch, outputWarpKernel, and the full plan's outputHeadKernel agree:
// test/gpu/compact.gpu.test.ts), without its rounds through memory (z written, then read back by
// each loop). Writes z (the softmax) and d of the lane's unit, and returns d's value in `dj`
// (zero past n) for a copy to be made. (outputRowWarp itself keeps its loops: calling this from
// it made the fused S step with AdamW + GELU + clipping slower.)
template <typename T, unsigned W = 32> __device__ RowResult outputRowLane(T zj, T yj, T* z, T* d, uint64_t n, const OutputLoss& o, uint64_t rows, bool wantGrad, T& dj) {
  const uint32_t lane = threadIdx.x % W;
  const bool mine = lane < n;
  RowResult res{0.0, false};
  const LossInfo info = lossInfo(o.loss);
  const T tj = mine ? lossTarget(o, yj, n) : T(0);
  T loss = T(0);
  if (info.softmax) {
    const T z0 = __shfl_sync(0xffffffffu, zj, 0, W);
    const T mx = warpMax<W>(mine && zj > z0 ? zj : z0);
    const T lse = mx + nlog(warpSum<W>(mine ? T(T(0) + nexp(zj - mx)) : T(0)));
    if (mine) {
      loss += lossTerm(o.loss, zj, tj, lse);
      zj = nexp(zj - lse);
      z[lane] = zj;
    }
  } else if (mine) {
    loss += lossTerm(o.loss, zj, yj, T(0));
  }
  res.loss = double(warpSum<W>(loss));
  if (info.meanUnits) res.loss /= double(n);
  if (info.multilabel) {
    res.correct = warpSum<W>(mine && labelMiss(zj, yj) ? T(1) : T(0)) == T(0);
  } else {
    res.correct = rowArgmax<W>(zj, __shfl_sync(0xffffffffu, zj, 0, W), mine) == rowArgmax<W>(yj, __shfl_sync(0xffffffffu, yj, 0, W), mine);
  }
  dj = T(0);
  if (wantGrad && mine) {
    dj = lossGrad(o, zj, tj, lossGradScale<T>(o.loss, rows, n));
    d[lane] = dj;
  }
  return res;
}

template <typename T> __device__ RowResult outputRowWarp(T* z, const T* y, T* d, uint64_t n, const OutputLoss& o, uint64_t rows, bool wantGrad) {
  const uint32_t lane = threadIdx.x % 32;
  RowResult res{0.0, false};
  const LossInfo info = lossInfo(o.loss);
  T loss = T(0);
  if (info.softmax) {
    T mx = z[0];
    for (uint64_t j = lane; j < n; j += 32) mx = z[j] > mx ? z[j] : mx;
    uint64_t unused = 0;
    warpArgmax(mx, unused);
    T sum = T(0);
    for (uint64_t j = lane; j < n; j += 32) sum += nexp(z[j] - mx);
    const T lse = mx + nlog(warpSum(sum));
    for (uint64_t j = lane; j < n; j += 32) {
      loss += lossTerm(o.loss, z[j], lossTarget(o, y[j], n), lse);
      z[j] = nexp(z[j] - lse);
    }
  } else {
    for (uint64_t j = lane; j < n; j += 32) loss += lossTerm(o.loss, z[j], y[j], T(0));
  }
  res.loss = double(warpSum(loss));
  if (info.meanUnits) res.loss /= double(n);
  if (info.multilabel) {
    T miss = T(0);
    for (uint64_t j = lane; j < n; j += 32) miss += labelMiss(z[j], y[j]) ? T(1) : T(0);
    res.correct = warpSum(miss) == T(0);
  } else {
    T zMax = z[0], yMax = y[0];
    uint64_t zArg = 0, yArg = 0;
    for (uint64_t j = lane; j < n; j += 32) {
      if (z[j] > zMax) {
        zMax = z[j];
        zArg = j;
      }
      if (y[j] > yMax) {
        yMax = y[j];
        yArg = j;
      }
    }
    warpArgmax(zMax, zArg);
    warpArgmax(yMax, yArg);
    res.correct = zArg == yArg;
  }
  if (wantGrad) {
    const T scale = lossGradScale<T>(o.loss, rows, n);
    for (uint64_t j = lane; j < n; j += 32) d[j] = lossGrad(o, z[j], lossTarget(o, y[j], n), scale);
  }
  return res;
}

}  // namespace nna

namespace nna {

// Block-wide reductions of 256 threads in a fixed order (warp trees, then warps in order), for
// the block-per-row output kernel. `scratch` holds 8 values; every thread gets the result.
template <typename T> __device__ T blockSum(T v, T* scratch) {
  v = warpSum(v);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  T total = T(0);
  for (int w = 0; w < 8; ++w) total += scratch[w];
  __syncthreads();
  return total;
}

// Maximum with the smallest index among equal maxima (outputRow keeps the first maximum).
template <typename T> __device__ void blockArgmax(T& v, uint64_t& at, T* sv, uint64_t* si) {
  warpArgmax(v, at);
  if (threadIdx.x % 32 == 0) {
    sv[threadIdx.x / 32] = v;
    si[threadIdx.x / 32] = at;
  }
  __syncthreads();
  v = sv[0];
  at = si[0];
  for (int w = 1; w < 8; ++w)
    if (sv[w] > v || (sv[w] == v && si[w] < at)) {
      v = sv[w];
      at = si[w];
    }
  __syncthreads();
}

}  // namespace nna
