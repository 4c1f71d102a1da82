// run_buffers.cuh: the per-layer path's device buffers beside the arena (the TF32 workspace, the
// 16-bit copies, cuBLASLt's scratch, the clipping scratch, the loss scale), each on the arena's
// ScratchShelf (scratch_shelf.h), and the kernels that fill them.
// Included by cuda_train.cu only (its anonymous namespace).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../include/nn_arena.h"
#include "../train/half_copies.h"
#include "../train/loss_scale.h"
#include "check.cuh"
#include "cublaslt_loader.h"
#include "layer_kernels.cuh"
#include "scratch_shelf.h"

namespace nna {
namespace {

// The workspace of the TF32 precisions through cuBLAS. tf32x3: the big and small parts of two
// operands (slot 0: a weight matrix or z[l-1]; slot 1: z[l-1] or d[l]). Both modes: d[l]
// transposed (units x rows), so that the weight-gradient product reads both operands in a
// layout cuBLAS's TF32 kernels run fast (its "nt" kernel for z^T d is much slower than its "nn"
// one for the same product: docs/cuda.md, "Precision"). Sized for the largest layer at the batch;
// with `firstApart` layer 1's d^T has its own (its product runs beside the layers above's:
// LayerRun::gradientWork). It lies outside the arena on purpose: it depends on a run
// parameter, not on the layout (an arena or checkpoint is the same whichever precision trains it).
class Tf32Workspace {
 public:
  void allocate(const nna_header& h, const std::vector<nna_layer>& layers, bool split, bool firstApart, ScratchShelf& shelf) {
    for (uint32_t l = 1; l < h.num_layers; ++l) {
      const uint64_t n = layers[l].units, m = layers[l].fan_in;
      if (split) {
        elements_[0] = std::max({elements_[0], n * m, h.batch * m});
        elements_[1] = std::max({elements_[1], h.batch * m, h.batch * n});
      }
      transposed_ = std::max(transposed_, h.batch * n);
    }
    first_ = firstApart ? h.batch * layers[1].units : 0;
    base_ = static_cast<float*>(shelf.take(ScratchShelf::kTf32, (2 * (elements_[0] + elements_[1]) + transposed_ + first_) * sizeof(float)));
  }
  float* slot(int i) const { return base_ + (i ? 2 * elements_[0] : 0); }
  uint64_t slotElements(int i) const { return elements_[i]; }
  // d[l]^T's room: layer 1's own where it has one.
  float* transposed(uint32_t l) const { return base_ + 2 * (elements_[0] + elements_[1]) + (l == 1 && first_ ? transposed_ : 0); }

 private:
  float* base_ = nullptr;
  uint64_t elements_[2] = {0, 0};
  uint64_t transposed_ = 0;
  uint64_t first_ = 0;
};

// Precisions bf16 and fp16: the products' operands rounded to 16 bits, each written once per
// step by the pass that makes it (z[l] by the bias-activation pass, d[l-1] by the
// activation-gradient pass) or by one cast (the inputs z[0], d[L], each weight matrix before its
// forward product, which the error product then reuses: the update comes after both). Each
// layer's d has its own (halfCopiesLayout). The fp32 values stay in the arena (the masters); the
// copies lie beside it, like Tf32Workspace, and are made again by each run.
class HalfCopies {
 public:
  // `copies(l, kind)`: how many copies region (l, kind) has in the arena (K, or 1 where the
  // models share it: z[0]). Where each copy lies: halfCopiesLayout (csrc/train/half_copies.h),
  // which the addon's halfCopyBytes reports too.
  template <typename Copies> void allocate(const nna_header& h, const std::vector<nna_layer>& L, bool fp16, Copies copies, ScratchShelf& shelf) {
    layout_ = halfCopiesLayout(h, L, copies);
    fp16_ = fp16;
    base_ = static_cast<uint16_t*>(shelf.take(ScratchShelf::kHalf, layout_.total * sizeof(uint16_t)));
  }
  bool active() const { return base_ != nullptr; }
  bool fp16() const { return fp16_; }
  HalfOut z(uint32_t l) const { return of(layout_.z[l]); }
  HalfOut w(uint32_t l) const { return of(layout_.w[l]); }
  HalfOut d(uint32_t l) const { return of(layout_.d[l]); }

