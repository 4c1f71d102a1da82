// layer_kernels.cuh: the kernels of the per-layer path (one launch per product or pass). Each
// takes the arena's device base and binds what it needs from the header with nna_bind. The
// per-element math is csrc/train/math.h, shared with the CPU backend and the fused step.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../include/nn_arena.h"
#include "../train/loss_scale.h"
#include "../train/math.h"
#include "output_row.cuh"

namespace nna {

constexpr int kThreads = 256;

// K-model arenas: every kernel below but the gather runs over grid z = models and binds model
// blockIdx.z's copies (nna_bind_model; shared regions are the one copy). One model's blocks do
// exactly what a one-model launch does, so each model's results are a one-model run's.
template <typename T> __device__ __forceinline__ nna_bound_layer<T> bindModel(void* base, uint32_t l) { return nna_bind_model<T>(base, l, blockIdx.z); }

// Fraction bits of the fixed-point loss sum (output_row.cuh): 48, fewer for batches of 2^15
// rows or more, so that a step's fractions (each < 2^fracBits) cannot overflow 64 bits.
inline int lossFracBits(uint64_t batch) {
  int bits = 0;
  while (bits < 64 && (uint64_t(1) << bits) <= batch) ++bits;  // batch < 2^bits
  return bits + 48 <= 63 ? 48 : 63 - bits;
}

// Four consecutive 16-bit values as one 8-byte access (H2: __half2 or __nv_bfloat162): the
// casts' stores (HalfOut::storeQuad) and the output layer's loads (output_head.cuh).
template <typename H2> struct alignas(8) HalfQuad {
  H2 lo, hi;
};

// A run's 16-bit copy of a region (precision bf16 or fp16: run_buffers.cuh HalfCopies), written
// by the pass that makes the fp32 value, or none (null). The kind is uniform in a launch. K-model
// arenas: model blockIdx.z's copy lies `stride` elements after the one before (0: one copy).
struct HalfOut {
  void* p = nullptr;
  bool fp16 = false;
  uint64_t stride = 0;
  __host__ __device__ explicit operator bool() const { return p != nullptr; }
  __device__ __forceinline__ void store(uint64_t e, float v) const {
    const uint64_t at = e + uint64_t(blockIdx.z) * stride;
    if (fp16)
      static_cast<__half*>(p)[at] = __float2half_rn(v);
    else
      static_cast<__nv_bfloat16*>(p)[at] = __float2bfloat16_rn(v);
  }
  // Elements 4q .. 4q + 3 as store rounds them, one 8-byte store (p 8-byte aligned, stride a multiple of 4).
  __device__ __forceinline__ void storeQuad(uint64_t q, float4 v) const {
    const uint64_t at = uint64_t(blockIdx.z) * stride;
    if (fp16)
      reinterpret_cast<HalfQuad<__half2>*>(static_cast<__half*>(p) + at)[q] = {__floats2half2_rn(v.x, v.y), __floats2half2_rn(v.z, v.w)};
    else
      reinterpret_cast<HalfQuad<__nv_bfloat162>*>(static_cast<__nv_bfloat16*>(p) + at)[q] = {__floats2bfloat162_rn(v.x, v.y), __floats2bfloat162_rn(v.z, v.w)};
  }
  // Whether storeQuad may serve model blockIdx.z's copy.
  __device__ __forceinline__ bool quads() const { return (reinterpret_cast<uintptr_t>(p) & 7) == 0 && (stride & 3) == 0; }
};

inline unsigned blocksFor(uint64_t n) {
  const uint64_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 65535 * 16 ? (b ? b : 1) : 65535 * 16);
}

template <typename T> __global__ void resetStatsKernel(void* base, uint32_t last) {
  T* s = bindModel<T>(base, last).stats;
  for (int i = 0; i < NNA_STATS_COUNT; ++i) s[i] = T(0);
  s[NNA_STAT_BAD_STEP] = T(-1);
}

