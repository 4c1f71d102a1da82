// fused_step.cu: every step of a run in ONE cooperative kernel. The per-layer path costs one
// launch per product or pass (about 11 for a 2-layer network, 17 for 3 layers), and for small
// networks those launches, not arithmetic, set the step time (76 us for 784-128-10, of which
// under 1 us is arithmetic at the H100's FP32 rate). Here the grid stays resident for the whole
// run and walks the phases of each step with a grid-wide barrier between them:
//   forward l = 1..L     (layer 1 gathers its rows straight from the resident data set and
//                         writes them to z[0]; the last layer, when it has <= 32 units, is
//                         computed one warp per row together with softmax, loss and d)
//   output               (only when the last layer was not fused with it)
//   backward l = L..1    (dw and db of layer l, d[l-1], and the update of layer l+1, whose
//                         weights nothing reads any more in this step; layer 1 updates in the
//                         epilogue of its own dw tile)
// so a step of an N-layer network is N + 1 + N barriers at most, N + N for small outputs.
// The kernel gets the arena's base and binds every region from the header, like the others;
// sums run in a fixed order, so a run is bit-identical to itself.
#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "../train/math.h"
#include "check.cuh"
#include "fused_step.h"
#include "layer_kernels.cuh"

namespace cg = cooperative_groups;

namespace nna {
namespace {

constexpr uint32_t kMaxFusedLayers = 32;  // weight layers
constexpr int kUpdateChunk = 256 * 8;     // parameters per update item

struct FusedParams {
  void* base;
  uint32_t last, op, optimizer, mse, resident, resetStats, fuseOutput;
  uint64_t rows, samples, firstBatch, numBatches, permA, permC, stepBase;
  double lr, mu, beta1, beta2, eps;
  uint8_t tile[kMaxFusedLayers + 1][3];  // [layer][mode]: 64, 32 or 16
};

struct StepInfo {
  uint64_t rows, first;  // rows of this step; first row of the epoch (resident)
  bool train, grad;
};

template <typename T>
struct Smem {
  T a[BK][64];
  T b[BK][64];
  T part[kBiasStripes][kBiasCols];
};

__device__ __forceinline__ uint64_t ceilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

template <typename T>
__device__ Hyper<T> hyperAt(const FusedParams& p, uint64_t t) {
  Hyper<T> hp;
  hp.lr = T(p.lr); hp.mu = T(p.mu); hp.b1 = T(p.beta1); hp.b2 = T(p.beta2); hp.eps = T(p.eps);
  hp.bc1 = hp.bc2 = T(1);
  if (p.optimizer == NNA_ADAM) {  // the same expressions as the host computes for the other path
    hp.bc1 = T(1.0 - pow(p.beta1, double(t)));
    hp.bc2 = T(1.0 - pow(p.beta2, double(t)));
  }
  return hp;
}

// One TILE x TILE tile of a layer's product (the tiled kernel of layer_kernels.cuh, as a device
// function over tile index `ti`). Forward of layer 1 on resident data reads its rows from xdata
// through the epoch's permutation and, in the blocks of column 0, writes them to z[0].
template <typename T, int MODE, int TILE>
__device__ void gemmTile(const FusedParams& p, const StepInfo& st, uint32_t l, uint64_t ti, Smem<T>& sm, const Hyper<T>& hp, bool updateNow) {
  constexpr int TM = TILE / 16;
  const nna_bound_layer<T> C = nna_bind<T>(p.base, l), P = nna_bind<T>(p.base, l - 1);
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
            if (bn == 0) P.z[i * m + k] = av;
          } else {
            av = P.z[i * m + k];
          }
        } else {
          av = MODE == kWeightGrad ? C.d[k * n + i] : C.d[i * n + k];
        }
      }
      sm.a[ak][ar] = av;
      const int bk = e / TILE, bc = e % TILE;
      const uint64_t kk = k0 + bk, j = bn + bc;
      T bv = T(0);
      if (kk < K && j < N) bv = MODE == kForward ? C.w[j * m + kk] : MODE == kWeightGrad ? P.z[kk * m + j] : C.w[kk * m + j];
      sm.b[bk][bc] = bv;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      T a[TM], b[TM];
