// cuda_train.cu: one training / evaluation run on the CUDA backend. Two paths, same results
// up to float rounding order (bit-identical run to run on each):
//   - fused (fused_step.cu): every step of the run in ONE cooperative kernel, for small
//     networks, where launch latency and not arithmetic bounds a step;
//   - per layer (here): one launch per product or pass, products through cuBLAS when it is
//     found at run time (cublas_loader.cc), else the tiled kernels of layer_kernels.cuh. A
//     memory scheduler can act between the launches (layer_hooks.h).
// Every kernel receives only the arena's device base (plus scalars) and binds from the header.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../core/failure.h"
#include "../include/nn_arena.h"
#include "../train/train.h"
#include "../core/env.h"
#include "check.cuh"
#include "cuda_train.h"
#include "cublas_loader.h"
#include "fused_step.h"
#include "grad_sync.h"
#include "layer_hooks.h"
#include "layer_kernels.cuh"

namespace nna {
namespace {

template <typename T>
class LayerRun {
 public:
  LayerRun(void* base, const nna_header& h, const std::vector<nna_layer>& layers, const RunParams& p, const Lane& lane, LayerHooks* hooks, GradSync* sync)
      : base_(base), h_(h), L_(layers), p_(p), lane_(lane), hooks_(hooks), sync_(sync), s_(lane.stream), last_(h.num_layers - 1), sms_(multiprocessors()), frac_(lossFracBits(h.batch)),
        blas_(lane.blas && productsUseBlas(h, layers)) {}

  // Returns whether the products went through cuBLAS.
  bool run() {
    if (hooks_) hooks_->beginRun(s_, p_.numBatches);
    if (p_.resetStats) { resetStatsKernel<T><<<1, 1, 0, s_>>>(base_, last_); launched(); }
    if (sync_) sync_->beginRun(s_, p_.resetStats);
    const bool grad = p_.op == Op::Train || p_.op == Op::Grad;
    const GradSync::Update update = [this](uint32_t l, cudaStream_t stream) {
      const Hyper<T> hp = hyper(stepNow_);
      updateKernel<T><<<blocksFor(L_[l].units * (L_[l].fan_in + 1)), kThreads, 0, stream>>>(base_, l, h_.optimizer, hp);
      launched();
    };
    for (uint64_t s = 0; s < p_.numBatches; ++s) {
      const StepRows sr = stepRows(h_.batch, p_, s);
      // A data-parallel replica may have no rows of the group's last step: it contributes zero
      // gradients to the reduction and still takes the step.
      const uint64_t rows = sr.rows;
      if (rows) {
        if (p_.resident) gather(sr);
        for (uint32_t l = 1; l <= last_; ++l) {
          before(Stage::Forward, l);
          forward(l, rows);
          after(Stage::Forward, l);
        }
        before(Stage::Output, last_);
        if (L_[last_].units > 32 && L_[last_].units <= kOutBlockMaxUnits)
          outputBlockKernel<T><<<rowBlocks(rows), 256, 0, s_>>>(base_, last_, rows, sr.scale, p_.loss == Loss::Mse, grad, p_.op != Op::Forward, s, frac_);
        else if (L_[last_].units > 32)
          outputWarpKernel<T><<<blocksFor(rows * 32), kThreads, 0, s_>>>(base_, last_, rows, sr.scale, p_.loss == Loss::Mse, grad, p_.op != Op::Forward, s, frac_);
        else
          outputKernel<T><<<blocksFor(rows), kThreads, 0, s_>>>(base_, last_, rows, sr.scale, p_.loss == Loss::Mse, grad, p_.op != Op::Forward, s, frac_);
        launched();
        if (p_.op != Op::Forward) { foldStatsKernel<T><<<1, 1, 0, s_>>>(base_, last_, frac_); launched(); }
        after(Stage::Output, last_);
      }
      if (grad) {
        stepNow_ = p_.stepBase + s + 1;
        const Hyper<T> hp = hyper(stepNow_);
        // Layer l's update right after its backward pass: d[l-1] has been computed with the old
        // w[l] by then, and nothing later reads w[l], so the order gives the same values as
        // updating every layer at the end, with one pass less over each layer's memory.
        for (uint32_t l = last_; l >= 1; --l) {
          before(Stage::Backward, l);
          bool folded = false;
          if (rows) folded = backward(l, rows, hp);
          else zeroGradients(l);
          if (sync_) sync_->gradientsReady(l, s_, p_.op == Op::Train ? update : GradSync::Update());
          else if (p_.op == Op::Train && !folded) update(l, s_);
          after(Stage::Backward, l);
        }
        if (sync_) sync_->endStep(s_);
      }
      if (hooks_) hooks_->endStep(s, s_);
    }
    if (sync_) sync_->endRun(s_);
    CUDA_CHECK(cudaStreamSynchronize(s_));
    return blas_;
  }