// Marks the run's bad step `step` (unless one is marked) when a weight or bias of layer l is
// not finite: a diverged step whose loss stayed finite (cpu_train.cc, markNonFinite). Layer l is
// blockIdx.y + 1: one launch checks every layer (a launch costs the host more than the scan).
template <typename T> __global__ void nonFiniteKernel(void* base, uint32_t last, T step) {
  const nna_bound_layer<T> C = bindModel<T>(base, blockIdx.y + 1);
  const uint64_t nw = C.w_count, n = nw + C.b_count;  // a dense layer's matrix and bias, a norm's gain (and bias), or none
  bool bad = false;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) bad |= !isfinite(i < nw ? C.w[i] : C.b[i - nw]);
  if (!bad) return;
  T* s = bindModel<T>(base, last).stats;
  if (s[NNA_STAT_BAD_STEP] < T(0)) s[NNA_STAT_BAD_STEP] = step;  // every writer writes the same value
}

template <typename T> __global__ void foldStatsKernel(void* base, uint32_t last, int fracBits) { foldLossExact(bindModel<T>(base, last).stats, fracBits); }

// Rows of one shuffled batch from the resident data set into z[0] and y: a block per row, so
// the permutation is computed once a row and no element needs a 64-bit division (the
// element-indexed version paid one an element).
// `foldModels` > 0: block 0 first folds the previous step's loss sum of that many models (what
// foldStatsKernel does after each step: one launch a step fewer).
template <typename T>
__global__ void gatherKernel(void* base, uint32_t last, uint64_t first, uint64_t rows, uint64_t a, uint64_t c, uint64_t samples, HalfOut half, uint32_t foldModels, int fracBits) {
  if (blockIdx.x == 0)
    for (uint32_t m = threadIdx.x; m < foldModels; m += blockDim.x) foldLossExact(nna_bind_model<T>(base, last, m).stats, fracBits);
  const nna_bound_layer<T> in = nna_bind<T>(base, 0), out = nna_bind<T>(base, last);
  for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const uint64_t k = permIndex(first + r, a, c, samples);
    constexpr int kGroup = 4;  // a thread's loads before its stores (which they could alias)
    for (uint64_t j0 = threadIdx.x; j0 < in.units; j0 += uint64_t(kGroup) * blockDim.x) {
      T x[kGroup];
#pragma unroll
      for (int q = 0; q < kGroup; ++q) {
        const uint64_t j = j0 + uint64_t(q) * blockDim.x;
        if (j < in.units) x[q] = in.xdata[k * in.units + j];
      }
#pragma unroll
      for (int q = 0; q < kGroup; ++q) {
        const uint64_t j = j0 + uint64_t(q) * blockDim.x;
        if (j >= in.units) break;
        in.z[r * in.units + j] = x[q];
        if (half) half.store(r * in.units + j, float(x[q]));  // precision bf16 / fp16: z[0]'s copy (HalfCopies)
      }
    }
    for (uint64_t j = threadIdx.x; j < out.units; j += blockDim.x) out.y[r * out.units + j] = out.ydata[k * out.units + j];
  }
}

inline unsigned rowBlocks(uint64_t rows) { return unsigned(rows < 65535 ? (rows ? rows : 1) : 65535); }

// Blocks a model for a pass over `rows` rows of `units` units of `models` models: a block a row up
// to about four waves of 256-thread blocks over all models (sms multiprocessors), fewer a model
// beyond. K models: no more than a block per kBandWork elements of a model, since each block
// pays for binding its model and a round of memory latency.
constexpr uint64_t kBandWork = 2048;
inline unsigned bandBlocks(uint64_t rows, uint64_t units, unsigned models, int sms) {
  const uint64_t share = uint64_t(sms) * 32 / (models ? models : 1), most = share ? share : 1;
  uint64_t b = rows < most ? rows : most;
  const uint64_t byWork = (rows * units + kBandWork - 1) / kBandWork;
  if (models > 1 && byWork < b) b = byWork;
  return rowBlocks(b);
}

