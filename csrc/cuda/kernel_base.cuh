// kernel_base.cuh: what every kernel of the per-layer path shares (layer_kernels.cuh gathers
// them): the block size, a model's binding, the 16-bit copies' writer (HalfOut), the launch
// shapes and the walk of a band of rows. Each kernel takes the arena's device base and binds what
// it needs from the header with nna_bind; the per-element math is csrc/train/math.h, shared with
// the CPU backend and the fused step.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../include/nn_arena.h"
#include "../train/loss_scale.h"
#include "../train/math.h"
#include "output_row.cuh"

namespace nna {

constexpr int kThreads = 256;

// K-model arenas: every kernel of the per-layer path but the gather runs over grid z = models
// and binds model blockIdx.z's copies (nna_bind_model; shared regions are the one copy). One
// model's blocks do exactly what a one-model launch does, so each model's results are a
// one-model run's.
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

}  // namespace nna
