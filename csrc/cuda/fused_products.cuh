// fused_products.cuh: the fused kernel's products: shared-memory tiles and the latency-bound warp/block routines.
// Included by fused_step.cu only (one translation unit: the anonymous namespace is its own).
#pragma once

#include "fused_common.cuh"

namespace nna {
namespace {

// One TILE x TILE tile of a layer's product (the tiled kernel of tiled_gemm.cuh, as a device
// function over tile index `ti`). Forward of layer 1 on resident data reads its rows from xdata
// through the epoch's permutation and, in the blocks of column 0, writes them to z[0].
template <typename T, int MODE, int TILE>
__device__ void gemmTile(const FusedParams& p, const StepInfo& st, uint32_t l, uint64_t ti, Smem<T>& sm, const Hyper<T>& hp, bool updateNow) {
  constexpr int TM = TILE / 16;
  const nna_bound_layer<T> C = bound<T>(l, st.model);
  const nna_bound_layer<T> P = bound<T>(l - 1, st.model);
  const uint64_t n = C.units, m = C.fan_in, rows = st.rows;
  const uint64_t M = MODE == kWeightGrad ? n : rows;
  const uint64_t N = MODE == kForward ? n : m;
  const uint64_t K = MODE == kForward ? m : MODE == kWeightGrad ? rows : n;
  const uint64_t tilesN = ceilDiv(N, TILE);
  const uint64_t bm = (ti / tilesN) * TILE, bn = (ti % tilesN) * TILE;
  const bool gatherRows = MODE == kForward && l == 1 && p.resident;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  T acc[TM][TM] = {};
  for (uint64_t k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int q = 0; q < TM; ++q) {
      const int e = threadIdx.x + 256 * q;
      const int ar = e / BK, ak = e % BK;
      T av = T(0);
      const uint64_t i = bm + ar, k = k0 + ak;
      if (i < M && k < K) {
        if (MODE == kForward) {
          if (gatherRows) {
            av = P.xdata[permIndex(st.first + i, p.permA, p.permC, p.samples) * m + k];
            if (bn == 0 && st.model == 0) P.z[i * m + k] = av;  // z[0] is shared: model 0 writes it
          } else {
            av = P.z[i * m + k];
          }
        } else {
          av = MODE == kWeightGrad ? C.d[k * n + i] : C.d[i * n + k];
        }
      }
      sm.tile.a[ak][ar] = av;
      const int bk = e / TILE, bc = e % TILE;
      const uint64_t kk = k0 + bk, j = bn + bc;
      T bv = T(0);
      if (kk < K && j < N) bv = MODE == kForward ? C.w[j * m + kk] : MODE == kWeightGrad ? P.z[kk * m + j] : C.w[kk * m + j];
      sm.tile.b[bk][bc] = bv;
    }
    __syncthreads();
    tileMultiply<T, TM, 64>(acc, sm.tile.a, sm.tile.b, tx, ty);
    __syncthreads();
  }
  storeTile<MODE>(acc, C, P, bm, bn, M, N, tx, ty, st.keepDw && C.dw, [&](uint64_t e, T g) {
    if (updateNow)
      updateWeight<T>(p.optimizer, C, e, g, hp);
    else if (clipping(p, st))
      clipAdd(double(g));
  });
}

// ---- Latency-bound products: the reduction split over the block's warps --------------------

// z[l] rows [r0, r0+4) x units [c0, c0+8) by ONE warp: lanes walk k (both operands are
// contiguous along k), four 32-wide chunks at a time with every load issued before the first
// use; then a shuffle tree per output. No shared memory and no block barrier: the warps of a
// block take different tiles. Index arithmetic is 32-bit: the fused path takes only layers
// whose regions have < 2^31 elements (runFused).
template <typename T> __device__ void forwardWarp(const FusedParams& p, const StepInfo& st, uint32_t l, uint32_t ti) {
  const nna_bound_layer<T> C = bound<T>(l, st.model);
  const nna_bound_layer<T> P = bound<T>(l - 1, st.model);
  const uint32_t n = uint32_t(C.units), m = uint32_t(C.fan_in), rows = uint32_t(st.rows);
  const uint32_t tilesN = (n + kFwdCols - 1) / kFwdCols;
  const uint32_t r0 = (ti / tilesN) * kFwdRows, c0 = (ti % tilesN) * kFwdCols;
  const uint32_t lane = threadIdx.x % 32;
  const bool gatherRows = l == 1 && p.resident, writeRows = gatherRows && c0 == 0 && st.model == 0;  // z[0]: shared
  const T* xr[kFwdRows];
  const T* wr[kFwdCols];
#pragma unroll
  for (int i = 0; i < kFwdRows; ++i) {
    const uint32_t r = r0 + i;
    xr[i] = r >= rows ? nullptr : gatherRows ? P.xdata + permIndex(st.first + r, p.permA, p.permC, p.samples) * m : P.z + size_t(r) * m;
  }
#pragma unroll
  for (int j = 0; j < kFwdCols; ++j) wr[j] = c0 + j < n ? C.w + size_t(c0 + j) * m : nullptr;
  const uint32_t rOut = r0 + lane / kFwdCols, cOut = c0 + lane % kFwdCols;
  const T bias = cOut < n ? C.b[cOut] : T(0);  // loaded now, used after the products
  T acc[kFwdRows][kFwdCols] = {};
  constexpr int kChunks = 4;
  for (uint32_t k0 = lane; k0 < m; k0 += 32 * kChunks) {
    T a[kChunks][kFwdRows], b[kChunks][kFwdCols];
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const uint32_t k = k0 + c * 32;
#pragma unroll
      for (int i = 0; i < kFwdRows; ++i) a[c][i] = xr[i] && k < m ? xr[i][k] : T(0);
#pragma unroll
      for (int j = 0; j < kFwdCols; ++j) b[c][j] = wr[j] && k < m ? wr[j][k] : T(0);
    }
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
#pragma unroll
      for (int i = 0; i < kFwdRows; ++i)
#pragma unroll
        for (int j = 0; j < kFwdCols; ++j) acc[i][j] += a[c][i] * b[c][j];
      const uint32_t k = k0 + c * 32;
      if (writeRows && k < m)
#pragma unroll
        for (int i = 0; i < kFwdRows; ++i)
          if (xr[i]) P.z[size_t(r0 + i) * m + k] = a[c][i];
    }
  }
  T mine = T(0);  // lane q: output (row q / 8, unit q % 8)