 private:
  HalfOut of(const HalfCopyAt& c) const { return {base_ + c.at, fp16_, c.stride}; }
  uint16_t* base_ = nullptr;
  bool fp16_ = false;
  HalfCopiesLayout layout_;
};

// The cuBLASLt products' scratch (cublaslt_loader.h), beside the arena like Tf32Workspace: the
// workspace their algorithms may use (kLtMaxWorkspace, what the heuristics are offered); per
// hidden ReLU layer, the bitmask its forward epilogue writes (where the unit passed) for the
// error product's ReLU-derivative epilogue: a bit per element, rows of the units rounded up to
// 128 bits (cuBLASLt's rule for the mask's leading dimension); and one layer's db, where a
// compact plan's error product leaves db[l-1] until layer l-1's turn (its bytes may be shared
// with what layer l still needs).
class LtScratch {
 public:
  // `work`: the products' workspace bytes; `full`: every epilogue's buffers (the parked db and the
  // ReLU masks), not only the forward products' workspace.
  void allocate(const nna_header& h, const std::vector<nna_layer>& L, ScratchShelf& shelf, size_t work, bool full) {
    mask_.assign(h.num_layers, {});
    work_ = (work + 255) / 256 * 256;
    uint64_t total = work_, units = 0;
    for (uint32_t l = 1; l < h.num_layers; ++l) units = std::max(units, L[l].units);
    parked_ = total;
    if (full) total += (units * sizeof(float) + 255) / 256 * 256;
    for (uint32_t l = 1; full && l + 1 < h.num_layers; ++l) {
      if (L[l].activation != NNA_ACT_RELU) continue;
      const uint64_t ld = (L[l].units + 127) / 128 * 128;
      mask_[l] = {total, ld};
      total += (ld / 8 * h.batch + 255) / 256 * 256;
    }
    base_ = total ? static_cast<char*>(shelf.take(ScratchShelf::kLt, total)) : nullptr;
  }
  void* work() const { return base_; }
  size_t workBytes() const { return work_; }
  float* parked() const { return reinterpret_cast<float*>(base_ + parked_); }
  // Layer l's ReLU mask and its leading dimension in bits (null: the layer has none).
  void* mask(uint32_t l) const { return mask_[l].ld ? base_ + mask_[l].at : nullptr; }
  int64_t maskLd(uint32_t l) const { return int64_t(mask_[l].ld); }

 private:
  struct Mask {
    uint64_t at = 0, ld = 0;
  };
  char* base_ = nullptr;
  size_t work_ = 0;
  uint64_t parked_ = 0;
  std::vector<Mask> mask_;
};

// Regions rounded to 16 bits (nearest even) in one launch (grid y: the region; grid z: the
// model, whose source lies srcStride elements after the one before: 0, one copy), for the bf16 /
// fp16 products' operands: one region's copy, or the weight matrices that moved since their
// copies were made, before a step's first product.
constexpr unsigned kMaxCasts = 8;
struct HalfCasts {
  const float* src[kMaxCasts];
  uint64_t srcStride[kMaxCasts];
  HalfOut dst[kMaxCasts];
  uint64_t n[kMaxCasts];
};
// Four values a thread where the bytes are aligned for it (16-byte loads, 8-byte stores): with
// one a thread the cast took several times what moving its bytes takes. Each value rounds as
// HalfOut::store rounds it.
static __global__ void halfCastsKernel(HalfCasts c) {
  const unsigned j = blockIdx.y;
  if (blockIdx.z > 0 && c.srcStride[j] == 0) return;  // a region the models share: one copy
  const float* src = c.src[j] + uint64_t(blockIdx.z) * c.srcStride[j];
  const HalfOut& dst = c.dst[j];
  const uint64_t n = c.n[j], first = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x, step = uint64_t(gridDim.x) * blockDim.x;
  uint64_t done = 0;
  if ((reinterpret_cast<uintptr_t>(src) & 15) == 0 && dst.quads()) {
    const uint64_t quads = n / 4;
    const float4* in = reinterpret_cast<const float4*>(src);
    for (uint64_t q = first; q < quads; q += step) dst.storeQuad(q, in[q]);
    done = quads * 4;
  }
  for (uint64_t i = done + first; i < n; i += step) dst.store(i, src[i]);
}

// Dynamic loss scaling's state on the device for one run (loss_scale.h; on the shelf, like
// ClipScratch): set from RunParams::lossScale at the start, moved by each step's
// lossScaleKernel (so a captured step replays with it), read back at the end.
class DeviceLossScale {
 public:
  void allocate(const LossScale& start, ScratchShelf& shelf, cudaStream_t s) {
    host_ = start;
    state_ = static_cast<LossScale*>(shelf.take(ScratchShelf::kLossScale, sizeof(LossScale)));
    CUDA_CHECK(cudaMemcpyAsync(state_, &host_, sizeof(LossScale), cudaMemcpyHostToDevice, s));
  }
  bool active() const { return state_ != nullptr; }
  LossScale* get() const { return state_; }
  // After the stream is synchronised: the state the run left.
  void read(LossScale* out) const {
    if (!out || !state_) return;
    CUDA_CHECK(cudaMemcpy(out, state_, sizeof(LossScale), cudaMemcpyDeviceToHost));
  }

