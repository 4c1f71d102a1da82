// fused_step.cu: every step of a run in ONE cooperative kernel. The per-layer path costs one
// launch per product or pass (about 11 for a 2-layer network, 17 for 3 layers), and for small
// networks those launches, not arithmetic, set the step time (76 us for 784-128-10, of which
// under 1 us is arithmetic at the H100's FP32 rate). Here the grid stays resident for the whole
// run and walks the phases of each step with a grid-wide barrier between them:
//   forward l = 1..L   layer 1 gathers its rows straight from the resident data set (and
//                      writes them to z[0]); when the last layer has <= 32 units it is done one
//                      warp per row together with softmax, loss, d[L] and d[L-1];
//   output             only when the last layer was not done that way;
//   backward l         d[l-1] from the old w[l], and dw / db of layer l+1 (whose weights
//                      nothing reads any more) with its update in the epilogue of its own dw
//                      tiles; the last phase also takes layer 1. No pass reads dw back, so an
//                      SGD step writes none (a compact SGD plan has none): the phase table of
//                      this order is StepModel::step(..., Path::Fused) (csrc/train/phases.cc).
// A 784-128-10 step is 3 phases, 784-1024-1024-10 is 5. Small products are latency-bound: their
// tiles split the reduction over the block's 8 warps (all loads in flight at once) and add the
// 8 partial sums in a fixed order; large ones use shared-memory tiles. Every kernel binds from
// the header at the arena's base, and sums run in a fixed order, so a run is bit-identical to
// itself (not to the per-layer path, whose sums are ordered differently).
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <string>

#include "../train/math.h"
#include "../train/phases.h"
#include "check.cuh"
#include "fused_step.h"
#include "layer_kernels.cuh"
#include "model_lrs.cuh"
#include "../core/env.h"

namespace cg = cooperative_groups;

namespace nna {
namespace {

constexpr uint32_t kMaxFusedLayers = 32;  // weight layers

struct FusedParams {
  void* base;
  uint32_t last, op, optimizer, resident, resetStats, fuseOutput;
  OutputLoss loss;           // the output layer's activation, the loss, its label smoothing (losses.h)
  uint32_t models;           // K networks of one shape (nna_models): every phase's items x K
  const double* lrs;         // device copy of RunParams::lrs (model m's lr), or null: lr for all
  int lossFracBits;
  uint64_t rows, samples, firstBatch, numBatches, permA, permC, stepBase;
  double lr;
  OptimizerParams opt;
  uint8_t tile[kMaxFusedLayers + 1][3];  // [layer][mode]: 64, 32 or 16, 0 = latency routine
  double* clipPartials;                  // clipping: [model][block] sums of squares, or null (no clipping)
  double* clipNorms;                     // clipping: every step's norm per model ([step][model])
  unsigned long long* trace;             // NN_ARENA_FUSED_TRACE: barrier times of the first steps
  uint32_t emptyPhases;                  // NN_ARENA_FUSED_TRACE=2: an empty phase after each (barrier cost in place)
};

constexpr int kTraceSlots = 64;

// Block 0 notes the time at each barrier of the first steps (a profiling aid; off by default).
__device__ __forceinline__ void traceMark(const FusedParams& p, int& slot) {
  if (!p.trace || blockIdx.x != 0 || threadIdx.x != 0 || slot >= kTraceSlots) return;
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  p.trace[slot++] = t;
}

struct StepInfo {
  uint64_t rows, first;  // rows of this step; first row of the epoch (resident)
  bool train, grad;
  bool keepDw;           // write dw: not for SGD training, whose update is folded (no dw is read)
  uint32_t model;        // the model whose copies this item works on
};

constexpr int kWarps = 8;       // 256 threads
constexpr int kFwdRows = 4, kFwdCols = 8, kDwRows = 16;  // output tiles of the latency-bound products
static_assert(kFwdRows * kFwdCols == 32, "forwardWarp leaves one output per lane");
// forwardBlock: an 8 x 8 output tile per block, the reduction in 256-wide slices held in shared
// memory, split over 4 parts of 64 (64 outputs x 4 parts = the block's 256 threads).
constexpr int kFbTile = 8, kFbSlice = 256, kFbParts = 4;
static_assert(kFbTile * kFbTile * kFbParts == 256, "forwardBlock: one output part per thread");
static_assert(2 * kFbTile * kFbSlice == 16 * 256, "forwardBlock: 16 loads per thread per slice");

template <typename T>
union Smem {
  struct { T a[BK][64]; T b[BK][64]; } tile;           // shared-memory product tiles
  T dwPart[kWarps][kDwRows][32];                       // dw: per-warp partial sums
  T bias[kBiasStripes][kBiasCols];                     // db: per-stripe partial sums
  struct { T x[kFbTile][kFbSlice + 1]; T w[kFbTile][kFbSlice + 1]; T part[kFbParts][kFbTile * kFbTile]; } fwd;  // forwardBlock
};

__host__ __device__ __forceinline__ uint64_t ceilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Every block binds all layers once, at the start of the run, from the header at the arena's
// base (nna_bind, as every kernel does) into this table; the phases then read region pointers
// from shared memory instead of re-reading the header from global memory for each tile.
__shared__ __align__(16) unsigned char boundTable[(kMaxFusedLayers + 1) * sizeof(nna_bound_layer<double>)];
static_assert(sizeof(nna_bound_layer<float>) == sizeof(nna_bound_layer<double>), "one table for both dtypes");

// Bytes from one model's copy of each region to the next (nna_region_stride; 0 for shared
// regions), beside the table, so that model m's pointers are model 0's plus m strides.
__shared__ uint64_t strideTable[kMaxFusedLayers + 1][NNA_KIND_COUNT];

// Model m's pointers of layer l. Each work item of a phase belongs to one model, and its
// arithmetic is that of a one-model run whichever block takes it: K models are bit-identical
// to K runs alone.
template <typename T>
__device__ __forceinline__ nna_bound_layer<T> bound(uint32_t l, uint32_t m) {
  nna_bound_layer<T> r = reinterpret_cast<const nna_bound_layer<T>*>(boundTable)[l];
  if (m == 0) return r;
  const uint64_t* st = strideTable[l];
  auto at = [&](T* q, uint32_t k) { return q ? reinterpret_cast<T*>(reinterpret_cast<char*>(q) + m * st[k]) : q; };
  r.z = at(r.z, NNA_Z); r.b = at(r.b, NNA_B); r.w = at(r.w, NNA_W); r.d = at(r.d, NNA_D); r.db = at(r.db, NNA_DB);
  r.dw = at(r.dw, NNA_DW); r.mw = at(r.mw, NNA_MW); r.mb = at(r.mb, NNA_MB); r.vw = at(r.vw, NNA_VW); r.vb = at(r.vb, NNA_VB);
  r.stats = at(r.stats, NNA_STATS);  // y, xdata, ydata: shared
  r.pre = at(r.pre, NNA_Z);          // the second half of z
  return r;
}

// Model m's hyperparameters: the step's, with its own learning rate (scheduled as hyperAt does).
template <typename T>
__device__ __forceinline__ Hyper<T> hyperOf(const FusedParams& p, const Hyper<T>& hp, uint32_t m) {
  return p.lrs ? withLr(hp, p.lrs[m]) : hp;
}


// One TILE x TILE tile of a layer's product (the tiled kernel of layer_kernels.cuh, as a device
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
    if (updateNow) updateParam<T>(p.optimizer, C.w + e, g, C.mw ? C.mw + e : nullptr, C.vw ? C.vw + e : nullptr, hp);
  });
}