// store(e, j, load(e, j)) for every element e (unit j) of this block's band of rows: rows split
// evenly over gridDim.x blocks, the threads over the band's rows x units elements (32-bit indexing
// where the band fits: a division by units per element, not a 64-bit one), kBandGroup elements a
// thread at a time with every load of a group before its first store (which the compiler cannot
// move them past): a round of memory latency a group, not one an element. A band of one row
// (one model, or few rows a model) walks the row's units without a division.
constexpr int kBandGroup = 4;
template <typename Load, typename Store> __device__ void forBandElements(uint64_t rows, uint64_t units, Load&& load, Store&& store) {
  const uint64_t per = (rows + gridDim.x - 1) / gridDim.x, r0 = uint64_t(blockIdx.x) * per;
  if (r0 >= rows) return;
  const uint64_t end = r0 + per < rows ? r0 + per : rows, n = (end - r0) * units, first = r0 * units;
  if (per == 1) {
    for (uint64_t j = threadIdx.x; j < units; j += blockDim.x) store(first + j, j, load(first + j, j));
    return;
  }
  auto walk = [&](auto count, auto u) {
    using I = decltype(count);
    for (I i0 = threadIdx.x; i0 < count; i0 += I(kBandGroup) * blockDim.x) {
      decltype(load(first, uint64_t(0))) v[kBandGroup];
#pragma unroll
      for (int q = 0; q < kBandGroup; ++q) {
        const I i = i0 + I(q) * blockDim.x;
        if (i < count) v[q] = load(first + i, uint64_t(i % u));
      }
#pragma unroll
      for (int q = 0; q < kBandGroup; ++q) {
        const I i = i0 + I(q) * blockDim.x;
        if (i < count) store(first + i, uint64_t(i % u), v[q]);
      }
    }
  };
  if (n <= 0xffffffffull && units <= 0xffffffffull)
    walk(uint32_t(n), uint32_t(units));
  else
    walk(n, units);
}

// C = op(A) op(B) for the three products of a layer. 256 threads compute a TILE x TILE block
// of C, (TILE/16)^2 outputs each. Small layers get smaller tiles (see the launcher) so that
// the grid still covers the GPU: with 64x64 tiles the S network's first layer ran on 4 blocks.
enum GemmMode { kForward = 0, kWeightGrad = 1, kErrorPrev = 2 };
constexpr int BK = 16;

// The multiply-adds of one BK-deep slice of a tile: thread (tx, ty) of 16 x 16 owns a TM x TM
// block of the result. Shared by gemmKernel and the fused kernel's tiles (fused_step.cu).
template <typename T, int TM, int LD> __device__ __forceinline__ void tileMultiply(T (&acc)[TM][TM], const T (*As)[LD], const T (*Bs)[LD], int tx, int ty) {
#pragma unroll
  for (int k = 0; k < BK; ++k) {
    T a[TM], b[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      a[i] = As[k][ty * TM + i];
      b[i] = Bs[k][tx * TM + i];
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TM; ++j) acc[i][j] += a[i] * b[j];
  }
}

// Thread (tx, ty)'s TM x TM block of the tile at (bm, bn) of an M x N product of layer l (C)
// and the one below (P), through its epilogue: z = act(sum + b); dw = sum (unless `keepDw` is
// false: a folded SGD step writes no dw), then `afterDw(e, sum)` at element e (the in-place
// update); d[l-1] = sum * act'(z[l-1]). Shared by gemmKernel and the fused kernel's tiles.
template <int MODE, typename T, int TM, class AfterDw>
__device__ __forceinline__ void storeTile(const T (&acc)[TM][TM], const nna_bound_layer<T>& C, const nna_bound_layer<T>& P, uint64_t bm, uint64_t bn, uint64_t M, uint64_t N,
                                          int tx, int ty, bool keepDw, AfterDw afterDw) {
  const uint64_t n = C.units, m = C.fan_in;
  for (int i = 0; i < TM; ++i) {
    const uint64_t r = bm + ty * TM + i;
    if (r >= M) continue;
    for (int j = 0; j < TM; ++j) {
      const uint64_t c = bn + tx * TM + j;
      if (c >= N) continue;
      if (MODE == kForward) {
        activateAt(C, r * n + c, acc[i][j] + C.b[c]);
      } else if (MODE == kWeightGrad) {
        if (keepDw) C.dw[r * m + c] = acc[i][j];
        afterDw(r * m + c, acc[i][j]);
      } else {
        P.d[r * m + c] = acc[i][j] * activationGradAt(P, r * m + c);
      }
    }
  }
}

