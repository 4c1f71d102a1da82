// run_kernels.cuh: a run's bookkeeping on the device: the stats region's reset and fold, the
// non-finite scan of the parameters after a training run, the gather of a shuffled batch from the
// resident data set into z[0] and y.
#pragma once
#include "kernel_base.cuh"

namespace nna {

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

}  // namespace nna
