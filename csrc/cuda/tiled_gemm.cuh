// tiled_gemm.cuh: nn-arena's own products of a layer (the per-layer path without cuBLAS, and
// the fused kernel's tiles): a tile's multiply-adds, its epilogue (bias, activation, the folded
// SGD step) and the layer's three products by index.
#pragma once
#include "kernel_base.cuh"

namespace nna {

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

}  // namespace nna
