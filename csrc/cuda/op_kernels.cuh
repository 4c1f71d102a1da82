// op_kernels.cuh: the per-layer CUDA path's launches for the ops other than dense (nn_arena.h
// NNA_OPS): each row through the row rules the CPU backend calls (csrc/ops/), a thread a row,
// so a row's sums are taken in the same order and give the CPU's bits; the gain and bias
// gradients a thread a column, summed over rows in row order. Grid z: the K models.
#pragma once
#include "../include/nn_arena.h"
#include "../ops/dropout.h"
#include "../ops/norm.h"
#include "layer_kernels.cuh"

namespace nna {

// z[l] from z[l-1] (and z[from]): `train` drops (dropout), with the mask of (seed, step).
template <typename T> __global__ void opForwardKernel(void* base, uint32_t l, uint64_t rows, bool train, uint64_t seed, uint64_t step) {
  const uint64_t r = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const nna_bound_layer<T> P = bindModel<T>(base, l - 1), C = bindModel<T>(base, l);
  const uint64_t n = C.units;
  const T* x = P.z + r * n;
  T* y = C.z + r * n;
  switch (C.op) {
    case NNA_OP_LAYERNORM:
    case NNA_OP_RMSNORM: ops::normForward(x, y, C.w, C.b, n, ops::normRow(x, n, C.op_value, C.op == NNA_OP_LAYERNORM)); break;
    case NNA_OP_DROPOUT:
      if (train)
        ops::dropoutRow(x, y, r, ops::DropoutMask{seed, step, l, nna_dropout_threshold(C.op_value), n}, ops::dropoutScale<T>(C.op_value));
      else
        for (uint64_t j = 0; j < n; ++j) y[j] = x[j];
      break;
    case NNA_OP_RESIDUAL: {
      const T* k = bindModel<T>(base, C.from).z + r * n;
      for (uint64_t j = 0; j < n; ++j) y[j] = x[j] + k[j];
      break;
    }
  }
}

// dL/dz[l-1] into d[l-1] (l >= 2; f' of layer l-1 is its own backward's) from d[l]; a norm's row
// stats into `stats` (rows entries) for opParamGradKernel.
template <typename T> __global__ void opBackwardKernel(void* base, uint32_t l, uint64_t rows, uint64_t seed, uint64_t step, ops::NormRow* stats) {
  const uint64_t r = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const nna_bound_layer<T> P = bindModel<T>(base, l - 1), C = bindModel<T>(base, l);
  const uint64_t n = C.units;
  T* dx = l > 1 ? P.d + r * n : nullptr;
  const T* dy = C.d + r * n;
  switch (C.op) {
    case NNA_OP_LAYERNORM:
    case NNA_OP_RMSNORM: {
      const bool centred = C.op == NNA_OP_LAYERNORM;
      const ops::NormRow s = ops::normRow(P.z + r * n, n, C.op_value, centred);
      stats[uint64_t(blockIdx.z) * rows + r] = s;
      if (dx) ops::normBackward(P.z + r * n, dy, C.w, dx, n, s, centred);
      break;
    }
    case NNA_OP_DROPOUT:
      if (dx) ops::dropoutRow(dy, dx, r, ops::DropoutMask{seed, step, l, nna_dropout_threshold(C.op_value), n}, ops::dropoutScale<T>(C.op_value));
      break;
    case NNA_OP_RESIDUAL:
      if (dx)
        for (uint64_t j = 0; j < n; ++j) dx[j] = dy[j];
      break;
  }
}

// A norm's gain and bias gradients: column j summed over the rows in row order (the CPU's order).
template <typename T> __global__ void opParamGradKernel(void* base, uint32_t l, uint64_t rows, const ops::NormRow* stats) {
  const uint64_t j = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x;
  const nna_bound_layer<T> P = bindModel<T>(base, l - 1), C = bindModel<T>(base, l);
  if (j >= C.units) return;
  const uint64_t n = C.units;
  const ops::NormRow* s = stats + uint64_t(blockIdx.z) * rows;
  double g = 0, bias = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    const double dy = double(C.d[r * n + j]);
    g += dy * ops::normHat(double(P.z[r * n + j]), s[r]);
    bias += dy;
  }
  if (C.dw) C.dw[j] = T(g);
  if (C.db) C.db[j] = T(bias);
}

// d[k] += d[r]: residual layer r adds z[k], so dL/dz[k] takes its d too (one launch per such
// layer, in layer order, as the CPU adds them), before layer k's backward applies its f'.
template <typename T> __global__ void residualAddKernel(void* base, uint32_t k, uint32_t r, uint64_t rows) {
  const nna_bound_layer<T> P = bindModel<T>(base, k), R = bindModel<T>(base, r);
  const uint64_t n = rows * P.units;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) P.d[i] += R.d[i];
}

}  // namespace nna
