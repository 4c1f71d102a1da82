// fused_step.cu: every step of a run in ONE cooperative kernel. The per-layer path costs one
// launch per product or pass (about 11 for a 2-layer network, 17 for 3 layers), and for small
// networks those launches, not arithmetic, set the step time (784-128-10's arithmetic is a small
// fraction of its step). Here the grid stays resident for the whole
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
#include "run_cache.cuh"
#include "../core/env.h"

#include "fused_common.cuh"
#include "fused_products.cuh"
#include "fused_rows.cuh"

namespace nna {
namespace {

// MINB: blocks per multiprocessor the registers are budgeted for (2: 128 registers a thread,
// some spilled, twice the warps; 1: up to 255, no spills). NN_ARENA_FUSED_BLOCKS_PER_SM picks
// (default 2: on a 784-128-10 SGD step the twice as many warps outweighed the spills).
template <typename T, int MINB> __global__ void __launch_bounds__(256, MINB) fusedRunKernel(FusedParams p) {
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
  // The output rows' warps are spread over the blocks first (row r: block r % grid): a row is
  // a chain of dependent loads and shuffle trees, and 8 rows on one SM wait on each other's
  // issue slots (S's 100 rows would sit on 13 multiprocessors).
  const uint64_t warp = uint64_t(threadIdx.x / 32) * gridDim.x + blockIdx.x;
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
    // more, and the step slower. Only the
    // backward phases and the clip phase read them: the block's last warp computes them during the
    // output phase (outputPhaseDone), where it has no row or few, not at the step's start, where
    // the whole block waited on one thread's double-precision pow, sqrt and schedule.
    auto outputPhaseDone = [&] {
      if (threadIdx.x == blockDim.x - 32) {
        hpStep = hyperAt<T>(p.opt, p.lr, p.stepBase + s + 1);
        hbStep = forBiases(hpStep);
      }
    };
    const Hyper<T>& hp0 = hpStep;
    // Item i of a phase with n items per model is item i % n of model i / n.
    auto forModel = [&](uint32_t m) {
      StepInfo t = st;
      t.model = m;
      return t;
    };

    // ---- forward (and, for a small last layer, the output and d[L-1]) ----
    for (uint32_t l = 1; l <= last; ++l) {
      if (l == last && p.fuseOutput) {
        for (uint64_t r = warp; r < st.rows * K; r += warpsInGrid) outputRowFused<T>(p, forModel(uint32_t(r / st.rows)), uint32_t(r % st.rows), s);
        outputPhaseDone();
      } else {
        const uint64_t tiles = tileCount<T>(p, l, kForward, st.rows);
        if (p.tile[l][kForward] == kTileBlock) {
          for (uint64_t i = blockIdx.x; i < tiles * K; i += gridDim.x) forwardBlock<T>(p, forModel(uint32_t(i / tiles)), l, i % tiles, sm);
        } else if (p.tile[l][kForward] == 0) {  // one warp a tile, spread over the blocks first
          for (uint64_t i = warp; i < tiles * K; i += warpsInGrid) forwardWarp<T>(p, forModel(uint32_t(i / tiles)), l, uint32_t(i % tiles));
        } else {
          for (uint64_t i = blockIdx.x; i < tiles * K; i += gridDim.x) productTile<T, kForward>(p, forModel(uint32_t(i / tiles)), l, i % tiles, sm, hp0, false);
        }
      }
      grid.sync();
      traceMark(p, slot);
      if (p.emptyPhases) {
        grid.sync();
        traceMark(p, slot);
      }
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
      outputPhaseDone();
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
    uint32_t clipModel = 0;  // the model whose squares clipAcc holds
    if (clip) clipReset(p);
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
        if (clip && m != clipModel) {
          clipFlush(p, clipModel);
          clipModel = m;
        }
        if (p.lrs) {  // the item's model has its own rate (uniform in the block: one item a block)
          __syncthreads();
          if (threadIdx.x == 0) {
            hpItem = hyperOf<T>(p, hp0, m);
            hbItem = forBiases(hpItem);
          }
          __syncthreads();
        }
        const Hyper<T>& hp = p.lrs ? hpItem : hpStep;
        const Hyper<T>& hb = p.lrs ? hbItem : hbStep;
        uint64_t k = i % total;
        if (k < nW) {
          productTile<T, kWeightGrad>(p, sti, up, k, sm, hp, st.train && !clip);
          continue;
        }
        k -= nW;
        if (k < nW1) {
          productTile<T, kWeightGrad>(p, sti, 1, k, sm, hp, st.train && !clip);
          continue;
        }
        k -= nW1;
        if (k < nE) {
          productTile<T, kErrorPrev>(p, sti, l, k, sm, hp, false);
          continue;
        }
        k -= nE;
        if (k < nB) {
          biasGradItem<T>(p, sti, up, k, sm, hb, st.train && !clip);
          continue;
        }
        k -= nB;
        biasGradItem<T>(p, sti, 1, k, sm, hb, st.train && !clip);
      }
      if (clip) clipFlush(p, clipModel);
      grid.sync();
      traceMark(p, slot);
      if (p.emptyPhases) {
        grid.sync();
        traceMark(p, slot);
      }
    }
    if (clip) clipPhase<T>(p, grid, s, hpStep, hbStep, hpItem, hbItem);
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

template <typename T> const void* kernelFor(int perSm) {
  return perSm == 1 ? reinterpret_cast<const void*>(fusedRunKernel<T, 1>) : reinterpret_cast<const void*>(fusedRunKernel<T, 2>);
}

// Every block must be resident at once (cooperative launch): the grid is what fits.
template <typename T> int gridBlocks() {
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
// (784-128-10 at batch 100: 2^23.3, fused; 784-1024-1024-10 at batch 256: 2^28, where the
// per-layer path with cuBLAS is several times faster than the fused kernel.)
constexpr uint64_t kFusedMaxWork = uint64_t(1) << 26;

template <typename T> void launch(void* base, const nna_header& h, const std::vector<nna_layer>& L, const RunParams& rp, const Lane& lane, FusedNorms* norms) {
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
  p.rows = rp.rows;
  p.samples = rp.samples;
  p.firstBatch = rp.firstBatch;
  p.numBatches = rp.numBatches;
  p.permA = rp.permA;
  p.permC = rp.permC;
  p.stepBase = rp.stepBase;
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
  // Clipping: the blocks' partial sums and every step's norms, on the arena's shelf (kept
  // between runs; a run without the cache has its own).
  const bool clip = rp.clips() && rp.op == Op::Train;
  const uint64_t partials = clip ? uint64_t(grid) * p.models : 0, normCount = clip ? rp.numBatches * p.models : 0;
  const std::shared_ptr<RunCache> cache = runCacheOf(rp, lane);
  ScratchShelf own;
  if (clip) {
    double* scratch = static_cast<double*>((cache ? cache->shelf : own).take(ScratchShelf::kFusedClip, (partials + normCount) * sizeof(double)));
    p.clipPartials = scratch;
    p.clipNorms = scratch + partials;
  }
  void* args[] = {&p};
  CUDA_CHECK(cudaLaunchCooperativeKernel(kernelFor<T>(blocksPerSm()), dim3(grid), dim3(256), args, 0, lane.stream));
  // The run's end is awaited by the caller's stream sync (runCuda's), after which it reads the
  // norms: the GPU goes on to the weights' check without waiting for the host. A run without the
  // cache reads them here: its scratch goes with it.
  if (clip && cache)
    *norms = {p.clipNorms, normCount};
  else if (clip && rp.gradNorms) {
    CUDA_CHECK(cudaStreamSynchronize(lane.stream));
    rp.gradNorms->resize(normCount);
    CUDA_CHECK(cudaMemcpy(rp.gradNorms->data(), p.clipNorms, normCount * sizeof(double), cudaMemcpyDeviceToHost));
  }
  if (tracing) {
    CUDA_CHECK(cudaStreamSynchronize(lane.stream));
    unsigned long long t[kTraceSlots];
    CUDA_CHECK(cudaMemcpy(t, p.trace, sizeof t, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(p.trace));
    std::fprintf(stderr, "fused trace (grid %d, us between barriers):", grid);
    for (int i = 1; i < kTraceSlots && t[i]; ++i) std::fprintf(stderr, " %.2f", double(t[i] - t[i - 1]) / 1000.0);
    std::fprintf(stderr, "\n");
  }
}

}  // namespace

bool fusedRuns(const nna_header& h, const std::vector<nna_layer>& layers, const RunParams& p) {
  static const std::string path = knob(Knob::StepPath, "auto");
  if (path == "layers") return false;
  // One training step or forward pass on the caller's batch (step(), predict()): the per-layer
  // path replays a captured graph of it, one launch where the fused step takes its cooperative
  // launch and more.
  const bool graphs = knob(Knob::CudaGraph, "1") != "0";  // read per run, as the per-layer path reads it
  if (path != "fused" && graphs && (p.op == Op::Train || p.op == Op::Forward) && !p.resident && p.numBatches <= 1 && p.runCache) return false;
  if (!device().cooperative || h.num_layers - 1 > kMaxFusedLayers) return false;
  const uint64_t limit32 = uint64_t(1) << 31;  // the fused routines index regions in 32 bits
  for (uint32_t l = 1; l < h.num_layers; ++l) {
    const uint64_t n = layers[l].units, m = layers[l].fan_in;
    if (layers[l].op != NNA_OP_DENSE) return false;  // the fused step is a chain of dense layers
    if (h.batch * n >= limit32 || h.batch * m >= limit32 || n * m + n >= limit32) return false;
    // K models: K times the work (8 S models already run faster per layer).
    if (path != "fused" && h.batch * n * m * nna_models(&h) > kFusedMaxWork) return false;
  }
  return true;
}

void runFused(void* devBase, const nna_header& h, const std::vector<nna_layer>& layers, const RunParams& p, const Lane& lane, FusedNorms* norms) {
  if (h.dtype == NNA_FLOAT64)
    launch<double>(devBase, h, layers, p, lane, norms);
  else
    launch<float>(devBase, h, layers, p, lane, norms);
}

}  // namespace nna