#pragma unroll
  for (int i = 0; i < kFwdRows; ++i)
#pragma unroll
    for (int j = 0; j < kFwdCols; ++j) {
      const T v = warpSum(acc[i][j]);
      if (lane == i * kFwdCols + j) mine = v;
    }
  if (rOut < rows && cOut < n) activateAt(C, size_t(rOut) * n + cOut, mine + bias);
}

// z[l] rows [r0, r0+8) x units [c0, c0+8) by ONE block, when the tiles fit the grid in one
// round: each slice of 256 inputs of the 16 operand rows is loaded with one coalesced load per
// row and thread (all 16 in flight), the next slice's loads are issued before this slice's
// multiply-adds, and 4 parts of each slice are summed apart and added in a fixed order. The
// warp routine (forwardWarp) walks the reduction in 7 dependent rounds for 784 inputs; this
// takes 4, and its loads are 8-wide reuse of each operand row instead of 4- and 8-wide.
template <typename T> __device__ void forwardBlock(const FusedParams& p, const StepInfo& st, uint32_t l, uint64_t ti, Smem<T>& sm) {
  const nna_bound_layer<T> C = bound<T>(l, st.model);
  const nna_bound_layer<T> P = bound<T>(l - 1, st.model);
  const uint32_t n = uint32_t(C.units), m = uint32_t(C.fan_in), rows = uint32_t(st.rows);
  const uint32_t tilesN = (n + kFbTile - 1) / kFbTile;
  const uint32_t r0 = uint32_t(ti / tilesN) * kFbTile, c0 = uint32_t(ti % tilesN) * kFbTile;
  const bool gatherRows = l == 1 && p.resident, writeRows = gatherRows && c0 == 0 && st.model == 0;  // z[0]: shared
  const uint32_t kk = threadIdx.x;                                                                   // this thread loads input kk of every slice, for all 16 rows
  const T* src[2 * kFbTile];
#pragma unroll
  for (int q = 0; q < kFbTile; ++q) {
    const uint32_t r = r0 + q, c = c0 + q;
    src[q] = r >= rows ? nullptr : gatherRows ? P.xdata + permIndex(st.first + r, p.permA, p.permC, p.samples) * m : P.z + size_t(r) * m;
    src[kFbTile + q] = c < n ? C.w + size_t(c) * m : nullptr;
  }
  T reg[2 * kFbTile];
  auto load = [&](uint32_t k0) {
    const uint32_t k = k0 + kk;
#pragma unroll
    for (int q = 0; q < 2 * kFbTile; ++q) reg[q] = src[q] && k < m ? src[q][k] : T(0);
  };
  const uint32_t o = threadIdx.x % (kFbTile * kFbTile), part = threadIdx.x / (kFbTile * kFbTile);
  const uint32_t orow = o / kFbTile, ocol = o % kFbTile;
  constexpr uint32_t kPart = kFbSlice / kFbParts;
  T acc[4] = {};  // four chains in flight: one chain waits on each shared load and FMA in turn
  load(0);
  for (uint32_t k0 = 0; k0 < m; k0 += kFbSlice) {
#pragma unroll
    for (int q = 0; q < kFbTile; ++q) {
      sm.fwd.x[q][kk] = reg[q];
      sm.fwd.w[q][kk] = reg[kFbTile + q];
      if (writeRows && src[q] && k0 + kk < m) P.z[size_t(r0 + q) * m + k0 + kk] = reg[q];
    }
    __syncthreads();
    if (k0 + kFbSlice < m) load(k0 + kFbSlice);
#pragma unroll 4
    for (uint32_t k = part * kPart; k < (part + 1) * kPart; k += 4)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[c] += sm.fwd.x[orow][k + c] * sm.fwd.w[ocol][k + c];
    __syncthreads();
  }
  sm.fwd.part[part][o] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  __syncthreads();
  if (threadIdx.x < kFbTile * kFbTile) {
    T total = T(0);
#pragma unroll
    for (int q = 0; q < kFbParts; ++q) total += sm.fwd.part[q][o];
    const uint32_t r = r0 + orow, c = c0 + ocol;
    if (r < rows && c < n) activateAt(C, size_t(r) * n + c, total + C.b[c]);
  }
  __syncthreads();
}