 private:
  void launched() { CUDA_CHECK(cudaGetLastError()); }
  void before(Stage ph, uint32_t l) { if (hooks_) hooks_->before(ph, l, s_); }
  void after(Stage ph, uint32_t l) { if (hooks_) hooks_->after(ph, l, s_); }

  // Host-side address of a region on the device, from the validated header copy (cuBLAS takes
  // pointers; kernels bind the same offsets themselves).
  T* at(uint32_t l, uint32_t kind) const {
    if (void* moved = hooks_ ? hooks_->address(l, kind) : nullptr) return static_cast<T*>(moved);
    return reinterpret_cast<T*>(static_cast<char*>(base_) + L_[l].region[kind].offset);
  }

  Hyper<T> hyper(uint64_t t) const { return hyperAt<T>(p_.lr, p_.momentum, p_.beta1, p_.beta2, p_.eps, t); }

  void gather(const StepRows& sr) {
    before(Stage::Gather, 0);
    gatherKernel<T><<<rowBlocks(sr.rows), kThreads, 0, s_>>>(base_, last_, sr.first, sr.rows, p_.permA, p_.permC, p_.samples);
    launched();
    after(Stage::Gather, 0);
  }

  // No rows this step: the layer's gradients are zero (db and dw, one memset each).
  void zeroGradients(uint32_t l) {
    CUDA_CHECK(cudaMemsetAsync(at(l, NNA_DB), 0, L_[l].region[NNA_DB].count * sizeof(T), s_));
    CUDA_CHECK(cudaMemsetAsync(at(l, NNA_DW), 0, L_[l].region[NNA_DW].count * sizeof(T), s_));
  }

  // The tiled product of `MODE` over an M x N result, with the largest tile that still gives
  // at least one block per multiprocessor (64, then 32, then 16).
  template <int MODE>
  void tiled(uint32_t l, uint64_t rows, uint64_t M, uint64_t N) {
    auto blocks = [&](uint64_t tile) { return ((M + tile - 1) / tile) * ((N + tile - 1) / tile); };
    auto grid = [&](uint64_t tile) { return dim3(unsigned((N + tile - 1) / tile), unsigned((M + tile - 1) / tile)); };
    if (blocks(64) >= uint64_t(sms_)) gemmKernel<T, MODE, 64><<<grid(64), 256, 0, s_>>>(base_, l, rows);
    else if (blocks(32) >= uint64_t(sms_)) gemmKernel<T, MODE, 32><<<grid(32), 256, 0, s_>>>(base_, l, rows);
    else gemmKernel<T, MODE, 16><<<grid(16), 256, 0, s_>>>(base_, l, rows);
    launched();
  }

  // Row-major products through column-major cuBLAS: a row-major r x c matrix is the
  // column-major c x r matrix (its transpose) with leading dimension c.
  void forward(uint32_t l, uint64_t rows) {
    const uint64_t n = L_[l].units, m = L_[l].fan_in;
    if (!blas_) return tiled<kForward>(l, rows, rows, n);
    // z[l]^T (n x rows) = w (n x m) . z[l-1]^T (m x rows)
    blasGemm(lane_, true, false, int(n), int(rows), int(m), T(1), at(l, NNA_W), int(m), at(l - 1, NNA_Z), int(m), T(0), at(l, NNA_Z), int(n));
    biasActivateKernel<T><<<rowBlocks(rows), kThreads, 0, s_>>>(base_, l, rows);
    launched();
  }