#pragma unroll
      for (int i = 0; i < TM; ++i) { a[i] = sm.a[k][ty * TM + i]; b[i] = sm.b[k][tx * TM + i]; }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TM; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
  for (int i = 0; i < TM; ++i) {
    const uint64_t r = bm + ty * TM + i;
    if (r >= M) continue;
    for (int j = 0; j < TM; ++j) {
      const uint64_t c = bn + tx * TM + j;
      if (c >= N) continue;
      if (MODE == kForward) {
        C.z[r * n + c] = activate<T>(C.activation, acc[i][j] + C.b[c]);
      } else if (MODE == kWeightGrad) {
        const uint64_t e = r * m + c;
        C.dw[e] = acc[i][j];
        if (updateNow) updateParam<T>(p.optimizer, C.w + e, acc[i][j], C.mw ? C.mw + e : nullptr, C.vw ? C.vw + e : nullptr, hp);
      } else {
        P.d[r * m + c] = acc[i][j] * activationGrad<T>(P.activation, P.z[r * m + c]);
      }
    }
  }
}

template <typename T, int MODE>
__device__ void gemmTileAny(const FusedParams& p, const StepInfo& st, uint32_t l, uint64_t ti, Smem<T>& sm, const Hyper<T>& hp, bool updateNow) {
  switch (p.tile[l][MODE]) {
    case 64: gemmTile<T, MODE, 64>(p, st, l, ti, sm, hp, updateNow); break;
    case 32: gemmTile<T, MODE, 32>(p, st, l, ti, sm, hp, updateNow); break;
    default: gemmTile<T, MODE, 16>(p, st, l, ti, sm, hp, updateNow); break;
  }
}

__device__ __forceinline__ uint64_t tilesOf(const FusedParams& p, uint32_t l, int mode, uint64_t M, uint64_t N) {
  const uint64_t t = p.tile[l][mode];
  return ceilDiv(M, t) * ceilDiv(N, t);
}

// Copies row r's targets from ydata (resident runs) and finishes the row: softmax, loss, d,
// and the stats accumulators (one thread per row).
template <typename T>
__device__ void finishRow(const FusedParams& p, const StepInfo& st, const nna_bound_layer<T>& O, uint64_t r, uint64_t s) {
  const RowResult res = outputRow<T>(O.z + r * O.units, O.y + r * O.units, O.d + r * O.units, O.units, O.activation, p.mse, st.rows, st.grad);
  if (p.op == uint32_t(Op::Forward)) return;
  atomicAdd(O.stats + NNA_STAT_LOSS, T(res.loss));
  atomicAdd(O.stats + NNA_STAT_CORRECT, T(res.correct ? 1 : 0));
  if (r == 0) atomicAdd(O.stats + NNA_STAT_ROWS, T(st.rows));
  if (!isfinite(res.loss) && O.stats[NNA_STAT_BAD_STEP] < T(0)) O.stats[NNA_STAT_BAD_STEP] = T(s);
}

template <typename T>
__device__ void gatherTargets(const FusedParams& p, const StepInfo& st, const nna_bound_layer<T>& O, uint64_t r, uint32_t lane, uint32_t lanes) {
  if (!p.resident) return;
  const uint64_t k = permIndex(st.first + r, p.permA, p.permC, p.samples);
  for (uint64_t j = lane; j < O.units; j += lanes) O.y[r * O.units + j] = O.ydata[k * O.units + j];
}

// The last layer (units <= 32) and the output, one warp per row: lane j ends up with z[r][j].
template <typename T>
__device__ void outputRowFused(const FusedParams& p, const StepInfo& st, uint64_t r, uint64_t s) {
  const nna_bound_layer<T> O = nna_bind<T>(p.base, p.last), P = nna_bind<T>(p.base, p.last - 1);
  const uint32_t lane = threadIdx.x % 32;
  const uint64_t n = O.units, m = O.fan_in;
  gatherTargets(p, st, O, r, lane, 32);
  const T* zp = P.z + r * m;
  T mine = T(0);
  for (uint64_t j = 0; j < n; ++j) {
    T part = T(0);
    for (uint64_t k = lane; k < m; k += 32) part += zp[k] * O.w[j * m + k];
#pragma unroll
    for (int off = 16; off > 0; off /= 2) part += __shfl_xor_sync(0xffffffffu, part, off);
    if (lane == j) mine = part;
  }
  if (lane < n) O.z[r * n + lane] = activate<T>(O.activation, mine + O.b[lane]);
  __syncwarp();
  if (lane == 0) finishRow(p, st, O, r, s);
  __syncwarp();
}

