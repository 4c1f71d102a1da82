// layer_run.cuh: LayerRun, the per-layer path of a CUDA run (runCuda, cuda_train.cu): its state
// and the order of its launches. Its longer members are defined in layer_run_step.cuh (a run, its
// steps, the forward, the output layer, the updates), layer_run_backward.cuh (the backward and
// the products) and layer_run_lt.cuh (the products through cuBLASLt with their epilogues).
// Included by cuda_train.cu only: everything here is in an anonymous namespace.
#pragma once
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/failure.h"
#include "../include/nn_arena.h"
#include "../train/run_modes.h"
#include "../train/train.h"
#include "../core/env.h"
#include "check.cuh"
#include "cuda_train.h"
#include "cublas_loader.h"
#include "cublaslt_loader.h"
#include "fused_step.h"
#include "grad_sync.h"
#include "layer_hooks.h"
#include "layer_kernels.cuh"
#include "tf32_kernels.cuh"
#include "model_lrs.cuh"
#include "op_kernels.cuh"
#include "output_head.cuh"
#include "run_buffers.cuh"
#include "run_cache.cuh"
#include "run_copies.cuh"
#include "run_feed.cuh"
#include "../ops/residual.h"

namespace nna {
namespace {

// After a Train or Update run: a weight or bias left non-finite makes the run's last step its bad
// step (DIVERGED), also when every loss was finite (cpu_train.cc, markNonFinite). One pass over
// the parameters a run, queued on the run's stream behind its work: nonFiniteKernel's launch.
struct NonFiniteScan {
  bool needed = false;
  dim3 grid;
  uint32_t last = 0;
  uint64_t step = 0;  // the step it marks
};

// A layer's parameters (w and b, one model's): what its update, norm and check kernels walk.
static uint64_t paramCount(const nna_layer& L) { return L.region[NNA_W].count + L.region[NNA_B].count; }

static NonFiniteScan nonFiniteScan(const nna_header& h, const std::vector<nna_layer>& layers, const RunParams& p) {
  NonFiniteScan n;
  if (p.op != Op::Train && p.op != Op::Update) return n;
  uint64_t most = 0;  // the largest layer's parameters: the others' blocks find less to read
  for (uint32_t l = 1; l < h.num_layers; ++l) most = std::max<uint64_t>(most, paramCount(layers[l]));
  n.needed = true;
  n.grid = dim3(blocksFor(most), h.num_layers - 1, unsigned(nna_models(&h)));
  n.last = h.num_layers - 1;
  n.step = p.op == Op::Update ? 0 : p.numBatches - 1;
  return n;
}

static void launchNonFinite(void* devBase, const nna_header& h, const std::vector<nna_layer>& layers, const RunParams& p, cudaStream_t s) {
  const NonFiniteScan n = nonFiniteScan(h, layers, p);
  if (!n.needed) return;
  if (h.dtype == NNA_FLOAT64)
    nonFiniteKernel<double><<<n.grid, kThreads, 0, s>>>(devBase, n.last, double(n.step));
  else
    nonFiniteKernel<float><<<n.grid, kThreads, 0, s>>>(devBase, n.last, float(n.step));
  CUDA_CHECK(cudaGetLastError());
}

// What a run needs of the op parameter table, read from the host header once a run (runCuda):
// the residual layers that add each layer's z (ops/residual.h), an embedding's categorical columns.
struct OpTables {
  std::vector<std::vector<uint32_t>> adders;
  uint32_t embedColumns = 0;
  uint32_t embedMaxDim = 0;  // the widest column's dim (its gradient kernel's grid)
};

template <typename T> class LayerRun {
 public:
  // Constructed on the worker thread after Backend::activate; device_ (the first member) makes
  // the lane's device current anyway, so that the run's allocations (the per-model lrs, what
  // the shelf first holds) are made and freed on the arena's device.
  LayerRun(void* base, const nna_header& h, const std::vector<nna_layer>& layers, const OpTables& ops, const RunParams& p, const Lane& lane, LayerHooks* hooks, GradSync* sync);

  // Returns whether the products went through cuBLAS.
  bool run();

 private:
  // Backward, BackwardFromOutput, Update: the launches of one Train step split in three runs
  // (a Forward run first), the same kernels on the same data, so that they give a Train run's
  // values (bit for bit but for SGD through cuBLAS, whose Train run folds the update into the
  // weight-gradient product). Never with hooks: budgeted arenas refuse these ops (phases.h).
  // Every launch covers the K models (grid z, batched products; per-model lrs in updateKernel),
  // and the products go through the run's precision like a Train run's.
  void primitive();

  // The output layer (softmax, loss into stats, d), then the fold of the step's loss sum.
  void output(uint64_t rows, uint64_t scaleRows, uint64_t s, bool grad);

  // The optimizer step of layer l from its dw and db, on `stream` (a group's: after the reduction).
  // `scale`: each model's clip factor (clipAndUpdate), or null.
  void update(uint32_t l, const Hyper<T>& hp, cudaStream_t stream, const double* scale = nullptr) { updateLayers(&l, 1, hp, stream, scale); }

  // The optimizer steps of `layers` in one launch (kUpdateLayers a launch; blockIdx.y a layer):
  // one launch's latency instead of one a layer where nothing needs a layer's step earlier.
  // Layers without parameters are passed over; none with parameters launches nothing.
  void updateLayers(const uint32_t* layers, size_t count, const Hyper<T>& hp, cudaStream_t stream, const double* scale = nullptr);
  // The optimizer steps of every layer, the output layer first.
  void updateAll(const Hyper<T>& hp, const double* scale = nullptr) {
    std::vector<uint32_t> ls;
    for (uint32_t l = last_; l >= 1; --l) ls.push_back(l);
    updateLayers(ls.data(), ls.size(), hp, s_, scale);
  }

  // Clipping: every model's global gradient norm over all of its dw and db (step s's, recorded),
  // its clip factor, then every layer's update with it.
  void clipAndUpdate(const Hyper<T>& hp, uint64_t s);

  void before(Stage ph, uint32_t l) {
    if (hooks_) hooks_->before(ph, l, s_);
  }
  void after(Stage ph, uint32_t l) {
    if (hooks_) hooks_->after(ph, l, s_);
  }

  // Host-side address of a region on the device, from the validated header copy (cuBLAS takes
  // pointers; kernels bind the same offsets themselves).
  T* at(uint32_t l, uint32_t kind) const {
    if (void* moved = hooks_ ? hooks_->address(l, kind) : nullptr) return static_cast<T*>(moved);
    return reinterpret_cast<T*>(static_cast<char*>(base_) + L_[l].region[kind].offset);
  }

  // Elements from one model's copy of region (l, kind) to the next (0: shared, or one model).
  long long stride(uint32_t l, uint32_t kind) const { return static_cast<long long>(nna_region_stride(&h_, l, L_[l].region[kind].count, kind) / sizeof(T)); }

  Hyper<T> hyper(uint64_t t) const { return hyperAt<T>(p_.opt, p_.lr, t); }

  void gather(const StepRows& sr);

  // No rows this step: the layer's gradients are zero (db and dw of every model, one memset each).
  void zeroGradients(uint32_t l) {
    for (unsigned m = 0; m < K_; ++m)
      for (uint32_t kind : {uint32_t(NNA_DB), uint32_t(NNA_DW)})
        if (graph_->external(l, kind, m)) CUDA_CHECK(cudaMemsetAsync(at(l, kind) + m * stride(l, kind), 0, L_[l].region[kind].count * sizeof(T), s_));
  }

  // The tiled product of `MODE` over an M x N result, with the largest tile that still gives
  // at least one block per multiprocessor (64, then 32, then 16).
  template <int MODE> void tiled(uint32_t l, uint64_t rows, uint64_t M, uint64_t N, bool fold = false, const Hyper<T>& hp = {});

  // Row-major products through column-major cuBLAS: a row-major r x c matrix is the
  // column-major c x r matrix (its transpose) with leading dimension c.
  void forward(uint32_t l, uint64_t rows);

  // An operand of a cuBLAS product: the matrix itself, and for tf32x3 its big and small TF32
  // parts (workspace copies of the same shape).
  struct Split {
    const T* x;
    const T* big = nullptr;
    const T* small = nullptr;
  };

  // The output layer's product (output_head.cuh), and with `finish` its row's loss and d (the
  // arguments from `scaleRows` on serve that part). Its operands are the products' own: bf16 /
  // fp16 copies made first where the run has not made them.
  HeadRead headRead() const { return !half_.active() ? HeadRead::Own : m_.headRounds ? HeadRead::Rounds : HeadRead::Copies; }
  void head(uint64_t rows, uint64_t scaleRows, const OutputLoss& ol, bool grad, bool stats, uint64_t s, HalfOut dHalf, bool finish, bool error = false);

  // The output layer's backward where output_head.cuh computes that layer (m_.head): d[L-1]
  // (headError), then dw and db, or the folded SGD step, in one launch beside the chain. Its
  // operands are the products': the bf16 / fp16 copies of z[L-1] and d[L], made by then.
  bool headBackward(uint64_t rows, const Hyper<T>& hp, bool fold);

  // d[L-1] of the output layer's backward where output_head.cuh computes that layer (m_.head):
  // done by the output launch (st_.errorDone), else here, from the products' operands (the
  // copies of w[L] and d[L] in bf16 / fp16, made by then). db[L-1] is then left to backward(L-1).
  void headError(uint64_t rows);

  // Whether a Train step folds its SGD update into the weight-gradient products (backward).
  bool folds() const {
    const bool blasFolds = sameLr_ && prec_ != Precision::Tf32x3 && p_.opt.weightDecay == 0;
    return p_.op == Op::Train && optimizerFolds(h_.optimizer) && (!blas_ || blasFolds) && !sync_ && !clip_.active();  // clip_: clipping or loss scaling
  }
  // Whether layer l's SGD step folds into its weight-gradient product: every layer's (folds()),
  // or where K models' lrs differ, layer 1's and the output layer's (scalesD).
  bool foldsLayer(uint32_t l) const { return folds() || scalesD(l); }
  // K models whose lrs differ: a batched cuBLAS product has one alpha, so the weight-gradient
  // product takes -1 and reads a copy of d times each model's lr, which the pass making d writes
  // beside it; d keeps d. Layer 1's copy comes from its activation-gradient pass (biasGradKernel:
  // into the 16-bit copy, which only this product reads, or an fp32 / fp64 buffer), the output
  // layer's from outputWarpKernel (a buffer: the error product reads d[L] and its 16-bit copy).
  // The layers between keep dw and the update kernel. Saves a read and write of dw and the
  // update's pass.
  bool scalesD(uint32_t l) const {
    const bool which = l == last_ ? L_[last_].units <= 32 : l == 1;
    return which && m_.crossPhase && K_ > 1 && !sameLr_ && blas_ && !m_.lt && p_.op == Op::Train && optimizerFolds(h_.optimizer) && prec_ != Precision::Tf32x3 &&
           p_.opt.weightDecay == 0 && !sync_ && !clip_.active();
  }
  // scalesD's buffers (one from the shelf): layer 1's in fp32 / fp64, the output layer's in the
  // run's dtype or its 16 bits.
  void allocateScaledCopies(ScratchShelf& shelf);
  // The copy scalesD's product reads for layer l (fp32 / fp64 runs).
  T* scaledCopy(uint32_t l) const { return l == last_ ? static_cast<T*>(scaledLast_) : scaledFirst_; }
  // The 16-bit copy of d[l] layer l's weight-gradient product reads.
  HalfOut gradientD(uint32_t l) const;
  // The folded products' alpha (-lr; all models share one: with per-model rates that differ, no fold).
  T foldAlpha(const Hyper<T>& hp) const { return -(p_.lrs.empty() ? hp.lr : withLr(hp, p_.lrs.front()).lr); }
  // Layer l's weight-gradient product's alpha: -1 where it reads d times each model's lr (scalesD),
  // foldAlpha where it folds, else 1.
  T weightGradAlpha(uint32_t l, const Hyper<T>& hp, bool fold) const { return scalesD(l) ? T(-1) : fold ? foldAlpha(hp) : T(1); }

  // dw, db and d[l-1] of layer l. Returns true when the layer was also updated here: SGD
  // training folds w -= lr * dw into the product (cuBLAS: alpha = -lr, beta = 1; tiled: in the
  // epilogue), which saves writing dw and a read-modify-write pass over w and dw (dw is then not
  // written, and a compact SGD plan has none),
  // and the bias step into the bias-gradient kernel. d[l-1] is computed first, from the old w.
  bool backward(uint32_t l, uint64_t rows, const Hyper<T>& hp);

  // Layer l's op backward (op_kernels.cuh): dL/dz[l-1] into d[l-1], the residual additions and
  // layer l-1's f' on it, then a norm's gain and bias gradients. Its update is the caller's.
  bool opBackward(uint32_t l, uint64_t rows, const Hyper<T>& hp);
  // Norm layer l's row stats: a slot of its own (batch x models), so that its gain and bias
  // gradients may go beside the chain while the norms below make theirs.
  ops::NormRow* normRows(uint32_t l) const { return opRows_ + uint64_t(normSlot_[l]) * h_.batch * K_; }
  // An embedding's table gradients, first half: its dw cleared and each column's (index, row)
  // keys sorted. They read x alone, so a run with a side stream takes them beside each step's
  // forward (keysBeside); else the embedding's backward does, before the sums.
  void embedKeys(uint64_t rows);
  bool keysBeside() const { return m_.besides && embedColumns_ && L_[1].region[NNA_DW].count; }
  static unsigned opRowBlocks(uint64_t rows) { return unsigned((rows + kOpRowsPerBlock - 1) / kOpRowsPerBlock); }
  // An element kernel's grid: four blocks a multiprocessor at most, so that a thread's binding of
  // its layers from the header serves many elements.
  unsigned elementBlocks(uint64_t n) const { return std::min<unsigned>(blocksFor(n), 4 * sms_); }

  // Whether a residual layer adds z[k].
  bool residualInto(uint32_t k) const { return !adders_[k].empty(); }
  // d[k] += d[r] of the first `count` residual layers r that add z[k], in layer order (before f'
  // of layer k; activationGrad's, the last in the bias gradient's pass where it takes one).
  void residualAdds(uint32_t k, uint64_t rows, size_t count) {
    for (size_t i = 0; i < count; ++i) graph_->launch(s_, residualAddKernel<T>, dim3(blocksFor(rows * L_[k].units), 1, K_), kThreads, base_, k, adders_[k][i], rows);
  }
  // Whether element op l's backward (dropout, a residual's d[l-1] = d[l]) is read by layer l-1's
  // bias gradient pass (BiasFrom::through) instead of a pass of its own: a dense layer under it,
  // whose bias gradient goes with its f' (m_.crossBias).
  bool throughBias(uint32_t l) const { return l > 1 && m_.crossBias && L_[l - 1].op == NNA_OP_DENSE && ops::isElementOp(L_[l].op); }

  // dw^T (m x n) = z[l-1]^T (m x rows) . d (rows x n)   [or w^T += -lr * that], fp32 / tf32 / fp64.
  void weightGrad(uint32_t l, uint64_t rows, const Hyper<T>& hp, bool fold, const Split& d);

  // ---- the side stream (m_.besides) ---------------------------------------------------------
  // Work given to the side stream from here on waits for what the run's stream has been given so far.
  void fork() {
    if (!m_.besides) return;
    graph_->follow(s_, side_.stream, lane_.order);
    st_.sideOpen = true;
  }
  // f's launches and products on the side stream (after the last fork), or on the run's stream
  // where the run has no side work.
  template <typename F> void onSide(F&& f);
  // Layer l's gradient work (its db where not taken yet, its dw, its update) beside the error
  // chain, but for layer 1: no error product follows it, so the run's stream is free, where the
  // side stream still has the layers above's work to do (more of it, after the output layer, than
  // the run's stream has).
  template <typename F> void gradientWork(uint32_t l, F&& f);
  // ---- a data-parallel group's hand-over (grad_sync.h) ---------------------------------------
  // Layer l's gradients are queued on the run's stream: the group reduces them (then steps the
  // layer) while the backward goes on. Once a layer a step: backward() hands a layer over before
  // its error product where the sync asks (handsOffEarly), else the step's loop after it.
  // Early, the layer's step waits for its error product, which still reads w[l]: weightsFree.
  void handOff(uint32_t l, bool early = false) {
    if (st_.handedOff == l) return;
    st_.handedOff = l;
    sync_->gradientsReady(l, s_, early ? GradSync::Update() : groupStep());
  }
  // The group's optimizer step of a layer (on the sync's stream), once its gradients are
  // reduced; none in a grad run. Clipping: no layer's step before the step's global norm.
  GradSync::Update groupStep() {
    if (p_.op != Op::Train || clip_.active()) return GradSync::Update();
    return [this](const uint32_t* ls, size_t n, cudaStream_t stream) { updateLayers(ls, n, hyper(st_.stepNow), stream); };
  }
  // Whether layer l's weight-gradient product goes before its error product, handed over between
  // them. tf32x3 keeps the order: the products' split operands share workspace slot 1.
  bool handsOffEarly(uint32_t l) const { return l > 1 && sync_ && sync_->early() && K_ == 1 && prec_ != Precision::Tf32x3; }
  // Layer l's weight-gradient product in the slices the group reduces as each is queued
  // (GradSync::slices; one: whole). f(u0, u1) queues units [u0, u1).
  template <typename F> void weightGradSlices(uint32_t l, F&& f);

  // The run's stream waits for the side's work (within the step that forked it: a graph's
  // branches join before its end).
  void join() {
    if (!st_.sideOpen) return;
    graph_->follow(side_.stream, s_, lane_.order);
    st_.sideOpen = false;
  }

  // ---- cuBLASLt (m_.lt, and m_.ltForward for the forward products): the products with their epilogues
  // z[l]^T (n x rows) = act(w (n x m) . z[l-1]^T + b) in one product (K models: one batched
  // product), where the activation has an epilogue: identity and softmax (the output applies it)
  // as Bias, relu. Under m_.lt a hidden ReLU also writes its mask for the error product's epilogue,
  // in every run and plan (a Forward run's or a compact plan's z then has a full Train run's
  // bits: one epilogue, one algorithm). False: no such epilogue or algorithm (the caller's passes).
  bool ltForward(uint32_t l, uint64_t rows);
  // Layer l's forward product with its epilogue; false where the activation has none.
  bool ltForwardProduct(uint32_t l, uint64_t rows, LtProduct* out) const;
  // The workspace m_.ltForward's products ask for at the arena's batch (the largest algorithm's; a
  // shorter last step whose algorithm wants more takes cuBLAS and the pass).
  size_t forwardWorkspace() const;

  // Layer l's backward through cuBLASLt: the error product with ReLU's derivative (this step's
  // mask) and db[l-1] in its epilogue (a compact plan parks db[l-1] in LtScratch until layer
  // l-1's turn), the output layer's weight-gradient product with its db in the epilogue where the
  // step is not folded. What has no epilogue or algorithm takes the usual passes.
  bool ltBackward(uint32_t l, uint64_t rows, const Hyper<T>& hp, bool fold);

  // The bias steps the step's cuBLASLt epilogues left (ltBackward under a fold), in one launch.
  void flushBiasSteps(const Hyper<T>& hp);

  // A cuBLASLt product of the run's precision (fp32 or tf32), no epilogue yet.
  // (Untyped operands: the double instantiation compiles this and never runs it, m_.lt being false.)
  LtProduct ltBase(bool tA, bool tB, uint64_t m, uint64_t n, uint64_t k, const void* A, uint64_t lda, const void* B, uint64_t ldb, void* C, uint64_t ldc) const;
  // Whether cuBLASLt takes p with the run's workspace.
  bool ltReady(const LtProduct& p) const {
    size_t need = 0;
    return ltSupports(p, &need) && need <= ltBuf_.workBytes();
  }
  void ltLaunch(const LtProduct& p);
  // db of layer l (column sums of d[l]), with the bias step where `fold`; `applyGrad`: d[l] is
  // the error product's raw result, first multiplied by the activation's derivative.
  void biasGrad(uint32_t l, uint64_t rows, bool fold, const Hyper<T>& hp, bool applyGrad, HalfOut half, BiasFrom from = {});
  unsigned biasColumnBlocks(uint32_t l) const { return unsigned((L_[l].units + kBiasCols - 1) / kBiasCols); }
  // K models with blocks for every multiprocessor: narrow blocks (a wide block's 32 stripes serve
  // layers whose few blocks each walk many rows; here the blocks already fill the GPU)
  bool biasNarrow(uint32_t l) const { return K_ > 1 && uint64_t(biasColumnBlocks(l)) * K_ >= uint64_t(sms_); }
  // The blocks a column block of layer l's bias gradient takes (BiasSums): as many as keep the
  // layer's blocks within the multiprocessors, one for narrow blocks.
  unsigned biasGroups(uint32_t l) const {
    if (L_[l].op != NNA_OP_DENSE || biasNarrow(l)) return 1;
    const uint64_t blocks = uint64_t(biasColumnBlocks(l)) * K_;
    for (unsigned g = kBiasGroupsMost; g > 1; g /= 2)
      if (blocks * g <= uint64_t(sms_)) return g;
    return 1;
  }
  void allocateBiasSums(ScratchShelf& shelf);

  // d[l-1] times act'(z[l-1]) after layer l's error product or op backward (and its 16-bit copy
  // into `half`); nothing where layer l-1 is an op. Where launches may reach into a later phase
  // (m_.crossBias), layer l-1's bias gradient is taken in the same pass, and backward(l - 1) skips
  // its own.
  void activationGrad(uint32_t l, uint64_t rows, bool fold, const Hyper<T>& hp, HalfOut half);

  // The 16-bit copies layer l's backward products read (d[L], w[l], z[l-1]) that the run has not
  // made (the primitives: backward after a separate forward run). A loss-scaled step's d[L] copy
  // was made with its scaling (output). backwardHalf's and headBackward's.
  void backwardCopies(uint32_t l, uint64_t rows);

  // Precisions bf16 and fp16 (cuBLAS; K models in bf16): the error and weight-gradient products from
  // the 16-bit copies (backwardCopies makes those missing), d[l-1]'s copy written by the
  // activation-gradient pass.
  bool backwardHalf(uint32_t l, uint64_t rows, const Hyper<T>& hp, bool fold);

  // Column-major C = alpha op(A) op(B) + beta C for every model at once (strided operands).
  // `scalars`: alpha and beta from the device, as in product().
  // `count`: products (0: one a model).
  void gemmBatched(bool tA, bool tB, int m, int n, int k, T alpha, const T* A, int lda, long long sA, const T* B, int ldb, long long sB, T beta, T* C, int ldc, long long sC,
                   const T* scalars = nullptr, int count = 0);

  // Column-major C = alpha op(A) op(B) + beta C from 16-bit operands (the run's copies: bf16 or
  // fp16) into fp32 (float arenas only: check.cc), for every model at once (sC: elements from one
  // model's C to the next; the copies carry their own strides). `scalars`: alpha and beta from
  // the device, as in product().
  void gemmHalf(bool tA, bool tB, int m, int n, int k, float alpha, HalfOut A, int lda, HalfOut B, int ldb, float beta, T* C, int ldc, long long sC, const T* scalars = nullptr,
                int count = 0);

  // Every weight matrix whose copy is stale (an SGD step folded into its product moved it)
  // rounded into its copy, kMaxCasts matrices a launch.
  // unfoldedOnly: those of layers whose step does not fold (their update kernel keeps them fresh).
  void staleWeightsToHalf(bool unfoldedOnly = false);

  // Region (l, kind)'s first n values rounded into its 16-bit copy (precision bf16 / fp16).
  void toHalf(uint32_t l, uint32_t kind, uint64_t n);

  // The first `count` entries of c rounded to 16 bits in one launch (grid y: the entry; z: the model).
  void castsToHalf(const HalfCasts& c, unsigned count) {
    uint64_t most = 0;
    for (unsigned i = 0; i < count; ++i) most = std::max(most, c.n[i]);
    graph_->launch(s_, halfCastsKernel, dim3(blocksFor((most + 3) / 4), count, K_), kThreads, c);  // four values a thread
  }

  // The tensor-core precisions through cuBLAS (one model): the weight-gradient product of a layer
  // whose d has kTransposeMin elements or more at the arena's batch (the same choice in every step
  // and run) reads d[l] transposed (Tf32Workspace): cuBLAS's "nt" TF32 kernel is much slower for
  // L's. M's d (256 x 1024) is not: its transpose, on the chain, cost more than it saved.
  static constexpr uint64_t kTransposeMin = uint64_t(1) << 21;
  bool transposeForTensorCores(uint32_t l) const {
    return std::is_same_v<T, float> && blas_ && (prec_ == Precision::Tf32 || prec_ == Precision::Tf32x3) && K_ == 1 && h_.batch * L_[l].units >= kTransposeMin;
  }

  // dw^T (m x n) = z[l-1]^T (m x rows) . (d^T)^T with d^T (n x rows) transposed first: both
  // operands "n" [or w^T += -lr * that]. After the error product, which read d's split parts
  // from workspace slot 1: d^T's take that slot now (stream order).
  void weightGradTf32(uint32_t l, uint64_t rows, T alpha, bool fold, const T* scalars);

  // Operand x (n elements) as a Split; tf32x3 splits it into workspace slot 0 or 1 first.
  Split split(int slot, const T* x, uint64_t n);

  // Column-major C = alpha op(A) op(B) + beta C through cuBLAS in the run's precision. tf32x3:
  // three TF32 products accumulated in C, the small terms first.
  // `scalars`: alpha and beta from the device (a fold under a schedule; tf32x3 never folds).
  void product(bool tA, bool tB, int m, int n, int k, T alpha, const Split& a, int lda, const Split& b, int ldb, T beta, T* C, int ldc, const T* scalars = nullptr);

  DeviceScope device_;  // first: current through every member's construction and destruction
  void* base_;
  const nna_header& h_;
  const std::vector<nna_layer>& L_;
  const std::vector<std::vector<uint32_t>>& adders_;  // the residual layers that add each layer's z (runCuda, ops/residual.h)
  const uint32_t embedColumns_;                       // an embedding's categorical columns (blocks of its gradient kernel)
  const uint32_t embedMaxDim_;                        // its widest column's dim
  const RunParams& p_;
  const Lane& lane_;
  LayerHooks* hooks_;
  GradSync* sync_;
  // What the host code of a step reads and changes as it launches: a replay that falls back to
  // direct launches starts again from the state the step began with (one assignment).
  struct HostState {
    uint64_t stepNow = 0;              // the optimizer step being taken (Adam's t), for `update`
    std::vector<bool> zFresh, wFresh;  // bf16: the copy of z[l] / w[l] was made this run from the current values
    bool foldPending = false;          // a step's loss sum awaits its fold (m_.crossBias, resident runs)
    std::vector<bool> dbDone;          // db[l] of this step already taken by activationGrad
    std::vector<bool> maskFresh;       // m_.lt: this step's forward wrote layer l's ReLU mask
    uint64_t biasSteps = 0;            // m_.lt: layers (bits) whose folded bias step waits for flushBiasSteps
    uint32_t dbParked = 0;             // m_.lt, compact plans: the layer whose db waits in LtScratch::parked (0: none)
    uint64_t epilogues = 0;            // m_.lt: products of the run's first step with an epilogue (RunParams::epilogues)
    bool sideOpen = false;             // the side stream was given work this step that the run's stream has not joined
    bool dLastHalf = false;            // the step's output launch wrote d[L]'s 16-bit copy
    bool errorDone = false;            // ... and d[L-1] (m_.headFused: outputHeadKernel's `error`)
    uint32_t handedOff = 0;            // a group run: the layer last handed to the sync this step (handOff)
  } st_;
  cudaStream_t s_;           // the stream launches go to: the lane's, or its side stream inside onSide()
  Lane side_;                // the lane's side stream and handle
  const Lane* on_ = &lane_;  // the lane products go to (its handle): lane_, or side_ inside onSide()
  uint32_t last_;
  int sms_;
  int frac_;  // fraction bits of the fixed-point loss sum for this batch size
  bool blas_;
  Precision prec_;
  bool firstStep_ = true;            // the step being launched is the run's first (RunParams::epilogues counts it)
  std::shared_ptr<RunCache> cache_;  // the arena's, or none
  ScratchShelf ownShelf_;            // a run without the cache: its buffers go with it
  LtScratch ltBuf_;
  Tf32Workspace work_;
  HalfCopies half_;
  ClipScratch clip_;  // clipping's scratch, also a loss-scaled run's (the step's norm)
  DeviceLossScale lossScale_;
  StepGraph own_;                      // a run's own graph where the arena keeps none (graphs off: never captures)
  StepGraph* graph_ = &own_;           // launches pass through it either way
  RunModes m_;                         // the run's modes (their rules: csrc/train/run_modes.cc), set once by the constructor
  bool ops_ = false;                   // a layer is not dense (op_kernels.cuh)
  ops::NormRow* opRows_ = nullptr;     // the norms' per-row stats between their backward kernels (the shelf's, a norm's own)
  std::vector<uint32_t> normSlot_;     // each norm layer's slot of opRows_ (normRows)
  EmbedRuns embedRuns_;                // an embedding's sorted keys and runs (the shelf's, after opRows_)
  std::vector<BiasSums<T>> biasSums_;  // each layer's split bias gradient's slots (the shelf's; none: one block a column block)
  uint32_t firstProduct_ = 1;          // the first dense layer: the forward's first product
  uint64_t opStep_ = 0;                // the step's optimizer count: dropout's mask
  uint64_t rowBase_ = 0;               // a group's replica: its batch's first row of the group's (GradSync::rank)
  FoldScalars<T> foldScalars_;         // a fold under a schedule: its alpha on the device
  unsigned K_;                         // models (grid z of every per-model launch, batch count of every product)
  DeviceLrs lrs_;                      // per-model learning rates on the device, or none
  bool sameLr_ = true;
  T* scaledFirst_ = nullptr;    // scalesD: d[1] times each model's lr (fp32 / fp64 runs; the shelf's)
  bool wideFirst_ = false;      // scalesD: layer 1's product over every model at once (allocateScaledCopies)
  void* scaledLast_ = nullptr;  // scalesD: d[L] times each model's lr (the run's dtype or 16 bits)
};

}  // namespace
}  // namespace nna
