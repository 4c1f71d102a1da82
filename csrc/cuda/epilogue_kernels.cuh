// epilogue_kernels.cuh: the passes after a product made by cuBLAS (which writes the bare sum):
// the forward's bias and activation, the error's activation derivative.
#pragma once
#include "kernel_base.cuh"

namespace nna {

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

}  // namespace nna