// ---- Latency-bound products: the reduction split over the block's warps --------------------

// z[l] rows [r0, r0+4) x units [c0, c0+8) by ONE warp: lanes walk k (both operands are
// contiguous along k), four 32-wide chunks at a time with every load issued before the first
// use; then a shuffle tree per output. No shared memory and no block barrier: the warps of a
// block take different tiles. Index arithmetic is 32-bit: the fused path takes only layers
// whose regions have < 2^31 elements (runFused).
template <typename T>
__device__ void forwardWarp(const FusedParams& p, const StepInfo& st, uint32_t l, uint32_t ti) {
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
        for (int i = 0; i < kFwdRows; ++i) if (xr[i]) P.z[size_t(r0 + i) * m + k] = a[c][i];
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
template <typename T>
__device__ void forwardBlock(const FusedParams& p, const StepInfo& st, uint32_t l, uint64_t ti, Smem<T>& sm) {
  const nna_bound_layer<T> C = bound<T>(l, st.model);
  const nna_bound_layer<T> P = bound<T>(l - 1, st.model);
  const uint32_t n = uint32_t(C.units), m = uint32_t(C.fan_in), rows = uint32_t(st.rows);
  const uint32_t tilesN = (n + kFbTile - 1) / kFbTile;
  const uint32_t r0 = uint32_t(ti / tilesN) * kFbTile, c0 = uint32_t(ti % tilesN) * kFbTile;
  const bool gatherRows = l == 1 && p.resident, writeRows = gatherRows && c0 == 0 && st.model == 0;  // z[0]: shared
  const uint32_t kk = threadIdx.x;  // this thread loads input kk of every slice, for all 16 rows
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
template <typename T>
__device__ void weightGradSmall(const FusedParams& p, const StepInfo& st, uint32_t l, uint32_t ti, Smem<T>& sm, const Hyper<T>& hp, bool updateNow) {
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
      if (updateNow) updateParam<T>(p.optimizer, C.w + e, total, C.mw ? C.mw + e : nullptr, C.vw ? C.vw + e : nullptr, hp);
    }
  }
  __syncthreads();
}

