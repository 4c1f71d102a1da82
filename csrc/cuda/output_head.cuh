// output_head.cuh: a narrow output layer (up to 32 units) of the per-layer path in one launch, its
// product included. Through cuBLAS, M's 10-unit output layer took five launches on the critical
// path of a step (the product and its split-K reduction, bias + activation, the loss, d's bf16
// copy), each bound by latency, for almost none of the step's arithmetic. Here a block
// per row computes the row's products with FP32 sums (FP64 in a float64 arena) from the operands
// the run's products read: in bf16 / fp16 the 16-bit roundings of z[L-1] and w[L] (their copies,
// or the arena's values rounded as they load: HeadRead), the arena's values otherwise (tf32 and
// tf32x3 too: this layer is too small for tensor cores to matter), adds the
// bias, applies the activation, and finishes the row as outputWarpKernel does (output_row.cuh),
// writing d's 16-bit copy where the run has one. Each sum has a fixed order (threads, shuffle
// rounds, warps): bit-identical run to run, and in every run that computes this layer (a compact
// plan or a memory scheduler splits it from the row's loss: `finish`).
#pragma once
#include <type_traits>

#include "../train/run_modes.h"  // kHeadMaxUnits
#include "layer_kernels.cuh"

namespace nna {

constexpr unsigned kHeadThreads = 128;  // a block a row: its threads share the fan-in

// v rounded to R (to nearest, ties to even, as the 16-bit copies' stores round: HalfOut::store);
// R = float: v itself.
template <typename R> __device__ __forceinline__ float roundedTo(float v) {
  if constexpr (std::is_same_v<R, __nv_bfloat16>)
    return __bfloat162float(__float2bfloat16_rn(v));
  else if constexpr (std::is_same_v<R, __half>)
    return __half2float(__float2half_rn(v));
  else
    return v;
}
// Operand values as T: the arena's own (E = R = T), a run's 16-bit copies (E = R = __nv_bfloat16
// / __half, as the products of bf16 / fp16 runs read them), or the arena's fp32 values rounded to
// R as they load (E = float: the same values as the copies, which the run then never makes).
template <typename T, typename R, typename E> __device__ __forceinline__ T headValue(E v) {
  if constexpr (!std::is_same_v<E, T>)
    return T(float(v));
  else if constexpr (std::is_same_v<R, T>)
    return v;
  else
    return T(roundedTo<R>(float(v)));
}
// An operand of this layer's products: the arena's own values (E = T), or model blockIdx.z's
// 16-bit copy of them.
template <typename E, typename T> __device__ __forceinline__ const E* headOperand(const T* own, const HalfOut& copy) {
  if constexpr (std::is_same_v<E, T>)
    return own;
  else
    return static_cast<const E*>(copy.p) + uint64_t(blockIdx.z) * copy.stride;
}

// Four consecutive values from 16-byte (fp32, rounded to R) or 8-byte (16-bit) loads.
template <typename R, typename E> __device__ __forceinline__ float4 headQuad(const E* p, uint64_t q) {
  if constexpr (std::is_same_v<E, float>) {
    const float4 v = reinterpret_cast<const float4*>(p)[q];
    return make_float4(roundedTo<R>(v.x), roundedTo<R>(v.y), roundedTo<R>(v.z), roundedTo<R>(v.w));
  } else {
    using E2 = std::conditional_t<std::is_same_v<E, __half>, __half2, __nv_bfloat162>;
    const HalfQuad<E2> v = reinterpret_cast<const HalfQuad<E2>*>(p)[q];
    float2 a, b;
    if constexpr (std::is_same_v<E, __half>) {
      a = __half22float2(v.lo);
      b = __half22float2(v.hi);
    } else {
      a = __bfloat1622float2(v.lo);
      b = __bfloat1622float2(v.hi);
    }
    return make_float4(a.x, a.y, b.x, b.y);
  }
}

// Thread t's share (fan-in elements t, t + kHeadThreads, ...) of the NB dot products x . w[u]
// (u < NB; rows past the layer's last are its last again, so that every load is unconditional
// and an iteration issues all of them at once: with a guarded load per unit, each waited for the
// one before). Four values a load where the bytes allow.
template <typename T, unsigned NB, typename R, typename E> __device__ __forceinline__ void headDots(const E* x, const E* w, uint64_t n, uint64_t m, unsigned t, T (&acc)[NB]) {
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
        const float4 a = headQuad<R>(x, q);
        float4 b[NB];
#pragma unroll
        for (unsigned u = 0; u < NB; ++u) b[u] = headQuad<R>(row[u], q);
#pragma unroll
        for (unsigned u = 0; u < NB; ++u) acc[u] += a.x * b[u].x + a.y * b[u].y + a.z * b[u].z + a.w * b[u].w;
      }
      k = m;  // every value taken
    }
  }
  for (; k < m; k += kHeadThreads) {
    const T a = headValue<T, R>(x[k]);
    T b[NB];
#pragma unroll
    for (unsigned u = 0; u < NB; ++u) b[u] = headValue<T, R>(row[u][k]);
#pragma unroll
    for (unsigned u = 0; u < NB; ++u) acc[u] += a * b[u];
  }
}