// The product of layer l in MODE: its sizes (C = op(A) op(B) is M x N, K deep) and its operands
// by index, shared by gemmKernel and the tensor-core kernels (tf32_kernels.cuh).
template <typename T, int MODE> struct LayerProduct {
  nna_bound_layer<T> C, P;
  uint64_t n, m, M, N, K;
  __device__ LayerProduct(void* base, uint32_t l, uint64_t rows) : C(bindModel<T>(base, l)), P(bindModel<T>(base, l - 1)) {
    n = C.units;
    m = C.fan_in;
    M = MODE == kWeightGrad ? n : rows;
    N = MODE == kForward ? n : m;
    K = MODE == kForward ? m : MODE == kWeightGrad ? rows : n;
  }
  __device__ T A(uint64_t i, uint64_t k) const { return MODE == kForward ? P.z[i * m + k] : MODE == kWeightGrad ? C.d[k * n + i] : C.d[i * n + k]; }
  __device__ T B(uint64_t k, uint64_t j) const { return MODE == kForward ? C.w[j * m + k] : MODE == kWeightGrad ? P.z[k * m + j] : C.w[k * m + j]; }
  // The BK-deep slices at k0 of the BM-row block at bm and the BN-column block at bn, zero
  // outside the product, into As[k][row] and Bs[k][col] (256 threads).
  template <int BM, int BN, int LD> __device__ void loadSlices(T (*As)[LD], T (*Bs)[LD], uint64_t bm, uint64_t bn, uint64_t k0) const {
#pragma unroll
    for (int q = 0; q < BM / 16; ++q) {  // BM * BK = 256 * (BM / 16) elements of each tile
      const int e = threadIdx.x + 256 * q;
      const int ar = e / BK, ak = e % BK;  // A: consecutive threads walk k
      As[ak][ar] = (bm + ar < M && k0 + ak < K) ? A(bm + ar, k0 + ak) : T(0);
      const int bk = e / BN, bc = e % BN;  // B: consecutive threads walk j
      Bs[bk][bc] = (k0 + bk < K && bn + bc < N) ? B(k0 + bk, bn + bc) : T(0);
    }
  }
};

// `fold` (weight gradients of SGD training): w -= lr * sum in the epilogue instead of writing dw,
// as the cuBLAS product and the CPU backend do; the caller computes d[l-1] from the old w first.
template <typename T, int MODE, int TILE> __global__ void __launch_bounds__(256) gemmKernel(void* base, uint32_t l, uint64_t rows, bool fold, Hyper<T> hp, const double* lrs) {
  constexpr int BM = TILE, BN = TILE, TM = TILE / 16;
  const LayerProduct<T, MODE> g(base, l, rows);
  __shared__ T As[BK][BM];
  __shared__ T Bs[BK][BN];
  const uint64_t bm = uint64_t(blockIdx.y) * BM, bn = uint64_t(blockIdx.x) * BN;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  T acc[TM][TM] = {};
  for (uint64_t k0 = 0; k0 < g.K; k0 += BK) {
    g.template loadSlices<BM, BN, BM>(As, Bs, bm, bn, k0);
    __syncthreads();
    tileMultiply<T, TM, BM>(acc, As, Bs, tx, ty);
    __syncthreads();
  }
  // `fold`: w -= lr * sum in the epilogue instead of writing dw (model blockIdx.z's lr: lrs[z]
  // where the run has per-model rates, model_lrs.cuh).
  if (fold && lrs) hp = withLr(hp, lrs[blockIdx.z]);
  storeTile<MODE>(acc, g.C, g.P, bm, bn, g.M, g.N, tx, ty, !fold, [&](uint64_t e, T v) {
    if (fold) updateParam<T>(NNA_SGD, g.C.w + e, v, nullptr, nullptr, hp);
  });
}