// Tile kinds in FusedParams::tile: 64 / 32 / 16 = shared-memory tiles of that size; 0 = the
// latency-bound routines above (forward and dw only); kTileBlock = forwardBlock (forward only).
constexpr uint8_t kTileBlock = 1;
template <typename T>
__device__ uint64_t tileCount(const FusedParams& p, uint32_t l, int mode, uint64_t rows) {
  const nna_layer* L = nna_layer_of(p.base, l);
  const uint64_t n = L->units, m = L->fan_in;
  const uint64_t M = mode == kWeightGrad ? n : rows, N = mode == kForward ? n : m;
  const uint64_t t = p.tile[l][mode];
  if (t == kTileBlock) return ceilDiv(rows, kFbTile) * ceilDiv(n, kFbTile);
  if (t == 0) return mode == kForward ? ceilDiv(rows, kFwdRows) * ceilDiv(n, kFwdCols) : ceilDiv(n, kDwRows) * ceilDiv(m, 32);
  return ceilDiv(M, t) * ceilDiv(N, t);
}

template <typename T, int MODE>
__device__ void productTile(const FusedParams& p, const StepInfo& st, uint32_t l, uint64_t ti, Smem<T>& sm, const Hyper<T>& hp, bool updateNow) {
  switch (p.tile[l][MODE]) {
    case 64: gemmTile<T, MODE, 64>(p, st, l, ti, sm, hp, updateNow); break;
    case 32: gemmTile<T, MODE, 32>(p, st, l, ti, sm, hp, updateNow); break;
    case 16: gemmTile<T, MODE, 16>(p, st, l, ti, sm, hp, updateNow); break;
    default:
      if (MODE == kWeightGrad) weightGradSmall<T>(p, st, l, ti, sm, hp, updateNow);
      break;
  }
}

// A finished row into the stats (not for Forward runs, which leave the stats alone).
template <typename T>
__device__ void accumulateRow(const FusedParams& p, const StepInfo& st, const nna_bound_layer<T>& O, uint64_t r, uint64_t s, const RowResult& res) {
  if (p.op != uint32_t(Op::Forward)) accumulateRowStats(O.stats, res.loss, res.correct, r, st.rows, s, p.lossFracBits);
}

// Row r's targets from ydata through the permutation (resident runs), lanes striding the units.
template <typename T>
__device__ void gatherTargets(const FusedParams& p, const StepInfo& st, const nna_bound_layer<T>& O, uint64_t r, uint32_t lane, uint32_t lanes) {
  if (!p.resident) return;
  const uint64_t k = permIndex(st.first + r, p.permA, p.permC, p.samples);
  for (uint64_t j = lane; j < O.units; j += lanes) O.y[r * O.units + j] = O.ydata[k * O.units + j];
}

// The last layer (units <= kFusedOutMax) and the output, one warp per row: lanes walk the
// inputs and keep one partial sum per output unit (all loads in flight at once), a shuffle tree
// gives lane j the value z[r][j]; lane 0 finishes the row (outputRow, the code the CPU backend
// runs); then, when gradients are wanted, the warp computes the row's
// d[L-1] = (d[L] w[L]) * act'(z[L-1]) with lanes over the inputs, so the backward pass starts
// one phase later.
constexpr int kFusedOutMax = int(kFusedOutputMaxUnits);  // phases.h: the table knows this order

// outputRow (math.h) for a row of n <= 32 units held one per lane: softmax (z becomes the
// probabilities), the loss, and whether the first maximum of z and y fall on the same unit.
// Same definitions; the sums run as shuffle trees.
template <typename T>
__device__ RowResult outputRowLanes(T& z, T y, bool on, uint32_t n, const OutputLoss& o, uint64_t rows) {
  const uint32_t lane = threadIdx.x % 32;
  RowResult res{0.0, false};
  const LossInfo info = lossInfo(o.loss);
  if (info.softmax) {
    T mx = on ? z : -INFINITY;
    uint64_t at = lane;
    warpArgmax(mx, at);
    const T lse = mx + nlog(warpSum(on ? nexp(z - mx) : T(0)));
    res.loss = double(warpSum(on ? lossTerm(o.loss, z, lossTarget(o, y, n), lse) : T(0)));
    if (on) z = nexp(z - lse);
  } else {
    res.loss = double(warpSum(on ? lossTerm(o.loss, z, y, T(0)) : T(0)));
  }
  if (info.meanUnits) res.loss /= double(n);
  if (info.multilabel) {
    res.correct = warpSum(on && labelMiss(z, y) ? T(1) : T(0)) == T(0);
  } else {
    T zm = on ? z : -INFINITY, ym = on ? y : -INFINITY;
    uint64_t za = on ? lane : 32, ya = on ? lane : 32;
    warpArgmax(zm, za);
    warpArgmax(ym, ya);
    res.correct = za == ya;
  }
  return res;
}

constexpr int kOutChunks = 2;  // 2 x 32 inputs per lane of the output row, every load in flight

// One lane's loads for inputs k = k0 + 32c of the output row: z[k] of the layer below and
// w[j][k] for each unit j (zero past m or n), issued before any is used. The forward product
// and the error of the layer below walk the same inputs.
template <typename T>
__device__ __forceinline__ void loadOutputChunks(const T* zp, const T* w, uint32_t n, uint32_t m, uint32_t k0, T (&zk)[kOutChunks],
                                                 T (&wk)[kOutChunks][kFusedOutMax]) {
#pragma unroll
  for (int c = 0; c < kOutChunks; ++c) {
    const uint32_t k = k0 + 32 * c;
    zk[c] = k < m ? zp[k] : T(0);
#pragma unroll
    for (int j = 0; j < kFusedOutMax; ++j) wk[c][j] = j < n && k < m ? w[j * m + k] : T(0);
  }
}

