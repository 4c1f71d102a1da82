// output_head.cuh: a narrow output layer (up to 32 units) of the per-layer path in one launch, its
// product included. Through cuBLAS, M's 10-unit output layer took five launches on the critical
// path of a step (the product and its split-K reduction, bias + activation, the loss, d's bf16
// copy): ~16 us of an 80 us bf16 step on the H200 (ncu), for 0.5% of its arithmetic. Here a block
// per row computes the row's products with FP32 sums (FP64 in a float64 arena) from the operands
// the run's products read: the 16-bit copies of z[L-1] and w[L] in bf16 / fp16, the arena's values
// otherwise (tf32 and tf32x3 too: this layer is too small for tensor cores to matter), adds the
// bias, applies the activation, and finishes the row as outputWarpKernel does (output_row.cuh),
// writing d's 16-bit copy where the run has one. Each sum has a fixed order (threads, shuffle
// tree, warps): bit-identical run to run, and in every run that computes this layer (a compact
// plan or a memory scheduler splits it from the row's loss: `finish`).
#pragma once
#include <type_traits>

#include "layer_kernels.cuh"

namespace nna {

constexpr uint64_t kHeadMaxUnits = 32;

constexpr unsigned kHeadThreads = 128;  // a block a row: its threads share the fan-in

// Operand values as T: the arena's own (E = T), or a run's 16-bit copies (E = __nv_bfloat16 /
// __half, as the products of bf16 / fp16 runs read them).
template <typename T, typename E>
__device__ __forceinline__ T headValue(E v) {
  if constexpr (std::is_same_v<E, T>) return v;
  else return T(float(v));
}
// Four consecutive values from 16-byte (fp32) or 8-byte (16-bit) loads.
template <typename E>
__device__ __forceinline__ float4 headQuad(const E* p, uint64_t q) {
  if constexpr (std::is_same_v<E, float>) {
    return reinterpret_cast<const float4*>(p)[q];
  } else {
    using E2 = std::conditional_t<std::is_same_v<E, __half>, __half2, __nv_bfloat162>;
    const HalfQuad<E2> v = reinterpret_cast<const HalfQuad<E2>*>(p)[q];
    float2 a, b;
    if constexpr (std::is_same_v<E, __half>) { a = __half22float2(v.lo); b = __half22float2(v.hi); }
    else { a = __bfloat1622float2(v.lo); b = __bfloat1622float2(v.hi); }
    return make_float4(a.x, a.y, b.x, b.y);
  }
}

// Thread t's share (fan-in elements t, t + kHeadThreads, ...) of the NB dot products x . w[u]
// (u < NB; rows past the layer's last are its last again, so that every load is unconditional
// and an iteration issues all of them at once: with a guarded load per unit, each waited for the
// one before). Four values a load where the bytes allow.
template <typename T, unsigned NB, typename E>
__device__ __forceinline__ void headDots(const E* x, const E* w, uint64_t n, uint64_t m, unsigned t, T (&acc)[NB]) {
  const E* row[NB];
#pragma unroll
  for (unsigned u = 0; u < NB; ++u) {
    acc[u] = T(0);
    row[u] = w + (u < n ? u : n - 1) * m;
  }
  uint64_t k = t;
  if constexpr (!std::is_same_v<E, double>) {
    constexpr uintptr_t align = 4 * sizeof(E) - 1;
    if (m % 4 == 0 && (reinterpret_cast<uintptr_t>(x) & align) == 0 && (reinterpret_cast<uintptr_t>(w) & align) == 0) {
      for (uint64_t q = t; q < m / 4; q += kHeadThreads) {
        const float4 a = headQuad(x, q);
        float4 b[NB];
#pragma unroll
        for (unsigned u = 0; u < NB; ++u) b[u] = headQuad(row[u], q);
#pragma unroll
        for (unsigned u = 0; u < NB; ++u) acc[u] += a.x * b[u].x + a.y * b[u].y + a.z * b[u].z + a.w * b[u].w;
      }
      k = m;  // every value taken
    }
  }
  for (; k < m; k += kHeadThreads) {
    const T a = headValue<T>(x[k]);
    T b[NB];
#pragma unroll
    for (unsigned u = 0; u < NB; ++u) b[u] = headValue<T>(row[u][k]);
#pragma unroll
    for (unsigned u = 0; u < NB; ++u) acc[u] += a * b[u];
  }
}

// NB: the unit count rounded up to 8, 16 or 32 (the dots' registers); E: the operands' type
// (xHalf and wHalf: the 16-bit copies of z[L-1] and w[L] where E is 16-bit). Block r: row r. Its
// warps' sums meet in shared memory (warps in order); warp 0 finishes the row. `finish` false:
// z[L] only (the output row is then outputWarpKernel's, in a launch of its own: a memory
// scheduler's stages, a compact plan; outputRowWarp either way, so the same bits).
template <typename T, unsigned NB, typename E>
__global__ void __launch_bounds__(kHeadThreads) outputHeadKernel(void* base, uint32_t last, uint64_t rows, uint64_t scaleRows, OutputLoss ol, bool grad, bool accumulate,
                                                                 uint64_t step, int fracBits, HalfOut xHalf, HalfOut wHalf, HalfOut dHalf, bool finish) {
  constexpr unsigned kWarps = kHeadThreads / 32;
  __shared__ T part[kWarps][NB];
  const nna_bound_layer<T> O = bindModel<T>(base, last);
  const uint64_t n = O.units, m = O.fan_in;
  const E *in, *w;
  if constexpr (std::is_same_v<E, T>) {
    in = bindModel<T>(base, last - 1).z;
    w = O.w;
  } else {
    in = static_cast<const E*>(xHalf.p) + uint64_t(blockIdx.z) * xHalf.stride;
    w = static_cast<const E*>(wHalf.p) + uint64_t(blockIdx.z) * wHalf.stride;
  }
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    T acc[NB];
    headDots<T, NB>(in + r * m, w, n, m, threadIdx.x, acc);
#pragma unroll
    for (unsigned u = 0; u < NB; ++u) {
      const T v = warpSum(acc[u]);
      if (lane == 0) part[warp][u] = v;
    }
    __syncthreads();
    if (warp == 0) {
      if (lane < n) {
        T total = part[0][lane];
#pragma unroll
        for (unsigned i = 1; i < kWarps; ++i) total += part[i][lane];
        activateAt(O, r * n + lane, total + O.b[lane]);
      }
      if (finish) {
        __syncwarp();
        const RowResult res = outputRowWarp<T>(O.z + r * n, O.y + r * n, O.d + r * n, n, ol, scaleRows, grad, false);
        if (accumulate && lane == 0) accumulateRowStats(O.stats, res.loss, res.correct, r, rows, step, fracBits);
        if (grad && dHalf) {
          __syncwarp();
          if (lane < n) dHalf.store(r * n + lane, float(O.d[r * n + lane]));
        }
      }
    }
    __syncthreads();  // part is the next row's
  }
}

// The launch of outputHeadKernel for n units (n <= kHeadMaxUnits): a block a row; the operands
// from the 16-bit copies where xHalf is one.
template <typename T, typename Launch>
void launchOutputHead(uint64_t n, uint64_t rows, unsigned models, const HalfOut& xHalf, Launch&& launch) {
  const dim3 grid(rowBlocks(rows), 1, models);
  auto withNB = [&](auto e) {
    using E = decltype(e);
    if (n <= 8) launch(outputHeadKernel<T, 8, E>, grid, kHeadThreads);
    else if (n <= 16) launch(outputHeadKernel<T, 16, E>, grid, kHeadThreads);
    else launch(outputHeadKernel<T, 32, E>, grid, kHeadThreads);
  };
  if constexpr (std::is_same_v<T, float>) {
    if (xHalf && xHalf.fp16) return withNB(__half{});
    if (xHalf) return withNB(__nv_bfloat16{});
  }
  withNB(T{});
}

}  // namespace nna