// d[L-1] of row r from the output layer's d (dRow, in shared memory: units past n hold zero)
// and its weights w (the products' operands, as headDots reads them): for each input c,
// sum over u in order of dRow[u] w[u][c] (one FMA each), times f' of layer L-1, into d[L-1]
// and its 16-bit copy (dPrevHalf) where the run has one. With 10 units this is a 10-deep
// product: through cuBLAS it and the activation-gradient pass after it were two launches on the
// step's critical path. Thread t takes inputs t, t + kHeadThreads, ... (four at a time where the
// bytes allow; the same arithmetic either way).
template <typename T, unsigned NB, typename R, typename E>
__device__ __forceinline__ void headErrorRow(const nna_bound_layer<T>& P, const E* w, const T* dRow, uint64_t n, uint64_t m, uint64_t r, const HalfOut& dPrevHalf) {
  const T* f = activationGradInput(P) + r * m;
  T* d = P.d + r * m;
  const E* row[NB];
#pragma unroll
  for (unsigned u = 0; u < NB; ++u) row[u] = w + (u < n ? u : n - 1) * m;  // unconditional loads (headDots)
  const T p = T(P.act_param);
  uint64_t k = threadIdx.x;
  if constexpr (std::is_same_v<T, float>) {
    constexpr uintptr_t align = 4 * sizeof(E) - 1;
    if (m % 4 == 0 && (reinterpret_cast<uintptr_t>(w) & align) == 0 && (reinterpret_cast<uintptr_t>(d) & 15) == 0 && (reinterpret_cast<uintptr_t>(f) & 15) == 0 &&
        (!dPrevHalf || dPrevHalf.quads())) {
      for (uint64_t q = threadIdx.x; q < m / 4; q += kHeadThreads) {
        float4 b[NB];
#pragma unroll
        for (unsigned u = 0; u < NB; ++u) b[u] = headQuad<R>(row[u], q);
        const float4 g = reinterpret_cast<const float4*>(f)[q];
        float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (unsigned u = 0; u < NB; ++u) {
          if (u >= n) break;
          a = make_float4(fmaf(dRow[u], b[u].x, a.x), fmaf(dRow[u], b[u].y, a.y), fmaf(dRow[u], b[u].z, a.z), fmaf(dRow[u], b[u].w, a.w));
        }
        const float4 v = make_float4(a.x * activationGrad<T>(P.activation, g.x, p), a.y * activationGrad<T>(P.activation, g.y, p), a.z * activationGrad<T>(P.activation, g.z, p),
                                     a.w * activationGrad<T>(P.activation, g.w, p));
        reinterpret_cast<float4*>(d)[q] = v;
        if (dPrevHalf) dPrevHalf.storeQuad(r * (m / 4) + q, v);
      }
      k = m;  // every input taken
    }
  }
  for (; k < m; k += kHeadThreads) {
    T b[NB];
#pragma unroll
    for (unsigned u = 0; u < NB; ++u) b[u] = headValue<T, R>(row[u][k]);
    const T g = f[k];
    T a = T(0);
#pragma unroll
    for (unsigned u = 0; u < NB; ++u) {
      if (u >= n) break;
      a = fma(dRow[u], b[u], a);
    }
    const T v = a * activationGrad<T>(P.activation, g, p);
    d[k] = v;
    if (dPrevHalf) dPrevHalf.store(r * m + k, float(v));
  }
}