// dw[l] units [j0, j0+16) x inputs [i0, i0+32): lanes walk i, warp w takes batch rows w, w+8, ...
template <typename T> __device__ void weightGradSmall(const FusedParams& p, const StepInfo& st, uint32_t l, uint32_t ti, Smem<T>& sm, const Hyper<T>& hp, bool updateNow) {
  const nna_bound_layer<T> C = bound<T>(l, st.model);
  const nna_bound_layer<T> P = bound<T>(l - 1, st.model);
  const uint32_t n = uint32_t(C.units), m = uint32_t(C.fan_in), rows = uint32_t(st.rows);
  const uint32_t tilesI = (m + 31) / 32;
  const uint32_t j0 = (ti / tilesI) * kDwRows, i0 = (ti % tilesI) * 32;
  const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const uint32_t i = i0 + lane;
  const uint32_t jn = min(uint32_t(kDwRows), n - j0);  // units of this tile
  T acc[kDwRows] = {};
  constexpr int kBatch = 4;  // rows per warp whose loads are all issued before the first use
  for (uint32_t r0 = warp; r0 < rows; r0 += kWarps * kBatch) {
    T zi[kBatch], dv[kBatch][kDwRows];
#pragma unroll
    for (int q = 0; q < kBatch; ++q) {
      const uint32_t r = r0 + q * kWarps;
      zi[q] = r < rows && i < m ? P.z[r * m + i] : T(0);
#pragma unroll
      for (int jj = 0; jj < kDwRows; ++jj) dv[q][jj] = r < rows && jj < jn ? C.d[r * n + j0 + jj] : T(0);
    }
#pragma unroll
    for (int q = 0; q < kBatch; ++q)
#pragma unroll
      for (int jj = 0; jj < kDwRows; ++jj) acc[jj] += dv[q][jj] * zi[q];
  }
#pragma unroll
  for (int jj = 0; jj < kDwRows; ++jj) sm.dwPart[warp][jj][lane] = acc[jj];
  __syncthreads();
  for (uint32_t jj = threadIdx.x / 32; jj < kDwRows; jj += kWarps) {
    const uint32_t j = j0 + jj;
    T total = T(0);
    for (int w = 0; w < kWarps; ++w) total += sm.dwPart[w][jj][lane];
    if (j < n && i < m) {
      const uint32_t e = j * m + i;
      if (st.keepDw && C.dw) C.dw[e] = total;
      if (updateNow)
        updateWeight<T>(p.optimizer, C, e, total, hp);
      else if (clipping(p, st))
        clipAdd(double(total));
    }
  }
  __syncthreads();
}

// Tile kinds in FusedParams::tile: 64 / 32 / 16 = shared-memory tiles of that size; 0 = the
// latency-bound routines above (forward and dw only); kTileBlock = forwardBlock (forward only).
constexpr uint8_t kTileBlock = 1;
template <typename T> __device__ uint64_t tileCount(const FusedParams& p, uint32_t l, int mode, uint64_t rows) {
  const nna_layer* L = nna_layer_of(p.base, l);
  const uint64_t n = L->units, m = L->fan_in;
  const uint64_t M = mode == kWeightGrad ? n : rows, N = mode == kForward ? n : m;
  const uint64_t t = p.tile[l][mode];
  if (t == kTileBlock) return ceilDiv(rows, kFbTile) * ceilDiv(n, kFbTile);
  if (t == 0) return mode == kForward ? ceilDiv(rows, kFwdRows) * ceilDiv(n, kFwdCols) : ceilDiv(n, kDwRows) * ceilDiv(m, 32);
  return ceilDiv(M, t) * ceilDiv(N, t);
}

template <typename T, int MODE> __device__ void productTile(const FusedParams& p, const StepInfo& st, uint32_t l, uint64_t ti, Smem<T>& sm, const Hyper<T>& hp, bool updateNow) {
  switch (p.tile[l][MODE]) {
    case 64: gemmTile<T, MODE, 64>(p, st, l, ti, sm, hp, updateNow); break;
    case 32: gemmTile<T, MODE, 32>(p, st, l, ti, sm, hp, updateNow); break;
    case 16: gemmTile<T, MODE, 16>(p, st, l, ti, sm, hp, updateNow); break;
    default:
      if (MODE == kWeightGrad) weightGradSmall<T>(p, st, l, ti, sm, hp, updateNow);
      break;
  }
}

}  // namespace
}  // namespace nna