 private:
  LossScale* state_ = nullptr;
  LossScale host_;  // the copy's source, alive until the copy ran
};

// out (cols x rows, row-major) = in (rows x cols, row-major) transposed: 32 x 32 tiles through
// shared memory (a padded column: no bank conflicts), both sides coalesced.
static __global__ void transposeKernel(const float* in, float* out, uint64_t rows, uint64_t cols) {
  __shared__ float tile[32][33];
  const uint64_t c0 = uint64_t(blockIdx.x) * 32, r0 = uint64_t(blockIdx.y) * 32;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const uint64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = in[r * cols + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const uint64_t c = c0 + i, r = r0 + threadIdx.x;
    if (r < rows && c < cols) out[c * rows + r] = tile[threadIdx.x][i];
  }
}

// An SGD run with a scheduled lr, folded into cuBLAS's products: they read alpha = -lr and
// beta = 1 from here (cuBLAS in device pointer mode), written by one launch a step whose argument
// a graph updates in place (a cuBLAS node's host scalars cannot be).
template <typename T> class FoldScalars {
 public:
  void allocate(ScratchShelf& shelf) { base_ = static_cast<T*>(shelf.take(ScratchShelf::kFold, 2 * sizeof(T))); }
  T* get() const { return base_; }

 private:
  T* base_ = nullptr;
};

template <typename T> static __global__ void foldScalarsKernel(T* s, T alpha) {
  s[0] = alpha;
  s[1] = T(1);
}

// A clipping run's device scratch (on the shelf, like Tf32Workspace): the
// partial sums of squares, each model's clip factor, and the norm of every step (read back once
// at the end of the run into RunParams::gradNorms).
class ClipScratch {
 public:
  void allocate(unsigned models, uint32_t layers, uint64_t steps, ScratchShelf& shelf, cudaStream_t s) {
    models_ = models;
    layers_ = layers;
    steps_ = steps;
    const uint64_t n = uint64_t(models) * layers * kNormBlocks + models + steps * models;
    base_ = static_cast<double*>(shelf.take(ScratchShelf::kClip, n * sizeof(double)));
    CUDA_CHECK(cudaMemsetAsync(base_, 0, n * sizeof(double), s));  // layer 0's partials stay 0
  }
  bool active() const { return base_ != nullptr; }
  double* partials() const { return base_; }
  double* scale() const { return base_ + uint64_t(models_) * layers_ * kNormBlocks; }
  double* norms(uint64_t step) const { return scale() + models_ + step * models_; }
  // After the stream is synchronised: every step's norms into `out`.
  void readNorms(std::vector<double>* out) const {
    if (!out || !base_) return;
    out->resize(steps_ * models_);
    CUDA_CHECK(cudaMemcpy(out->data(), norms(0), out->size() * sizeof(double), cudaMemcpyDeviceToHost));
  }

 private:
  double* base_ = nullptr;
  unsigned models_ = 0;
  uint32_t layers_ = 0;
  uint64_t steps_ = 0;
};

}  // namespace
}  // namespace nna