// The warp's sums of NB values (NB a power of two, <= 32) spread over its lanes: each round
// halves the values a lane holds, the lanes whose bit `o` is set keeping the upper half and adding
// their partner's (NB - 1 shuffles in all where NB separate warp sums take 5 NB), the rounds left
// add as warpSum does. Lane t ends with the sum of value t / (32 / NB): the same in each of those lanes.
// One round: C values a lane, the partner `O` lanes away.
template <unsigned C, unsigned O, typename T, unsigned NB> __device__ __forceinline__ void spreadRound(T (&v)[NB], unsigned lane) {
  if constexpr (C > 1) {
    constexpr unsigned kHalf = C / 2;
    const bool upper = lane & O;
#pragma unroll
    for (unsigned i = 0; i < kHalf; ++i) {
      const T send = upper ? v[i] : v[i + kHalf];
      const T keep = upper ? v[i + kHalf] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
    }
    spreadRound<kHalf, O / 2>(v, lane);
  }
}
template <typename T, unsigned NB> __device__ __forceinline__ T warpSumsSpread(T (&v)[NB]) {
  static_assert(NB >= 1 && NB <= 32 && (NB & (NB - 1)) == 0, "NB: a power of two up to 32");
  spreadRound<NB, 16>(v, threadIdx.x % 32);
  T total = v[0];
#pragma unroll
  for (unsigned o = 16 / NB; o > 0; o /= 2) total += __shfl_xor_sync(0xffffffffu, total, o);
  return total;
}

// NB: the unit count rounded up to 8, 16 or 32 (the dots' registers); E: the operands' stored type
// (xHalf and wHalf: the 16-bit copies of z[L-1] and w[L] where E is 16-bit), R: the type their
// values are rounded to (HeadRead). Block r: row r. Its
// warps' sums meet in shared memory (warps in order); warp 0 finishes the row in registers
// (outputRowLane: lane j unit j). `finish` false: z[L] only (the output row is then
// outputWarpKernel's, in a launch of its own: a memory scheduler's stages, a compact plan; its
// outputRowWarp takes the same steps in the same order, so the same bits).
template <typename T, unsigned NB, typename E, typename R>
__global__ void __launch_bounds__(kHeadThreads)
    outputHeadKernel(void* base, uint32_t last, uint64_t rows, uint64_t scaleRows, OutputLoss ol, bool grad, bool accumulate, uint64_t step, int fracBits, HalfOut xHalf,
                     HalfOut wHalf, HalfOut dHalf, bool finish, bool error, HalfOut dPrevHalf) {
  constexpr unsigned kWarps = kHeadThreads / 32, kLanesPerUnit = 32 / NB;
  __shared__ T part[kWarps][NB];
  __shared__ T dRow[NB];
  const nna_bound_layer<T> O = bindModel<T>(base, last);
  const uint64_t n = O.units, m = O.fan_in;
  const E* in = headOperand<E>(bindModel<T>(base, last - 1).z, xHalf);
  const E* w = headOperand<E>(O.w, wHalf);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const bool mine = lane < n;
  for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    // warp 0's loads of the row's labels and the biases, in flight during the products
    const T yj = warp == 0 && finish && mine ? O.y[r * n + lane] : T(0), bj = warp == 0 && mine ? O.b[lane] : T(0);
    T acc[NB];
    headDots<T, NB, R>(in + r * m, w, n, m, threadIdx.x, acc);
    const T sum = warpSumsSpread<T, NB>(acc);
    if (lane % kLanesPerUnit == 0) part[warp][lane / kLanesPerUnit] = sum;
    __syncthreads();
    if (warp == 0) {
      T zj = T(0);
      if (mine) {
        T total = part[0][lane];
#pragma unroll
        for (unsigned i = 1; i < kWarps; ++i) total += part[i][lane];
        zj = activateAt(O, r * n + lane, total + bj);
      }
      if (finish) {
        T dj;
        const RowResult res = outputRowLane<T>(zj, yj, O.z + r * n, O.d + r * n, n, ol, scaleRows, grad, dj);
        if (accumulate && lane == 0) accumulateRowStats(O.stats, res.loss, res.correct, r, rows, step, fracBits);
        if (grad && dHalf && mine) dHalf.store(r * n + lane, float(dj));
        // the error product reads d as the run's products do: its 16-bit copy where it has one
        if constexpr (std::is_same_v<R, T>) {
          if (error && lane < NB) dRow[lane] = dj;
        } else {
          if (error && lane < NB) dRow[lane] = T(roundedTo<R>(float(dj)));
        }
      }
    }
    __syncthreads();  // dRow is the row's; part is the next row's
    if (error) {
      headErrorRow<T, NB, R, E>(bindModel<T>(base, last - 1), w, dRow, n, m, r, dPrevHalf);
      __syncthreads();  // dRow is the next row's
    }
  }
}