// The epilogues of the tiled kernel, for products made by cuBLAS (which writes the bare sum):
// z_l = act(z_l + b_l) after the forward product (keeping z_l + b_l where f' needs it),
// d_{l-1} *= act'(z_{l-1}) after the error one (activations.h).
// A block binds its model's layer once and takes a band of rows, its threads spread over the
// band's elements (forBandElements): K-model arenas launch a few blocks a model, where a block a row
// (K = 256 S models: 25,600 blocks, each binding from the header for 10 or 128 elements) spent
// its time binding, not computing. `half`, when given (precision bf16 / fp16), also receives the
// result rounded to 16 bits: the next products' operand, written in the same pass instead of a
// cast pass before each product.
template <typename T> __global__ void biasActivateKernel(void* base, uint32_t l, uint64_t rows, HalfOut half = {}) {
  const nna_bound_layer<T> C = bindModel<T>(base, l);
  auto finish = [&](uint64_t e, T x) {
    activateAt(C, e, x);
    if (half) half.store(e, float(C.z[e]));
  };
  const uint64_t per = (rows + gridDim.x - 1) / gridDim.x;
  if (per == 1) {  // a block a row (M: 4 values a thread): every load before the first store, which
                   // the compiler cannot move them past (z may alias b for all it knows)
    const uint64_t r = blockIdx.x, n = C.units;
    if (r >= rows) return;
    constexpr int kGroup = 4;
    for (uint64_t j0 = threadIdx.x; j0 < n; j0 += uint64_t(kGroup) * blockDim.x) {
      T v[kGroup];
#pragma unroll
      for (int q = 0; q < kGroup; ++q) {
        const uint64_t j = j0 + uint64_t(q) * blockDim.x;
        if (j < n) v[q] = C.z[r * n + j] + C.b[j];
      }
#pragma unroll
      for (int q = 0; q < kGroup; ++q) {
        const uint64_t j = j0 + uint64_t(q) * blockDim.x;
        if (j < n) finish(r * n + j, v[q]);
      }
    }
    return;
  }
  forBandElements(
      rows, C.units, [&](uint64_t e, uint64_t j) { return C.z[e] + C.b[j]; }, [&](uint64_t e, uint64_t, T x) { finish(e, x); });
}
template <typename T> __global__ void activationGradKernel(void* base, uint32_t l, uint64_t rows, HalfOut half = {}) {
  const nna_bound_layer<T> P = bindModel<T>(base, l - 1);
  for (uint64_t e = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; e < rows * P.units; e += uint64_t(gridDim.x) * blockDim.x) {
    const T v = P.d[e] * activationGradAt(P, e);
    P.d[e] = v;
    if (half) half.store(e, float(v));
  }
}