template <typename T>
__device__ void outputRowFused(const FusedParams& p, const StepInfo& st, uint32_t r, uint64_t s) {
  const nna_bound_layer<T> O = bound<T>(p.last, st.model);
  const nna_bound_layer<T> P = bound<T>(p.last - 1, st.model);
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t n = uint32_t(O.units), m = uint32_t(O.fan_in);
  const T* zp = P.z + r * m;
  T part[kFusedOutMax];
#pragma unroll
  for (int j = 0; j < kFusedOutMax; ++j) part[j] = T(0);
  const T bl = lane < n ? O.b[lane] : T(0);
  T yl = T(0);  // the row's target: from the data set through the permutation (and kept in y)
  if (lane < n) {
    if (p.resident) {
      yl = O.ydata[permIndex(st.first + r, p.permA, p.permC, p.samples) * n + lane];
      if (st.model == 0) O.y[r * n + lane] = yl;  // y is shared: model 0 writes it
    } else {
      yl = O.y[r * n + lane];
    }
  }
  for (uint32_t k0 = lane; k0 < m; k0 += 32 * kOutChunks) {
    T zk[kOutChunks], wk[kOutChunks][kFusedOutMax];
    loadOutputChunks(zp, O.w, n, m, k0, zk, wk);
#pragma unroll
    for (int c = 0; c < kOutChunks; ++c)
#pragma unroll
      for (int j = 0; j < kFusedOutMax; ++j) part[j] += zk[c] * wk[c][j];
  }
  T mine = T(0);
#pragma unroll
  for (int j = 0; j < kFusedOutMax; ++j)
    if (j < n) {
      const T v = warpSum(part[j]);
      if (lane == j) mine = v;
    }
  // The row's values stay in registers (lane j: unit j): a thread walking the row in global
  // memory, as outputRow does, waits on a cache miss per value (~15 us for 10 units).
  const bool on = lane < n;
  const T y = yl;
  T z = on ? activate<T>(O.activation, mine + bl, T(O.act_param)) : T(0);
  const RowResult res = outputRowLanes<T>(z, y, on, n, p.loss, st.rows);
  if (on) O.z[r * n + lane] = z;
  T dl = T(0);
  if (st.grad && on) {
    dl = lossGrad(p.loss, z, lossTarget(p.loss, y, n), lossGradScale<T>(p.loss.loss, st.rows, n));  // as outputRow
    O.d[r * n + lane] = dl;
  }
  if (lane == 0) accumulateRow(p, st, O, r, s, res);
  if (!st.grad) return;
  T dj[kFusedOutMax];
#pragma unroll
  for (int j = 0; j < kFusedOutMax; ++j) dj[j] = __shfl_sync(0xffffffffu, dl, j);
  for (uint32_t i0 = lane; i0 < m; i0 += 32 * kOutChunks) {
    T wi[kOutChunks][kFusedOutMax], zi[kOutChunks];
    loadOutputChunks(zp, O.w, n, m, i0, zi, wi);
#pragma unroll
    for (int c = 0; c < kOutChunks; ++c) {
      T acc = T(0);
#pragma unroll
      for (int j = 0; j < kFusedOutMax; ++j) acc += dj[j] * wi[c][j];
      const uint32_t i = i0 + 32 * c;
      if (i < m) P.d[r * m + i] = acc * (P.pre ? activationGradAt(P, r * m + i) : activationGrad<T>(P.activation, zi[c], T(P.act_param)));
    }
  }
}

template <typename T>
__device__ void biasGradItem(const FusedParams& p, const StepInfo& st, uint32_t l, uint32_t item, Smem<T>& sm, const Hyper<T>& hb, bool updateNow) {
  const nna_bound_layer<T> C = bound<T>(l, st.model);
  const uint32_t col = threadIdx.x % kBiasCols, stripe = threadIdx.x / kBiasCols;
  const uint32_t j = item * kBiasCols + col, n = uint32_t(C.units), rows = uint32_t(st.rows);
  T s = T(0);
  if (j < n)
    for (uint32_t r0 = stripe; r0 < rows; r0 += kBiasStripes * 4) {  // 4 loads in flight, added in row order
      T v[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) v[q] = r0 + q * kBiasStripes < rows ? C.d[(r0 + q * kBiasStripes) * n + j] : T(0);
#pragma unroll
      for (int q = 0; q < 4; ++q) if (r0 + q * kBiasStripes < rows) s += v[q];
    }
  sm.bias[stripe][col] = s;
  __syncthreads();
  if (stripe == 0 && j < n) {
    T total = T(0);
    for (int y = 0; y < kBiasStripes; ++y) total += sm.bias[y][col];
    C.db[j] = total;
    if (updateNow) updateParam<T>(p.optimizer, C.b + j, total, C.mb ? C.mb + j : nullptr, C.vb ? C.vb + j : nullptr, hb);  // hb: forBiases
  }
  __syncthreads();
}