// d[L-1] of rows outputHeadKernel did not take it for (headErrorRow; the same bits): a
// compact plan's, a memory scheduler's, the primitives', a loss-scaled step's (dHalf: d[L]'s
// scaled copy). A block a row.
template <typename T, unsigned NB, typename E, typename R>
__global__ void __launch_bounds__(kHeadThreads) outputErrorKernel(void* base, uint32_t last, uint64_t rows, HalfOut wHalf, HalfOut dHalf, HalfOut dPrevHalf) {
  __shared__ T dRow[NB];
  const nna_bound_layer<T> O = bindModel<T>(base, last);
  const uint64_t n = O.units, m = O.fan_in;
  const E *w = headOperand<E>(O.w, wHalf), *d = headOperand<E>(O.d, dHalf);
  for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    if (threadIdx.x < NB) dRow[threadIdx.x] = threadIdx.x < n ? headValue<T, R>(d[r * n + threadIdx.x]) : T(0);
    __syncthreads();
    headErrorRow<T, NB, R, E>(bindModel<T>(base, last - 1), w, dRow, n, m, r, dPrevHalf);
    __syncthreads();
  }
}

// dw[L] and db[L] of the narrow output layer from d[L] and z[L-1] (the operands the run's
// products read: their 16-bit copies in bf16 / fp16), or with `fold` (SGD folds: layer_run.cuh
// folds()) w[L] and b[L] stepped in place as the tiled products' epilogue steps them, no dw
// written. Through cuBLAS this was a 10-row product and a bias-gradient launch beside the chain,
// on the side stream, which was the step's longer branch. Block (x, g) takes inputs
// [32 x, 32 x + 32), a lane each, and units [4 g, 4 g + 4): with all of a layer's units a block,
// M's layer was 32 blocks of long serial warps; 8 warps a block (4 load rounds a thread for M)
// shortened them, 16 more. Its 16 warps take rows y, y + kHeadGradStripes, ... and their sums
// meet in shared memory in warp order.
// The block's columns of d[L] are staged in shared memory first (every lane reads each); a
// thread's loads go kGroup at a time (one at a time, each waited a memory latency). Blocks
// (0, g) also sum db, from the arena's d.
// prevBias: the last row of blocks (y = gridDim.y - 1) takes db[L-1] instead (and its bias step
// where foldPrev), which the run's stream otherwise ran in a launch of its own between the output
// launch and layer 1's weight-gradient product (a two-layer net: S). Same arithmetic as
// biasGradKernel<T, kBiasStripesWide> without applyGrad, so the same bits as the runs that launch it.
constexpr unsigned kHeadGradStripes = 16, kHeadGradUnits = 4;
template <typename T> __device__ void prevBiasGrad(void* base, uint32_t l, uint64_t rows, bool fold, uint32_t optimizer, const Hyper<T>& hp);
template <typename T, typename E, typename R>
__global__ void __launch_bounds__(32 * kHeadGradStripes) outputWeightGradKernel(void* base, uint32_t last, uint64_t rows, HalfOut xHalf, HalfOut dHalf, bool fold,
                                                                                uint32_t optimizer, Hyper<T> hp, const double* lrs, bool prevBias, bool foldPrev) {
  if (lrs) hp = withLr(hp, lrs[blockIdx.z]);  // model_lrs.cuh
  if (prevBias && blockIdx.y == gridDim.y - 1) return prevBiasGrad<T>(base, last - 1, rows, foldPrev, optimizer, hp);
  constexpr unsigned U = kHeadGradUnits, kThreads = 32 * kHeadGradStripes;
  constexpr unsigned kRows = 8192 / (U * sizeof(T));  // rows of d staged at a time: 8 KB
  constexpr unsigned kGroup = 8;                      // a thread's loads in flight at once
  __shared__ T dS[kRows][U];                          // d's rows as the products read them
  __shared__ T dB[kRows][U];                          // ... and as the arena holds them (db)
  __shared__ T part[kHeadGradStripes][U][33];         // 33: a warp's stores on distinct banks
  const nna_bound_layer<T> O = bindModel<T>(base, last);
  const uint64_t n = O.units, m = O.fan_in, u0 = uint64_t(blockIdx.y) * U;
  const E *x = headOperand<E>(bindModel<T>(base, last - 1).z, xHalf), *d = headOperand<E>(O.d, dHalf);
  const unsigned lane = threadIdx.x, y = threadIdx.y, t = y * 32 + lane;
  const uint64_t c = uint64_t(blockIdx.x) * 32 + lane;
  const bool sums = blockIdx.x == 0;  // db
  T acc[U], bacc[U];
#pragma unroll
  for (unsigned u = 0; u < U; ++u) acc[u] = bacc[u] = T(0);
  for (uint64_t r0 = 0; r0 < rows; r0 += kRows) {
    const uint64_t chunk = rows - r0 < kRows ? rows - r0 : kRows;
    __syncthreads();  // dS and dB are the next chunk's
    for (uint64_t i0 = t; i0 < chunk * U; i0 += uint64_t(kThreads) * kGroup) {
      T v[kGroup], vb[kGroup];
#pragma unroll
      for (unsigned j = 0; j < kGroup; ++j) {
        const uint64_t i = i0 + uint64_t(j) * kThreads, u = u0 + i % U, e = (r0 + i / U) * n + u;
        const bool in = i < chunk * U && u < n;
        v[j] = in ? headValue<T, R>(d[e]) : T(0);
        vb[j] = in && sums ? O.d[e] : T(0);
      }
#pragma unroll
      for (unsigned j = 0; j < kGroup; ++j) {
        const uint64_t i = i0 + uint64_t(j) * kThreads;
        if (i >= chunk * U) break;
        dS[i / U][i % U] = v[j];
        if (sums) dB[i / U][i % U] = vb[j];
      }
    }
    __syncthreads();
    for (uint64_t r = y; r < chunk; r += uint64_t(kHeadGradStripes) * kGroup) {
      T a[kGroup];
#pragma unroll
      for (unsigned j = 0; j < kGroup; ++j) {
        const uint64_t rr = r + uint64_t(j) * kHeadGradStripes;
        a[j] = c < m && rr < chunk ? headValue<T, R>(x[(r0 + rr) * m + c]) : T(0);
      }
#pragma unroll
      for (unsigned j = 0; j < kGroup; ++j) {
        const uint64_t rr = r + uint64_t(j) * kHeadGradStripes;
        if (rr >= chunk) break;
#pragma unroll
        for (unsigned u = 0; u < U; ++u) acc[u] = fma(dS[rr][u], a[j], acc[u]);
        if (sums) {
#pragma unroll
          for (unsigned u = 0; u < U; ++u) bacc[u] += dB[rr][u];
        }
      }
    }
  }
  const Hyper<T> hb = forBiases(hp);
  for (int pass = 0; pass < (sums ? 2 : 1); ++pass) {  // the weights, then the biases
    __syncthreads();                                   // part is free
#pragma unroll
    for (unsigned u = 0; u < U; ++u) part[y][u][lane] = pass ? bacc[u] : acc[u];
    __syncthreads();
    const uint64_t u = u0 + y;  // warp y < U: unit u0 + y
    if (y >= U || u >= n) continue;
    T total = T(0);
#pragma unroll
    for (unsigned s = 0; s < kHeadGradStripes; ++s) total += part[s][y][lane];
    if (pass == 0 && c < m) {
      const uint64_t e = u * m + c;
      if (fold)
        updateParam<T>(NNA_SGD, O.w + e, total, nullptr, nullptr, hp);
      else
        O.dw[e] = total;
    } else if (pass == 1 && lane == 0) {
      O.db[u] = total;
      if (fold) updateBias<T>(optimizer, O, u, total, hb);
    }
  }
}