template <typename T>
__device__ void biasGradItem(const FusedParams& p, const StepInfo& st, uint32_t l, uint64_t item, Smem<T>& sm, const Hyper<T>& hp, bool updateNow) {
  const nna_bound_layer<T> C = nna_bind<T>(p.base, l);
  const uint32_t col = threadIdx.x % kBiasCols, stripe = threadIdx.x / kBiasCols;
  const uint64_t j = item * kBiasCols + col;
  T s = T(0);
  if (j < C.units)
    for (uint64_t r = stripe; r < st.rows; r += kBiasStripes) s += C.d[r * C.units + j];
  sm.part[stripe][col] = s;
  __syncthreads();
  if (stripe == 0 && j < C.units) {
    T total = T(0);
    for (int y = 0; y < kBiasStripes; ++y) total += sm.part[y][col];
    C.db[j] = total;
    if (updateNow) updateParam<T>(p.optimizer, C.b + j, total, C.mb ? C.mb + j : nullptr, C.vb ? C.vb + j : nullptr, hp);
  }
  __syncthreads();
}

template <typename T>
__device__ void updateItem(const FusedParams& p, uint32_t l, uint64_t item, const Hyper<T>& hp) {
  const nna_bound_layer<T> C = nna_bind<T>(p.base, l);
  const uint64_t nw = C.units * C.fan_in, total = nw + C.units;
  const uint64_t end = min(total, (item + 1) * uint64_t(kUpdateChunk));
  for (uint64_t e = item * kUpdateChunk + threadIdx.x; e < end; e += blockDim.x) {
    if (e < nw) updateParam<T>(p.optimizer, C.w + e, C.dw[e], C.mw ? C.mw + e : nullptr, C.vw ? C.vw + e : nullptr, hp);
    else {
      const uint64_t i = e - nw;
      updateParam<T>(p.optimizer, C.b + i, C.db[i], C.mb ? C.mb + i : nullptr, C.vb ? C.vb + i : nullptr, hp);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(256, 2) fusedRunKernel(FusedParams p) {
  cg::grid_group grid = cg::this_grid();
  __shared__ Smem<T> sm;
  const uint32_t last = p.last;
  const nna_bound_layer<T> out = nna_bind<T>(p.base, last);
  if (p.resetStats && blockIdx.x == 0 && threadIdx.x == 0) {
    for (int i = 0; i < NNA_STATS_COUNT; ++i) out.stats[i] = T(0);
    out.stats[NNA_STAT_BAD_STEP] = T(-1);
  }
  grid.sync();
  const uint64_t warpsInGrid = uint64_t(gridDim.x) * (blockDim.x / 32);
  const uint64_t warp = uint64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  for (uint64_t s = 0; s < p.numBatches; ++s) {
    StepInfo st;
    st.train = p.op == uint32_t(Op::Train);
    st.grad = st.train || p.op == uint32_t(Op::Grad);
    st.first = (p.firstBatch + s) * nna_header_of(p.base)->batch;
    st.rows = p.resident ? min(nna_header_of(p.base)->batch, p.samples - st.first) : p.rows;
    const Hyper<T> hp = hyperAt<T>(p, p.stepBase + s + 1);

    // ---- forward ----
    for (uint32_t l = 1; l <= last; ++l) {
      if (l == last && p.fuseOutput) {
        for (uint64_t r = warp; r < st.rows; r += warpsInGrid) outputRowFused<T>(p, st, r, s);
      } else {
        const nna_layer* L = nna_layer_of(p.base, l);
        const uint64_t tiles = tilesOf(p, l, kForward, st.rows, L->units);
        for (uint64_t i = blockIdx.x; i < tiles; i += gridDim.x) gemmTileAny<T, kForward>(p, st, l, i, sm, hp, false);
      }
      grid.sync();
    }
    if (!p.fuseOutput) {
      for (uint64_t r = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < st.rows; r += uint64_t(gridDim.x) * blockDim.x) {
        gatherTargets(p, st, out, r, 0, 1);
        finishRow(p, st, out, r, s);
      }
      grid.sync();
    }
    if (!st.grad) continue;

    // ---- backward, with the updates folded in ----
    for (uint32_t l = last; l >= 1; --l) {
      const nna_layer* L = nna_layer_of(p.base, l);
      const uint64_t n = L->units, m = L->fan_in;
      const bool updateHere = st.train && l == 1;  // nothing reads w[1] after its dw
      const uint64_t nW = tilesOf(p, l, kWeightGrad, n, m);
      const uint64_t nB = ceilDiv(n, kBiasCols);
      const uint64_t nE = l > 1 ? tilesOf(p, l, kErrorPrev, st.rows, m) : 0;
      uint64_t nU = 0;
      if (st.train && l < last) {
        const nna_layer* U = nna_layer_of(p.base, l + 1);
        nU = ceilDiv(U->units * (U->fan_in + 1), kUpdateChunk);
      }
      for (uint64_t i = blockIdx.x; i < nW + nB + nE + nU; i += gridDim.x) {
        if (i < nW) gemmTileAny<T, kWeightGrad>(p, st, l, i, sm, hp, updateHere);
        else if (i < nW + nB) biasGradItem<T>(p, st, l, i - nW, sm, hp, updateHere);
        else if (i < nW + nB + nE) gemmTileAny<T, kErrorPrev>(p, st, l, i - nW - nB, sm, hp, false);
        else updateItem<T>(p, l + 1, i - nW - nB - nE, hp);
      }
      grid.sync();
    }
  }
}

// ---- host side -----------------------------------------------------------------------------

int envInt(const char* name, int fallback) {
  const char* e = std::getenv(name);
  return e && *e ? std::atoi(e) : fallback;
}

struct Device {
  int id = 0, sms = 0;
  bool cooperative = false;
};

const Device& device() {
  static const Device d = [] {
    Device r;
    int v = 0;
    CUDA_CHECK(cudaGetDevice(&r.id));
    CUDA_CHECK(cudaDeviceGetAttribute(&r.sms, cudaDevAttrMultiProcessorCount, r.id));
    CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrCooperativeLaunch, r.id));
    r.cooperative = v != 0;
    return r;
  }();
  return d;
}

template <typename T>
int gridBlocks() {
  static const int g = [] {
    int perSm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, fusedRunKernel<T>, 256, 0));
    // Two blocks per multiprocessor hide the latency of one block's loads behind the other's
    // arithmetic; more make every grid barrier slower. NN_ARENA_FUSED_BLOCKS_PER_SM overrides.
    const int want = std::max(1, envInt("NN_ARENA_FUSED_BLOCKS_PER_SM", 2));
    return device().sms * std::min(perSm, want);
  }();
  return g;
}