// Clipping by global norm, after the backward phases of a step (which then wrote dw and updated
// nothing): every block sums the squares of its share of each model's dw and db in double
// (block-wide in a fixed order) into partials[model][block]; after a barrier every block adds a
// model's partials in one fixed order (the same total in every block), records it (block 0), and
// takes its share of that model's updates with the clip factor. Two barriers per step.
template <typename T>
__device__ void clipPhase(const FusedParams& p, cg::grid_group& grid, uint64_t s, const Hyper<T>& hp0, Smem<T>& sm, Hyper<T>& hp, Hyper<T>& hb) {
  double* red = reinterpret_cast<double*>(&sm);  // 256 doubles: the union is larger, and idle between phases
  const uint64_t thread = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x, threads = uint64_t(gridDim.x) * blockDim.x;
  for (uint32_t m = 0; m < p.models; ++m) {
    double acc = 0;
    for (uint32_t l = 1; l <= p.last; ++l) {
      const nna_bound_layer<T> C = bound<T>(l, m);
      const uint64_t nw = C.units * C.fan_in, n = nw + C.units;
      for (uint64_t e = thread; e < n; e += threads) {
        const double g = e < nw ? double(C.dw[e]) : double(C.db[e - nw]);
        acc += g * g;
      }
    }
    red[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
      if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
      __syncthreads();
    }
    if (threadIdx.x == 0) p.clipPartials[uint64_t(m) * gridDim.x + blockIdx.x] = red[0];
    __syncthreads();
  }
  grid.sync();
  for (uint32_t m = 0; m < p.models; ++m) {
    // The whole block reads the partials (one thread reading all of them in turn took ~20 us of a
    // 49 us S step), then the same fixed-order tree: every block gets the same total.
    double part = 0;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) part += p.clipPartials[uint64_t(m) * gridDim.x + b];
    red[threadIdx.x] = part;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
      if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
      __syncthreads();
    }
    // hp, hb: shared slots (the kernel's), the model's hyperparameters with the clip factor.
    if (threadIdx.x == 0) {
      const double norm = sqrt(red[0]);
      if (blockIdx.x == 0) p.clipNorms[s * p.models + m] = norm;
      hp = hyperOf<T>(p, hp0, m);
      hp.gs = T(clipScale(p.opt.clipGradNorm, norm));
      hb = forBiases(hp);
    }
    __syncthreads();
    for (uint32_t l = 1; l <= p.last; ++l) {
      const nna_bound_layer<T> C = bound<T>(l, m);
      const uint64_t nw = C.units * C.fan_in, n = nw + C.units;
      for (uint64_t e = thread; e < n; e += threads) {
        if (e < nw) updateParam<T>(p.optimizer, C.w + e, C.dw[e], C.mw ? C.mw + e : nullptr, C.vw ? C.vw + e : nullptr, hp);
        else updateParam<T>(p.optimizer, C.b + (e - nw), C.db[e - nw], C.mb ? C.mb + (e - nw) : nullptr, C.vb ? C.vb + (e - nw) : nullptr, hb);
      }
    }
  }
  grid.sync();
}