// db[l] of columns [32 x, 32 x + 32) for outputWeightGradKernel's prevBias blocks: lane = column,
// warp y the row stripes y and y + 16 of biasGradKernel's 32 (rows in order within each), the 32
// stripes' sums then added in order.
template <typename T> __device__ void prevBiasGrad(void* base, uint32_t l, uint64_t rows, bool fold, uint32_t optimizer, const Hyper<T>& hp) {
  static_assert(2 * kHeadGradStripes == kBiasStripesWide, "two of biasGradKernel's stripes a warp");
  __shared__ T part[kBiasStripesWide][33];
  const nna_bound_layer<T> C = bindModel<T>(base, l);
  const unsigned lane = threadIdx.x, y = threadIdx.y;
  const uint64_t j = uint64_t(blockIdx.x) * 32 + lane;
  constexpr int kUnroll = 4;  // biasGradKernel's groups: loads first, then the sums in row order
  for (unsigned h = 0; h < 2; ++h) {
    const unsigned stripe = y + h * kHeadGradStripes;
    T s = T(0);
    if (j < C.units)
      for (uint64_t r0 = stripe; r0 < rows; r0 += uint64_t(kBiasStripesWide) * kUnroll) {
        T v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const uint64_t r = r0 + uint64_t(u) * kBiasStripesWide;
          v[u] = r < rows ? C.d[r * C.units + j] : T(0);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          if (r0 + uint64_t(u) * kBiasStripesWide >= rows) break;
          s += v[u];
        }
      }
    part[stripe][lane] = s;
  }
  __syncthreads();
  if (y != 0 || j >= C.units) return;
  T total = T(0);
  for (int k = 0; k < kBiasStripesWide; ++k) total += part[k][lane];
  C.db[j] = total;
  if (fold) updateBias<T>(optimizer, C, j, total, forBiases(hp));
}