  // dw, db and d[l-1] of layer l. Returns true when the layer was also updated here: SGD
  // training through cuBLAS folds w -= lr * dw into the product (alpha = -lr, beta = 1), which
  // saves writing dw and a read-modify-write pass over w and dw (about 2% of a step of the
  // 4096-wide network; dw is then not written), and the bias step into the bias-gradient
  // kernel. d[l-1] is computed first, from the old w.
  bool backward(uint32_t l, uint64_t rows, const Hyper<T>& hp) {
    const uint64_t n = L_[l].units, m = L_[l].fan_in;
    // Not in a data-parallel group: the step must use the group's gradient, not this replica's.
    const bool fold = blas_ && p_.op == Op::Train && h_.optimizer == NNA_SGD && !sync_;
    biasGradKernel<T><<<unsigned((n + kBiasCols - 1) / kBiasCols), dim3(kBiasCols, kBiasStripesWide), 0, s_>>>(base_, l, rows, fold, h_.optimizer, hp);
    launched();
    if (!blas_) {
      tiled<kWeightGrad>(l, rows, n, m);
      if (l > 1) tiled<kErrorPrev>(l, rows, rows, m);
      return false;
    }
    if (l > 1) {
      // d[l-1]^T (m x rows) = w^T (m x n) . d^T (n x rows), then times act'(z[l-1])
      blasGemm(lane_, false, false, int(m), int(rows), int(n), T(1), at(l, NNA_W), int(m), at(l, NNA_D), int(n), T(0), at(l - 1, NNA_D), int(m));
      activationGradKernel<T><<<blocksFor(rows * m), kThreads, 0, s_>>>(base_, l, rows);
      launched();
    }
    // dw^T (m x n) = z[l-1]^T (m x rows) . d (rows x n)   [or w^T += -lr * that]
    blasGemm(lane_, false, true, int(m), int(n), int(rows), fold ? -hp.lr : T(1), at(l - 1, NNA_Z), int(m), at(l, NNA_D), int(n),
             fold ? T(1) : T(0), at(l, fold ? NNA_W : NNA_DW), int(m));
    return fold;
  }

  void* base_;
  const nna_header& h_;
  const std::vector<nna_layer>& L_;
  const RunParams& p_;
  const Lane& lane_;
  LayerHooks* hooks_;
  GradSync* sync_;
  uint64_t stepNow_ = 0;  // the optimizer step being taken (Adam's t), for `update`
  cudaStream_t s_;
  uint32_t last_;
  int sms_;
  int frac_;  // fraction bits of the fixed-point loss sum for this batch size
  bool blas_;
};

}  // namespace

bool productsUseBlas(const nna_header& h, const std::vector<nna_layer>& layers) {
  // NN_ARENA_GEMM=tiled keeps the products on nn-arena's own kernels even where cuBLAS loaded.
  static const bool tiledOnly = knob(Knob::Gemm) == "tiled";
  if (!cublasAvailable() || tiledOnly || h.batch > INT_MAX) return false;
  for (const nna_layer& l : layers)
    if (l.units > INT_MAX || l.fan_in > INT_MAX) return false;
  return true;
}

const char* runCuda(void* devBase, const void* header, const RunParams& p, LayerHooks* hooks, GradSync* sync) {
  checkRun(header, p);
  if (p.reduce && !sync) NNA_FAIL("NOT_SUPPORTED", "reduce needs an arena in a data-parallel group (a communicator)");
  if (!p.reduce) sync = nullptr;
  nna_header h;
  std::memcpy(&h, header, sizeof h);
  std::vector<nna_layer> layers(h.num_layers);
  std::memcpy(layers.data(), static_cast<const char*>(header) + h.layers_offset, layers.size() * sizeof(nna_layer));
  LaneGuard lane;
  // The fused kernel knows nothing of groups: shards, a group's loss rows or a reduction take
  // the per-layer path.
  const bool own = !sync && !p.globalBatch && !p.shardOffset && !p.lossRows && (p.resident || p.rows > 0);
  if (!hooks && own && runFused(devBase, h, layers, p, *lane)) return "fused";
  bool blas = false;
  try {
    if (h.dtype == NNA_FLOAT64) blas = LayerRun<double>(devBase, h, layers, p, *lane, hooks, sync).run();
    else blas = LayerRun<float>(devBase, h, layers, p, *lane, hooks, sync).run();
  } catch (...) {
    if (sync) sync->abort();
    if (hooks) { cudaStreamSynchronize(lane->stream); hooks->endRun(lane->stream); }
    throw;
  }
  if (hooks) hooks->endRun(lane->stream);
  return blas ? "layers (cublas)" : "layers (tiled)";
}

}  // namespace nna