// The copies of d a Train run's outputWarpKernel makes beside d (rows of up to 32 units): the
// 16-bit copy the error product reads, and where K models' SGD steps fold with their own lrs
// (cuda_train.cu scalesD), d times model z's lr (hp's, scheduled) for the weight-gradient
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
template <typename T, unsigned W = 32>
__global__ void outputWarpKernel(void* base, uint32_t last, uint64_t rows, uint64_t scaleRows, OutputLoss ol, bool grad, bool accumulate, uint64_t step, int fracBits,
                                 OutputCopies<T> copies = {}, bool addBias = false) {
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
    if constexpr (W < 32) return;  // launched for rows of up to W units only (cuda_train.cu output)
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

// db = column sums of d: 32 columns per block (one per lane), 8 row stripes per column, then a
// fixed-order reduction of the 8 partial sums, so the result is deterministic.
constexpr int kBiasCols = 32, kBiasStripes = 8;

// stepBiases: also take the optimizer step of the biases here (when the weights' step was
// folded into their gradient product, this saves the update kernel's launch).
// The launch uses 32 row stripes (1024 threads): with 8, each thread of the L network's bias
// gradients walked 256 rows one dependent load at a time.
constexpr int kBiasStripesWide = 32;

// applyGrad: d holds the error product's raw result, which this pass first multiplies by the
// activation's derivative in place (activationGradKernel's work, the same expression) and, for
// precision bf16 / fp16, rounds into `half`: one pass over d instead of two.
// lrScaled (with applyGrad): the copy the weight-gradient product reads holds d times the model's
// lr, `half` or, without one, `scaled`, element (row r, unit j) of model z at z * scaledStride +
// r * copyRow + j in either (copyRow: units, or units x K where the models' rows interleave for
// one product over all of them): K models whose lrs differ fold their SGD step into the product
// with alpha -1 (cuda_train.cu scalesD). d keeps d.
// Stripes: row stripes a column (blockDim.y); kBiasStripes where K models give many blocks of
// few rows (cuda_train.cu biasGrad): a 1,024-thread block's tail (one warp summing 32 partial
// sums, then the bias step) held half an SM.
template <typename T, int Stripes = kBiasStripesWide>
__global__ void __launch_bounds__(kBiasCols* Stripes) biasGradKernel(void* base, uint32_t l, uint64_t rows, bool stepBiases, uint32_t optimizer, Hyper<T> hp, const double* lrs,
                                                                     bool applyGrad, HalfOut half, bool lrScaled, T* scaled, uint64_t scaledStride, uint64_t copyRow) {
  if (scaled) scaled += blockIdx.z * scaledStride;
  if (lrs) hp = withLr(hp, lrs[blockIdx.z]);  // model_lrs.cuh
  const nna_bound_layer<T> C = bindModel<T>(base, l);
  __shared__ T part[Stripes][kBiasCols];
  const uint64_t j = uint64_t(blockIdx.x) * kBiasCols + threadIdx.x;
  T s = T(0);
  // Rows in groups of kBiasUnroll, every load of a group issued before its first use: one
  // latency round a group instead of one a row (M's 1024 units give only 32 blocks, each thread
  // a long walk down its column). The sum still takes the rows in order: the same bits.
  constexpr int kBiasUnroll = 4;
  const T* act = activationGradInput(C);
  if (j < C.units)
    for (uint64_t r0 = threadIdx.y; r0 < rows; r0 += uint64_t(Stripes) * kBiasUnroll) {
      T v[kBiasUnroll], x[kBiasUnroll];
#pragma unroll
      for (int u = 0; u < kBiasUnroll; ++u) {
        const uint64_t r = r0 + uint64_t(u) * Stripes, e = r * C.units + j;
        if (r < rows) {
          v[u] = C.d[e];
          if (applyGrad) x[u] = act[e];
        }
      }
#pragma unroll
      for (int u = 0; u < kBiasUnroll; ++u) {
        const uint64_t r = r0 + uint64_t(u) * Stripes, e = r * C.units + j;
        if (r >= rows) break;
        if (applyGrad) {
          v[u] *= activationGrad<T>(C.activation, x[u], T(C.act_param));
          C.d[e] = v[u];
          const uint64_t ec = lrScaled ? r * copyRow + j : e;
          const T copy = lrScaled ? v[u] * hp.lr : v[u];
          if (half)
            half.store(ec, float(copy));
          else if (scaled)
            scaled[ec] = copy;
        }
        s += v[u];
      }
    }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || j >= C.units) return;
  T total = T(0);
  for (int y = 0; y < Stripes; ++y) total += part[y][threadIdx.x];
  C.db[j] = total;
  if (stepBiases) updateBias<T>(optimizer, C, j, total, forBiases(hp));
}