// How the output layer's products read z[L-1], w[L] and d[L]: the arena's values (fp32, tf32,
// tf32x3, float64), a bf16 / fp16 run's 16-bit copies, or the arena's fp32 values rounded to 16
// bits as they load (the same values; a run of one model then makes no copy of z[L-1] and w[L],
// and its forward product of layer L-1 needs no pass to write one: LayerRun::m_.headRounds).
enum class HeadRead : uint8_t { Own, Copies, Rounds };

// The kernel of n units (n <= kHeadMaxUnits): pick(NB, E{}, R{}) with NB an integral_constant (8,
// 16 or 32), E the operands' stored type and R the type their values are rounded to (HeadRead;
// fp16: __half, else __nv_bfloat16).
template <typename T, typename Pick> void headVariant(uint64_t n, HeadRead read, bool fp16, Pick&& pick) {
  auto withNB = [&](auto e, auto r) {
    if (n <= 8)
      pick(std::integral_constant<unsigned, 8>{}, e, r);
    else if (n <= 16)
      pick(std::integral_constant<unsigned, 16>{}, e, r);
    else
      pick(std::integral_constant<unsigned, 32>{}, e, r);
  };
  if constexpr (std::is_same_v<T, float>) {
    if (read == HeadRead::Copies) return fp16 ? withNB(__half{}, __half{}) : withNB(__nv_bfloat16{}, __nv_bfloat16{});
    if (read == HeadRead::Rounds) return fp16 ? withNB(float{}, __half{}) : withNB(float{}, __nv_bfloat16{});
  }
  withNB(T{}, T{});
}

// outputHeadKernel for n units, a block a row.
template <typename T, typename Launch> void launchOutputHead(uint64_t n, uint64_t rows, unsigned models, HeadRead read, bool fp16, Launch&& launch) {
  headVariant<T>(n, read, fp16,
                 [&](auto nb, auto e, auto r) { launch(outputHeadKernel<T, decltype(nb)::value, decltype(e), decltype(r)>, dim3(rowBlocks(rows), 1, models), kHeadThreads); });
}

// outputWeightGradKernel for n units and m inputs (prevBias: a row of blocks more, for db[L-1]'s m columns).
template <typename T, typename Launch> void launchOutputWeightGrad(uint64_t n, uint64_t m, unsigned models, HeadRead read, bool fp16, bool prevBias, Launch&& launch) {
  headVariant<T>(n, read, fp16, [&](auto, auto e, auto r) {
    launch(outputWeightGradKernel<T, decltype(e), decltype(r)>, dim3(unsigned((m + 31) / 32), unsigned((n + kHeadGradUnits - 1) / kHeadGradUnits + (prevBias ? 1 : 0)), models),
           dim3(32, kHeadGradStripes));
  });
}

// outputErrorKernel likewise.
template <typename T, typename Launch> void launchOutputError(uint64_t n, uint64_t rows, unsigned models, HeadRead read, bool fp16, Launch&& launch) {
  headVariant<T>(n, read, fp16,
                 [&](auto nb, auto e, auto r) { launch(outputErrorKernel<T, decltype(nb)::value, decltype(e), decltype(r)>, dim3(rowBlocks(rows), 1, models), kHeadThreads); });
}

}  // namespace nna