// MINB: blocks per multiprocessor the registers are budgeted for (2: 128 registers a thread,
// some spilled, twice the warps; 1: up to 255, no spills). NN_ARENA_FUSED_BLOCKS_PER_SM picks
// (default 2: 39.9 against 40.8 us for a 784-128-10 SGD step on the H100).
template <typename T, int MINB>
__global__ void __launch_bounds__(256, MINB) fusedRunKernel(FusedParams p) {
  cg::grid_group grid = cg::this_grid();
  __shared__ __align__(16) Smem<T> sm;
  const uint32_t last = p.last;
  const nna_header* hd = nna_header_of(p.base);
  for (uint32_t l = threadIdx.x; l <= last; l += blockDim.x) {
    reinterpret_cast<nna_bound_layer<T>*>(boundTable)[l] = nna_bind<T>(p.base, l);
    for (uint32_t k = 0; k < NNA_KIND_COUNT; ++k) strideTable[l][k] = nna_region_stride(hd, l, nna_layer_of(p.base, l)->region[k].count, k);
  }
  __syncthreads();
  const uint32_t K = p.models;
  // Hyperparameters for the weights and the biases (forBiases), of the step and of the item's model.
  __shared__ __align__(16) unsigned char hyperBytes[4][sizeof(Hyper<T>)];
  Hyper<T>& hpStep = *reinterpret_cast<Hyper<T>*>(hyperBytes[0]);
  Hyper<T>& hbStep = *reinterpret_cast<Hyper<T>*>(hyperBytes[1]);
  Hyper<T>& hpItem = *reinterpret_cast<Hyper<T>*>(hyperBytes[2]);
  Hyper<T>& hbItem = *reinterpret_cast<Hyper<T>*>(hyperBytes[3]);
  if (p.resetStats && blockIdx.x == 0)
    for (uint32_t m = threadIdx.x; m < K; m += blockDim.x) {
      T* stats = bound<T>(last, m).stats;
      for (int i = 0; i < NNA_STATS_COUNT; ++i) stats[i] = T(0);
      stats[NNA_STAT_BAD_STEP] = T(-1);
    }
  grid.sync();
  int slot = 0;
  traceMark(p, slot);
  const uint64_t warpsInGrid = uint64_t(gridDim.x) * kWarps;
  const uint64_t warp = uint64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  const uint64_t batch = nna_header_of(p.base)->batch;
  for (uint64_t s = 0; s < p.numBatches; ++s) {
    StepInfo st;
    st.train = p.op == uint32_t(Op::Train);
    st.grad = st.train || p.op == uint32_t(Op::Grad);
    const bool clip = st.train && p.clipPartials;  // every update waits for the step's norm (clipPhase)
    st.keepDw = !(st.train && optimizerFolds(p.optimizer)) || clip;
    st.first = (p.firstBatch + s) * batch;
    st.rows = p.resident ? min(batch, p.samples - st.first) : p.rows;
    st.model = 0;
    // The step's hyperparameters (~170 bytes with the schedule) live in shared memory, read where
    // an update uses them: held in registers across the phases they made the 2-block kernel spill
    // (ptxas: 2,864 against 1,560 bytes of spill loads a thread; S step 44 against 38 us).
    __syncthreads();
    if (threadIdx.x == 0) { hpStep = hyperAt<T>(p.opt, p.lr, p.stepBase + s + 1); hbStep = forBiases(hpStep); }
    __syncthreads();
    const Hyper<T>& hp0 = hpStep;
    // Item i of a phase with n items per model is item i % n of model i / n.
    auto forModel = [&](uint32_t m) { StepInfo t = st; t.model = m; return t; };

    // ---- forward (and, for a small last layer, the output and d[L-1]) ----
    for (uint32_t l = 1; l <= last; ++l) {
      if (l == last && p.fuseOutput) {
        for (uint64_t r = warp; r < st.rows * K; r += warpsInGrid) outputRowFused<T>(p, forModel(uint32_t(r / st.rows)), uint32_t(r % st.rows), s);
      } else {
        const uint64_t tiles = tileCount<T>(p, l, kForward, st.rows);
        if (p.tile[l][kForward] == kTileBlock) {
          for (uint64_t i = blockIdx.x; i < tiles * K; i += gridDim.x) forwardBlock<T>(p, forModel(uint32_t(i / tiles)), l, i % tiles, sm);
        } else if (p.tile[l][kForward] == 0) {  // one warp a tile, spread over the blocks first
          for (uint64_t i = (threadIdx.x / 32) * uint64_t(gridDim.x) + blockIdx.x; i < tiles * K; i += warpsInGrid)
            forwardWarp<T>(p, forModel(uint32_t(i / tiles)), l, uint32_t(i % tiles));
        } else {
          for (uint64_t i = blockIdx.x; i < tiles * K; i += gridDim.x) productTile<T, kForward>(p, forModel(uint32_t(i / tiles)), l, i % tiles, sm, hp0, false);
        }
      }
      grid.sync();
      traceMark(p, slot);
      if (p.emptyPhases) { grid.sync(); traceMark(p, slot); }
    }
    if (!p.fuseOutput) {  // one warp per row
      for (uint64_t i = warp; i < st.rows * K; i += warpsInGrid) {
        const StepInfo sm1 = forModel(uint32_t(i / st.rows));
        const uint64_t r = i % st.rows;
        const nna_bound_layer<T> out = bound<T>(last, sm1.model);
        // y is shared: model 0's warp of the row writes it; every model reads the row's targets
        // where they come from (ydata through the permutation, or y as staged), the same values.
        if (sm1.model == 0) gatherTargets(p, sm1, out, r, threadIdx.x % 32, 32);
        __syncwarp();
        const T* yRow = p.resident ? out.ydata + permIndex(st.first + r, p.permA, p.permC, p.samples) * out.units : out.y + r * out.units;
        const RowResult res = outputRowWarp<T>(out.z + r * out.units, yRow, out.d + r * out.units, out.units, p.loss, st.rows, st.grad);
        if (threadIdx.x % 32 == 0) accumulateRow(p, sm1, out, r, s, res);
      }
      grid.sync();
      traceMark(p, slot);
    }
    // The step's loss joins the stats (the output phase is complete: a barrier has passed).
    if (p.op != uint32_t(Op::Forward) && blockIdx.x == gridDim.x - 1)
      for (uint32_t m = threadIdx.x; m < K; m += blockDim.x) foldLossExact(bound<T>(last, m).stats, p.lossFracBits);
    if (!st.grad) continue;

    // ---- backward, with the updates folded in ----
    // Phase l computes d[l-1] from the old w[l], and dw / db of layer l+1, whose weights have no
    // reader left (d[l] was computed one phase earlier, or with the fused output), updating them
    // in the epilogue of its own tiles; the last phase also takes layer 1. With the fused output,
    // d[L-1] exists already: the first phase is layer L-1's.
    for (uint32_t l = p.fuseOutput ? last - 1 : last; l >= 1; --l) {
      const uint32_t up = l + 1 <= last ? l + 1 : 0;  // the layer whose gradients this phase takes
      const uint64_t nW = up ? tileCount<T>(p, up, kWeightGrad, st.rows) : 0;
      const uint64_t nW1 = l == 1 ? tileCount<T>(p, 1, kWeightGrad, st.rows) : 0;
      const uint64_t nE = l > 1 ? tileCount<T>(p, l, kErrorPrev, st.rows) : 0;
      const uint64_t nB = up ? ceilDiv(nna_layer_of(p.base, up)->units, kBiasCols) : 0;
      const uint64_t nB1 = l == 1 ? ceilDiv(nna_layer_of(p.base, 1)->units, kBiasCols) : 0;
      const uint64_t total = nW + nW1 + nE + nB + nB1;
      for (uint64_t i = blockIdx.x; i < total * K; i += gridDim.x) {
        const uint32_t m = uint32_t(i / total);  // item i % total of model i / total
        const StepInfo sti = forModel(m);
        if (p.lrs) {  // the item's model has its own rate (uniform in the block: one item a block)
          __syncthreads();
          if (threadIdx.x == 0) { hpItem = hyperOf<T>(p, hp0, m); hbItem = forBiases(hpItem); }
          __syncthreads();
        }
        const Hyper<T>& hp = p.lrs ? hpItem : hpStep;
        const Hyper<T>& hb = p.lrs ? hbItem : hbStep;
        uint64_t k = i % total;
        if (k < nW) { productTile<T, kWeightGrad>(p, sti, up, k, sm, hp, st.train && !clip); continue; }
        k -= nW;
        if (k < nW1) { productTile<T, kWeightGrad>(p, sti, 1, k, sm, hp, st.train && !clip); continue; }
        k -= nW1;
        if (k < nE) { productTile<T, kErrorPrev>(p, sti, l, k, sm, hp, false); continue; }
        k -= nE;
        if (k < nB) { biasGradItem<T>(p, sti, up, k, sm, hb, st.train && !clip); continue; }
        k -= nB;
        biasGradItem<T>(p, sti, 1, k, sm, hb, st.train && !clip);
      }
      grid.sync();
      traceMark(p, slot);
      if (p.emptyPhases) { grid.sync(); traceMark(p, slot); }
    }
    if (clip) clipPhase<T>(p, grid, s, hp0, sm, hpItem, hbItem);
  }
}

