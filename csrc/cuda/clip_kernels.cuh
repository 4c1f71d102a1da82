// clip_kernels.cuh: clipping by global norm and loss scaling's overflow check: the squares of
// the gradients summed in a fixed order, the clip and loss scales, d scaled into its fp16 copy.
#pragma once
#include "kernel_base.cuh"

namespace nna {

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