// The optimizer step of layer l: weights, then biases. `scale`: model z's gradient scale of a
// clipping or loss-scaled run (clipScaleKernel, lossScaleKernel), or null; NaN there skips the
// step (its scaled gradients overflowed: nothing moves, the optimizer state included). `half`:
// precision bf16 / fp16's copy of w (model blockIdx.z's), written in the same pass as the master, or none.
template <typename T> __global__ void updateKernel(void* base, uint32_t l, uint32_t optimizer, Hyper<T> hp, const double* lrs, const double* scale, HalfOut half) {
  if (lrs) hp = withLr(hp, lrs[blockIdx.z]);
  if (scale && isnan(scale[blockIdx.z])) return;
  if (scale) hp.gs = T(scale[blockIdx.z]);
  const Hyper<T> hb = forBiases(hp);
  const nna_bound_layer<T> C = bindModel<T>(base, l);
  const uint64_t nw = C.w_count, first = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x, stride = uint64_t(gridDim.x) * blockDim.x;
  const Hyper<T> hw = C.op == NNA_OP_DENSE ? hp : hb;  // a norm's gain decays like a bias (not a 2-D parameter)
  // The weights kUpdateUnroll at a time, every load of a round issued before the first update:
  // one memory latency a round, not one a weight. Each weight's arithmetic is updateParam's: the same bits.
  constexpr int kUpdateUnroll = 4;
  for (uint64_t e0 = first; e0 < nw; e0 += stride * kUpdateUnroll) {
    T w[kUpdateUnroll], g[kUpdateUnroll], m[kUpdateUnroll], v[kUpdateUnroll];
#pragma unroll
    for (int u = 0; u < kUpdateUnroll; ++u) {
      const uint64_t e = e0 + u * stride;
      if (e >= nw) break;
      w[u] = C.w[e];
      g[u] = C.dw[e];
      m[u] = C.mw ? C.mw[e] : T(0);
      v[u] = C.vw ? C.vw[e] : T(0);
    }
#pragma unroll
    for (int u = 0; u < kUpdateUnroll; ++u) {
      const uint64_t e = e0 + u * stride;
      if (e >= nw) break;
      stepParam<T>(optimizer, w[u], g[u], m[u], v[u], hw);
      C.w[e] = w[u];
      if (C.mw) C.mw[e] = m[u];
      if (C.vw) C.vw[e] = v[u];
      if (half) half.store(e, float(w[u]));
    }
  }
  for (uint64_t i = first; i < C.b_count; i += stride) updateBias<T>(optimizer, C, i, C.db[i], hb);
}

// The bias steps of the layers in `layers` (bit l: layer l), one launch a step: SGD runs whose
// weight step was folded into its product and whose db came from a cuBLASLt epilogue (the error
// product of the layer above), where the bias-gradient kernel that would have taken it did not run.
template <typename T> __global__ void biasStepsKernel(void* base, uint64_t layers, uint32_t optimizer, Hyper<T> hp, const double* lrs) {
  const uint32_t l = blockIdx.y + 1;
  if (!(layers >> l & 1u)) return;
  if (lrs) hp = withLr(hp, lrs[0]);  // one model (cuBLASLt's products: K = 1)
  const Hyper<T> hb = forBiases(hp);
  const nna_bound_layer<T> C = bindModel<T>(base, l);
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < C.units; i += uint64_t(gridDim.x) * blockDim.x) updateBias<T>(optimizer, C, i, C.db[i], hb);
}

// db of layer l from where a compact plan's cuBLASLt error product of layer l + 1 left it
// (LtScratch::parked), and with `stepBiases` the bias step biasStepsKernel takes in a full plan:
// the same values, so that compact and full plans train to the same bits.
template <typename T> __global__ void parkedBiasKernel(void* base, uint32_t l, const T* parked, bool stepBiases, uint32_t optimizer, Hyper<T> hp, const double* lrs) {
  if (lrs) hp = withLr(hp, lrs[0]);
  const Hyper<T> hb = forBiases(hp);
  const nna_bound_layer<T> C = bindModel<T>(base, l);
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < C.units; i += uint64_t(gridDim.x) * blockDim.x) {
    const T g = parked[i];
    C.db[i] = g;
    if (stepBiases) updateBias<T>(optimizer, C, i, g, hb);
  }
}