// ---- host side -----------------------------------------------------------------------------

struct Device {
  int id = 0, sms = 0;
  bool cooperative = false;
};

// The current device's properties, read once per device (an arena may live on any device).
const Device& device() {
  constexpr int kMaxDevices = 64;
  static Device cache[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  int id = 0;
  CUDA_CHECK(cudaGetDevice(&id));
  if (id < 0 || id >= kMaxDevices) NNA_FAIL("NOT_SUPPORTED", "device index " + std::to_string(id) + " is beyond the " + std::to_string(kMaxDevices) + " devices nn-arena supports");
  std::call_once(once[id], [id] {
    Device r;
    int v = 0;
    r.id = id;
    CUDA_CHECK(cudaDeviceGetAttribute(&r.sms, cudaDevAttrMultiProcessorCount, r.id));
    CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrCooperativeLaunch, r.id));
    r.cooperative = v != 0;
    cache[id] = r;
  });
  return cache[id];
}

}  // namespace

int multiprocessors() { return device().sms; }

namespace {

int blocksPerSm() {
  static const int b = int(knobInt(Knob::FusedBlocksPerSm, 2, 1, 2));
  return b;
}

template <typename T>
const void* kernelFor(int perSm) {
  return perSm == 1 ? reinterpret_cast<const void*>(fusedRunKernel<T, 1>) : reinterpret_cast<const void*>(fusedRunKernel<T, 2>);
}

// Every block must be resident at once (cooperative launch): the grid is what fits.
template <typename T>
int gridBlocks() {
  static const int g = [] {
    int fits = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fits, kernelFor<T>(blocksPerSm()), 256, 0));
    return device().sms * std::min(fits, blocksPerSm());
  }();
  return g;
}

uint8_t tileFor(uint64_t M, uint64_t N, uint64_t grid) {
  for (uint64_t t : {64, 32})
    if (((M + t - 1) / t) * ((N + t - 1) / t) >= grid) return uint8_t(t);
  return 16;
}

// Products with at most this many outputs are latency-bound: the split-reduction routines.
constexpr uint64_t kSmallOutputs = uint64_t(1) << 17;

// The largest product (rows x units x fan_in) a fused run takes: beyond it the per-layer path,
// with its larger grids and cuBLAS, is faster than one block per tile in a persistent grid.
// (784-128-10 at batch 100: 2^23.3; 784-1024-1024-10 at batch 256: 2^28, where the per-layer
// path with cuBLAS measured 190 us against 640 us fused on the H100.)
constexpr uint64_t kFusedMaxWork = uint64_t(1) << 26;

