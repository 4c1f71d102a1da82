// fused_common.cuh: the fused kernel's parameters, step info, tile constants and per-model binding (fused_step.cu).
// Included by fused_step.cu only (one translation unit: the anonymous namespace is its own).
#pragma once

#include <cooperative_groups.h>

#include <cmath>
#include <cstdint>

#include "../train/math.h"
#include "../train/phases.h"
#include "check.cuh"
#include "layer_kernels.cuh"
#include "model_lrs.cuh"

namespace cg = cooperative_groups;

namespace nna {
namespace {

constexpr uint32_t kMaxFusedLayers = 32;  // weight layers

struct FusedParams {
  void* base;
  uint32_t last, op, optimizer, resident, resetStats, fuseOutput;
  OutputLoss loss;    // the output layer's activation, the loss, its label smoothing (losses.h)
  uint32_t models;    // K networks of one shape (nna_models): every phase's items x K
  const double* lrs;  // device copy of RunParams::lrs (model m's lr), or null: lr for all
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
  bool keepDw;     // write dw: not for SGD training, whose update is folded (no dw is read)
  uint32_t model;  // the model whose copies this item works on
};

constexpr int kWarps = 8;                                // 256 threads
constexpr int kFwdRows = 4, kFwdCols = 8, kDwRows = 16;  // output tiles of the latency-bound products
static_assert(kFwdRows * kFwdCols == 32, "forwardWarp leaves one output per lane");
// forwardBlock: an 8 x 8 output tile per block, the reduction in 256-wide slices held in shared
// memory, split over 4 parts of 64 (64 outputs x 4 parts = the block's 256 threads).
constexpr int kFbTile = 8, kFbSlice = 256, kFbParts = 4;
static_assert(kFbTile * kFbTile * kFbParts == 256, "forwardBlock: one output part per thread");
static_assert(2 * kFbTile * kFbSlice == 16 * 256, "forwardBlock: 16 loads per thread per slice");

template <typename T> union Smem {
  struct {
    T a[BK][64];
    T b[BK][64];
  } tile;                           // shared-memory product tiles
  T dwPart[kWarps][kDwRows][32];    // dw: per-warp partial sums
  T bias[kBiasStripes][kBiasCols];  // db: per-stripe partial sums
  struct {
    T x[kFbTile][kFbSlice + 1];
    T w[kFbTile][kFbSlice + 1];
    T part[kFbParts][kFbTile * kFbTile];
  } fwd;  // forwardBlock
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
template <typename T> __device__ __forceinline__ nna_bound_layer<T> bound(uint32_t l, uint32_t m) {
  nna_bound_layer<T> r = reinterpret_cast<const nna_bound_layer<T>*>(boundTable)[l];
  if (m == 0) return r;
  const uint64_t* st = strideTable[l];
  auto at = [&](T* q, uint32_t k) { return q ? reinterpret_cast<T*>(reinterpret_cast<char*>(q) + m * st[k]) : q; };
  r.z = at(r.z, NNA_Z);
  r.b = at(r.b, NNA_B);
  r.w = at(r.w, NNA_W);
  r.d = at(r.d, NNA_D);
  r.db = at(r.db, NNA_DB);
  r.dw = at(r.dw, NNA_DW);
  r.mw = at(r.mw, NNA_MW);
  r.mb = at(r.mb, NNA_MB);
  r.vw = at(r.vw, NNA_VW);
  r.vb = at(r.vb, NNA_VB);
  r.stats = at(r.stats, NNA_STATS);  // y, xdata, ydata: shared
  r.pre = at(r.pre, NNA_Z);          // the second half of z
  return r;
}

// Clipping: each thread's running sum of the squares of the gradients its epilogues wrote (for
// the model clipFlush last named), and the block's per-warp totals. The dw / db epilogues add to
// it in their own fixed order, so the norm needs no pass over the gradients and no extra barrier.
__shared__ double clipAcc[256];
__shared__ double clipWarp[kWarps];

// Whether this step's epilogues accumulate squares (a Train step of a clipping run).
__device__ __forceinline__ bool clipping(const FusedParams& p, const StepInfo& st) { return st.train && p.clipPartials; }

__device__ __forceinline__ void clipAdd(double g) { clipAcc[threadIdx.x] += g * g; }

// Model m's hyperparameters: the step's, with its own learning rate (scheduled as hyperAt does).
template <typename T> __device__ __forceinline__ Hyper<T> hyperOf(const FusedParams& p, const Hyper<T>& hp, uint32_t m) { return p.lrs ? withLr(hp, p.lrs[m]) : hp; }

}  // namespace
}  // namespace nna