// Clipping by global norm (and loss scaling's overflow check), deterministic: the blocks of a
// launch (grid normBlocks(l) x 1 x K) sum the squares of their share of layer l's dw and db in
// double into partials[(z * layers + l) * kNormBlocks + block], in a fixed order; the scale
// kernels add every slot of a model in a fixed order. Slots a layer's grid leaves unused stay
// zero (ClipScratch clears them). Enough blocks to fill the GPU for a large layer: with 64, each
// thread of a 4096 x 4096 layer made a long serial walk.
constexpr unsigned kNormBlocks = 512;
inline unsigned normBlocks(uint64_t elements) {
  const uint64_t b = (elements + kThreads * 16 - 1) / (kThreads * 16);  // about 16 elements a thread
  return unsigned(b < 1 ? 1 : b > kNormBlocks ? kNormBlocks : b);
}

// The sum of every thread's v over a block of kThreads in a fixed tree (every thread calls it;
// the same bits run to run). Every thread gets the total.
__device__ __forceinline__ double blockTreeSum(double v) {
  __shared__ double part[kThreads];
  part[threadIdx.x] = v;
  __syncthreads();
  for (unsigned w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  return part[0];
}

template <typename T> __global__ void __launch_bounds__(kThreads) sumSquaresKernel(void* base, uint32_t l, uint32_t layers, double* partials) {
  const nna_bound_layer<T> C = bindModel<T>(base, l);
  const uint64_t nw = C.w_count, total = nw + C.b_count;
  double s = 0;
  for (uint64_t e = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; e < total; e += uint64_t(gridDim.x) * blockDim.x) {
    const double g = e < nw ? double(C.dw[e]) : double(C.db[e - nw]);
    s += g * g;
  }
  const double sum = blockTreeSum(s);
  if (threadIdx.x == 0) partials[(uint64_t(blockIdx.z) * layers + l) * kNormBlocks + blockIdx.x] = sum;
}

// Model z's sum of squares from its partials, by a whole block (every thread calls it): each
// thread adds its slots in order, then the fixed tree.
__device__ __forceinline__ double modelSquares(const double* partials, uint32_t layers, unsigned z) {
  const uint64_t n = uint64_t(layers) * kNormBlocks, first = uint64_t(z) * n;
  double s = 0;
  for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) s += partials[first + i];
  return blockTreeSum(s);
}

// One block (kThreads) per model: the step's global norm (recorded at norms[z]) and its clip factor.
static __global__ void __launch_bounds__(kThreads) clipScaleKernel(const double* partials, uint32_t layers, double maxNorm, double* scale, double* norms) {
  const unsigned z = blockIdx.x;
  const double total = modelSquares(partials, layers, z);
  if (threadIdx.x != 0) return;
  const double norm = sqrt(total);
  norms[z] = norm;
  scale[z] = clipScale(maxNorm, norm);
}

// Dynamic loss scaling (one model, one block; loss_scale.h): the step's gradients are S times
// the true ones. Their norm divided by S is the step's norm (recorded); if it is not finite the
// step is skipped (scale NaN: updateKernel leaves everything), else the update multiplies by the
// clip factor (maxNorm > 0: clipping) over S. Then the state moves on, as GradScaler.update() does.
static __global__ void __launch_bounds__(kThreads) lossScaleKernel(const double* partials, uint32_t layers, double maxNorm, double* scale, double* norms, LossScale* state) {
  const double total = modelSquares(partials, layers, 0);
  if (threadIdx.x != 0) return;
  const double s = state->scale, norm = sqrt(total) / s;
  norms[0] = norm;
  const bool finite = isfinite(norm);
  scale[0] = finite ? (maxNorm > 0 ? clipScale(maxNorm, norm) : 1.0) / s : nan("");
  state->afterStep(finite);
}

// d[L] times the loss scale (in place, so that db and dw come out scaled too), rounded into its
// 16-bit copy: the first of a loss-scaled step's backward operands.
static __global__ void scaleToHalfKernel(float* d, HalfOut half, uint64_t n, const LossScale* state) {
  const float s = float(state->scale);
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const float v = d[i] * s;
    d[i] = v;
    half.store(i, v);
  }
}

}  // namespace nna
