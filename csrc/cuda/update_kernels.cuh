// update_kernels.cuh: the bias gradients (column sums in a fixed order, with the bias step where
// the weights' step folded into their product), the optimizer's update of a layer, and the
// biases' steps batched or parked for later.
#pragma once
#include "../ops/element.h"
#include "kernel_base.cuh"

namespace nna {

// db = column sums of d: 32 columns per block (one per lane), 8 row stripes per column, then a
// fixed-order reduction of the 8 partial sums, so the result is deterministic.
constexpr int kBiasCols = 32, kBiasStripes = 8;

// A layer's bias gradient split over blocks of row stripes (biasGradKernel's gridDim.y > 1, a
// layer of few column blocks: with a block a column block, its 32 stripes of rows walked by a
// handful of multiprocessors): each block leaves its stripes' sums in `partial` (a column block
// a model: 32 stripes x 32 columns), and the last of a column block's blocks to finish adds the
// 32 in stripe order, the one-block sum's order: the same bits. `count`: the column blocks'
// finished blocks, zero between launches (the last block resets its own), a layer's own slots
// (a layer's bias gradient may run beside another's: LayerRun::gradientWork).
template <typename T> struct BiasSums {
  T* partial = nullptr;
  unsigned* count = nullptr;
};
constexpr unsigned kBiasGroupsMost = 8;  // blocks a column block at most (4 stripes each)

// Where d[l] comes from with applyGrad (LayerRun::activationGrad): the error product's raw
// result in d[l], or, where the layer above is an element op (`through`: dropout, a residual),
// that op's backward of d[through], read here in place of its own pass; plus d[adder] of the
// residual layer that adds z[l] (`adder`, its last: residualAddKernel's sum, the same order).
// What is read is written back to d[l] as that op's pass and the add would have left it, f' and
// all. 0: none.
struct BiasFrom {
  uint32_t through = 0, adder = 0;
  uint64_t seed = 0, step = 0, rowBase = 0;  // dropout's mask (opElementKernel's)
};

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
// with alpha -1 (LayerRun::scalesD). d keeps d.
// Stripes: row stripes a column (blockDim.y x gridDim.y); kBiasStripes where K models give many
// blocks of few rows (LayerRun::biasGrad): a 1,024-thread block's tail (one warp summing 32
// partial sums, then the bias step) held half an SM.
// From: `from` may name layers (a network with ops); without, the kernel reads d[l] alone.
template <typename T, int Stripes = kBiasStripesWide, bool From = false>
__global__ void __launch_bounds__(kBiasCols* Stripes)
    biasGradKernel(void* base, uint32_t l, uint64_t rows, bool stepBiases, uint32_t optimizer, Hyper<T> hp, const double* lrs, bool applyGrad, HalfOut half, bool lrScaled,
                   T* scaled, uint64_t scaledStride, uint64_t copyRow, BiasSums<T> sums, BiasFrom from) {
  if (scaled) scaled += blockIdx.z * scaledStride;
  if (lrs) hp = withLr(hp, lrs[blockIdx.z]);  // model_lrs.cuh
  const nna_bound_layer<T> C = bindModel<T>(base, l);
  __shared__ T part[Stripes][kBiasCols];
  const uint64_t j = uint64_t(blockIdx.x) * kBiasCols + threadIdx.x;
  const unsigned stripe = blockIdx.y * blockDim.y + threadIdx.y, stripes = gridDim.y * blockDim.y;
  T s = T(0);
  const T* act = activationGradInput(C);
  const T* add = From && from.adder ? bindModel<T>(base, from.adder).d : nullptr;
  // d's rows in groups of kBiasUnroll, every load of a group issued before its first use: one
  // latency round a group instead of one a row (M's 1024 units give only 32 blocks, each thread
  // a long walk down its column). The sum still takes the rows in order: the same bits.
  // `back(r, e, v)`: d[l]'s element from what was read at e.
  auto walk = [&](const T* src, auto&& back) {
    constexpr int kBiasUnroll = 4;
    if (j < C.units)
      for (uint64_t r0 = stripe; r0 < rows; r0 += uint64_t(stripes) * kBiasUnroll) {
        T v[kBiasUnroll], x[kBiasUnroll], a[From ? kBiasUnroll : 1];
#pragma unroll
        for (int u = 0; u < kBiasUnroll; ++u) {
          const uint64_t r = r0 + uint64_t(u) * stripes, e = r * C.units + j;
          if (r < rows) {
            v[u] = src[e];
            if constexpr (From)
              if (add) a[u] = add[e];
            if (applyGrad) x[u] = act[e];
          }
        }
#pragma unroll
        for (int u = 0; u < kBiasUnroll; ++u) {
          const uint64_t r = r0 + uint64_t(u) * stripes, e = r * C.units + j;
          if (r >= rows) break;
          v[u] = back(r, e, v[u]);
          if constexpr (From)
            if (add) v[u] += a[u];
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
  };
  if (From && from.through) {
    const nna_bound_layer<T> U = bindModel<T>(base, from.through);
    ops::withElementOp(U.op, ops::ElementLayer<T>{from.through, U.units, U.op_value, nullptr, true, from.seed, from.step, from.rowBase},
                       [&](const auto& op) { walk(U.d, [&](uint64_t r, uint64_t e, T v) { return T(op.backward(r, j, e, v)); }); });
  } else {
    walk(C.d, [](uint64_t, uint64_t, T v) { return v; });
  }
  T total = T(0);
  if (gridDim.y == 1) {
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y != 0 || j >= C.units) return;
    for (int y = 0; y < Stripes; ++y) total += part[y][threadIdx.x];
  } else {  // Stripes == stripes: the wide kernel split (LayerRun::biasGroups)
    const uint64_t columnBlock = uint64_t(blockIdx.z) * gridDim.x + blockIdx.x;
    T* partial = sums.partial + columnBlock * Stripes * kBiasCols;
    partial[stripe * kBiasCols + threadIdx.x] = s;
    __threadfence();  // the sums seen by whichever block adds them
    __syncthreads();
    __shared__ bool last;
    if (threadIdx.x == 0 && threadIdx.y == 0) {
      last = atomicAdd(&sums.count[columnBlock], 1u) == gridDim.y - 1;
      if (last) sums.count[columnBlock] = 0;
    }
    __syncthreads();
    if (!last || threadIdx.y != 0 || j >= C.units) return;
    __threadfence();
    T p[Stripes];
#pragma unroll
    for (int y = 0; y < Stripes; ++y) p[y] = __ldcg(partial + y * kBiasCols + threadIdx.x);  // every load at once
#pragma unroll
    for (int y = 0; y < Stripes; ++y) total += p[y];
  }
  C.db[j] = total;
  if (stepBiases) updateBias<T>(optimizer, C, j, total, forBiases(hp));
}

// The layers one update launch steps (blockIdx.y: entry), each with where precision bf16 / fp16
// keeps its w's copy (none: HalfOut{}). Zeroed before it is filled: a graph compares launches by
// their argument bytes.
constexpr unsigned kUpdateLayers = 32;
struct UpdateLayers {
  uint32_t count;
  uint32_t l[kUpdateLayers];
  HalfOut half[kUpdateLayers];
};

// The optimizer step of layer u.l[blockIdx.y]: weights, then biases. `scale`: model z's gradient
// scale of a clipping or loss-scaled run (clipScaleKernel, lossScaleKernel), or null; NaN there
// skips the step (its scaled gradients overflowed: nothing moves, the optimizer state included).
// u.half: precision bf16 / fp16's copy of w (model blockIdx.z's), written in the same pass as the master, or none.
template <typename T> __global__ void updateKernel(void* base, UpdateLayers u, uint32_t optimizer, Hyper<T> hp, const double* lrs, const double* scale) {
  const uint32_t l = u.l[blockIdx.y];
  const HalfOut half = u.half[blockIdx.y];
  if (lrs) hp = withLr(hp, lrs[blockIdx.z]);
  if (scale && isnan(scale[blockIdx.z])) return;
  if (scale) hp.gs = T(scale[blockIdx.z]);
  const Hyper<T> hb = forBiases(hp);
  const nna_bound_layer<T> C = bindModel<T>(base, l);
  const uint64_t nw = C.w_count, first = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x, stride = uint64_t(gridDim.x) * blockDim.x;
  const Hyper<T> hw = nna_op_w_decays(C.op) ? hp : hb;  // a norm's gain decays like a bias (not a 2-D parameter)
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

}  // namespace nna