template <typename T>
void launch(void* base, const nna_header& h, const std::vector<nna_layer>& L, const RunParams& rp, const Lane& lane) {
  FusedParams p{};
  p.base = base;
  p.last = h.num_layers - 1;
  p.op = uint32_t(rp.op);
  p.optimizer = h.optimizer;
  p.loss = outputLoss(L[p.last].activation, h.act_param, rp);
  p.resident = rp.resident;
  p.resetStats = rp.resetStats;
  p.fuseOutput = p.last >= 2 && L[p.last].units <= kFusedOutMax;
  p.lossFracBits = lossFracBits(h.batch);
  p.rows = rp.rows; p.samples = rp.samples; p.firstBatch = rp.firstBatch; p.numBatches = rp.numBatches;
  p.permA = rp.permA; p.permC = rp.permC; p.stepBase = rp.stepBase;
  p.lr = rp.lr;
  p.opt = rp.opt;
  p.models = uint32_t(nna_models(&h));
  const DeviceLrs lrs(rp.lrs, lane.stream);
  p.lrs = lrs.get();
  // Tiles are chosen for one model, as a one-model run chooses them (the grid does not change
  // with K): a model's sums then run in the order they would alone.
  const int grid = gridBlocks<T>();
  for (uint32_t l = 1; l <= p.last; ++l) {
    const uint64_t n = L[l].units, m = L[l].fan_in, rows = h.batch;
    const bool blockFits = ceilDiv(rows, kFbTile) * ceilDiv(n, kFbTile) <= uint64_t(grid) && knob(Knob::FusedForward, "block") != "warp";
    p.tile[l][kForward] = rows * n <= kSmallOutputs ? (blockFits ? kTileBlock : 0) : tileFor(rows, n, grid);
    p.tile[l][kWeightGrad] = n * m <= kSmallOutputs ? 0 : tileFor(n, m, grid);
    p.tile[l][kErrorPrev] = tileFor(rows, m, grid);
  }
  const bool tracing = knobOn(Knob::FusedTrace);
  p.emptyPhases = knob(Knob::FusedTrace) == "2";
  if (tracing) {
    CUDA_CHECK(cudaMalloc(&p.trace, kTraceSlots * sizeof(unsigned long long)));
    CUDA_CHECK(cudaMemset(p.trace, 0, kTraceSlots * sizeof(unsigned long long)));
  }
  // Clipping: the blocks' partial sums and every step's norms, for the run (stream-ordered).
  const bool clip = rp.clips() && rp.op == Op::Train;
  const uint64_t partials = clip ? uint64_t(grid) * p.models : 0, normCount = clip ? rp.numBatches * p.models : 0;
  struct Scratch {  // freed on every way out (cudaFree waits for the stream's work)
    double* p = nullptr;
    ~Scratch() { if (p) cudaFree(p); }
  } scratch;
  if (clip) {
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&scratch.p), (partials + normCount) * sizeof(double)));
    p.clipPartials = scratch.p;
    p.clipNorms = scratch.p + partials;
  }
  void* args[] = {&p};
  CUDA_CHECK(cudaLaunchCooperativeKernel(kernelFor<T>(blocksPerSm()), dim3(grid), dim3(256), args, 0, lane.stream));
  CUDA_CHECK(cudaStreamSynchronize(lane.stream));
  if (clip && rp.gradNorms) {
    rp.gradNorms->resize(normCount);
    CUDA_CHECK(cudaMemcpy(rp.gradNorms->data(), p.clipNorms, normCount * sizeof(double), cudaMemcpyDeviceToHost));
  }
  if (tracing) {
    unsigned long long t[kTraceSlots];
    CUDA_CHECK(cudaMemcpy(t, p.trace, sizeof t, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(p.trace));
    std::fprintf(stderr, "fused trace (grid %d, us between barriers):", grid);
    for (int i = 1; i < kTraceSlots && t[i]; ++i) std::fprintf(stderr, " %.2f", double(t[i] - t[i - 1]) / 1000.0);
    std::fprintf(stderr, "\n");
  }
}

}  // namespace

bool runFused(void* devBase, const nna_header& h, const std::vector<nna_layer>& layers, const RunParams& p, const Lane& lane) {
  static const std::string path = knob(Knob::StepPath, "auto");
  if (path == "layers") return false;
  if (!device().cooperative || h.num_layers - 1 > kMaxFusedLayers) return false;
  const uint64_t limit32 = uint64_t(1) << 31;  // the fused routines index regions in 32 bits
  for (uint32_t l = 1; l < h.num_layers; ++l) {
    const uint64_t n = layers[l].units, m = layers[l].fan_in;
    if (h.batch * n >= limit32 || h.batch * m >= limit32 || n * m + n >= limit32) return false;
    if (path != "fused" && h.batch * n * m * nna_models(&h) > kFusedMaxWork) return false;  // K models: K times the work (8 S models: per-layer 110 us, fused 156)
  }
  if (h.dtype == NNA_FLOAT64) launch<double>(devBase, h, layers, p, lane);
  else launch<float>(devBase, h, layers, p, lane);
  return true;
}

}  // namespace nna