uint8_t tileFor(uint64_t M, uint64_t N, uint64_t grid) {
  for (uint64_t t : {64, 32})
    if (((M + t - 1) / t) * ((N + t - 1) / t) >= grid) return uint8_t(t);
  return 16;
}

// The largest product (rows x units x fan_in) a fused run takes: beyond it the per-layer path,
// with its larger grids and cuBLAS, is faster than one block per tile in a persistent grid.
constexpr uint64_t kFusedMaxWork = uint64_t(1) << 29;

template <typename T>
void launch(void* base, const nna_header& h, const std::vector<nna_layer>& L, const RunParams& rp, const Lane& lane) {
  FusedParams p{};
  p.base = base;
  p.last = h.num_layers - 1;
  p.op = uint32_t(rp.op);
  p.optimizer = h.optimizer;
  p.mse = rp.loss == Loss::Mse;
  p.resident = rp.resident;
  p.resetStats = rp.resetStats;
  p.fuseOutput = p.last >= 2 && L[p.last].units <= 32;
  p.rows = rp.rows; p.samples = rp.samples; p.firstBatch = rp.firstBatch; p.numBatches = rp.numBatches;
  p.permA = rp.permA; p.permC = rp.permC; p.stepBase = rp.stepBase;
  p.lr = rp.lr; p.mu = rp.momentum; p.beta1 = rp.beta1; p.beta2 = rp.beta2; p.eps = rp.eps;
  const int grid = gridBlocks<T>();
  for (uint32_t l = 1; l <= p.last; ++l) {
    const uint64_t n = L[l].units, m = L[l].fan_in, rows = h.batch;
    p.tile[l][kForward] = tileFor(rows, n, grid);
    p.tile[l][kWeightGrad] = tileFor(n, m, grid);
    p.tile[l][kErrorPrev] = tileFor(rows, m, grid);
  }
  void* args[] = {&p};
  CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(fusedRunKernel<T>), dim3(grid), dim3(256), args, 0, lane.stream));
  CUDA_CHECK(cudaStreamSynchronize(lane.stream));
}

}  // namespace

bool runFused(void* devBase, const nna_header& h, const std::vector<nna_layer>& layers, const RunParams& p, const Lane& lane) {
  static const std::string path = [] { const char* e = std::getenv("NN_ARENA_STEP_PATH"); return std::string(e ? e : "auto"); }();
  if (path == "layers") return false;
  if (!device().cooperative || h.num_layers - 1 > kMaxFusedLayers) return false;
  if (path != "fused")
    for (uint32_t l = 1; l < h.num_layers; ++l)
      if (h.batch * layers[l].units * layers[l].fan_in > kFusedMaxWork) return false;
  if (h.dtype == NNA_FLOAT64) launch<double>(devBase, h, layers, p, lane);
  else launch<float>(devBase, h, layers, p, lane);
  return true;
}

}  // namespace nna
