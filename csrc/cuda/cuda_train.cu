// cuda_train.cu: one training / evaluation run on the CUDA backend. Two paths, same results
// up to float rounding order (bit-identical run to run on each):
//   - fused (fused_step.cu): every step of the run in ONE cooperative kernel, for small
//     networks, where launch latency and not arithmetic bounds a step;
//   - per layer (here): one launch per product or pass, products through cuBLAS when it is
//     found at run time (cublas_loader.cc), else the tiled kernels of tiled_gemm.cuh. A
//     memory scheduler can act between the launches (layer_hooks.h).
// Every kernel receives only the arena's device base (plus scalars) and binds from the header.
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
  LayerRun(void* base, const nna_header& h, const std::vector<nna_layer>& layers, const OpTables& ops, const RunParams& p, const Lane& lane, LayerHooks* hooks, GradSync* sync)
      : device_(lane.device),
        base_(base),
        h_(h),
        L_(layers),
        adders_(ops.adders),
        embedColumns_(ops.embedColumns),
        embedMaxDim_(ops.embedMaxDim),
        p_(p),
        lane_(lane),
        hooks_(hooks),
        sync_(sync),
        s_(lane.stream),
        last_(h.num_layers - 1),
        sms_(multiprocessors()),
        frac_(lossFracBits(h.batch)),
        blas_(lane.blas && productsUseBlas(h, layers)),
        prec_(std::is_same_v<T, float> ? p.precision : Precision::Fp32),
        K_(unsigned(nna_models(&h))),
        lrs_(p.lrs, lane.stream) {
    // The arena's cache (its graph and shelf), if an earlier run on this lane left one. Not
    // with a memory scheduler: its budget counts the arena alone, and its work between launches
    // is host-side (no graph).
    if (!hooks) cache_ = runCacheOf(p, lane);
    ScratchShelf& shelf = cache_ ? cache_->shelf : ownShelf_;
    if (blas_ && (prec_ == Precision::Bf16 || prec_ == Precision::Fp16) && p.op != Op::Update) {  // K models: bf16 only (check.cc)
      half_.allocate(
          h, layers, prec_ == Precision::Fp16, [this](uint32_t l, uint32_t kind) { return stride(l, kind) ? K_ : 1u; }, shelf);
      st_.zFresh.assign(h.num_layers, false);
      st_.wFresh.assign(h.num_layers, false);
    }  // Update: no products
    // Ops other than dense (op_kernels.cuh) run between the dense layers' products: each layer
    // takes its own bias gradient (no cross-phase passes), without cuBLASLt's epilogues, the
    // output head or the side stream, whose launches assume a chain of dense layers.
    for (uint32_t l = 1; l < h.num_layers; ++l) ops_ |= layers[l].op != NNA_OP_DENSE;
    while (layers[firstProduct_].op != NNA_OP_DENSE) ++firstProduct_;  // the output layer is dense
    if (ops_) {
      // A norm's row stats between its backward kernels, or an embedding's sorted keys (a column a
      // model): one op's at a time.
      const uint64_t keys = K_ * embedColumns_ * embedSortLength(h.batch) * sizeof(unsigned long long);
      void* scratch = shelf.take(ScratchShelf::kOps, std::max<uint64_t>(h.batch * K_ * sizeof(ops::NormRow), keys));
      opRows_ = static_cast<ops::NormRow*>(scratch);
      embedKeys_ = static_cast<unsigned long long*>(scratch);
    }
    crossPhase_ = !hooks && !(h.flags & NNA_FLAG_COMPACT) && !ops_;
    // cuBLASLt's epilogues (bias, activation, their gradients inside the products): one float
    // model in fp32 or tf32 (tf32x3 is three products; bf16 / fp16 write 16-bit copies in their
    // passes: only layer L-1's forward, headRounds_ below), no memory scheduler (it may move regions between launches). By default only the
    // forward products take theirs (ltForward_: bias, and ReLU, whose derivative comes from z: no
    // mask; a pass less after each forward product), every other launch, the side stream and the
    // output launch as without cuBLASLt. NN_ARENA_CUBLASLT (read per run): 0 none, 1 (or a path
    // picking the library) every epilogue (lt_: not faster, and it gives up the side stream and the
    // output launch: docs/cuda.md, "Fused epilogues"), forward the default.
    // K models take the forward epilogues too (batched, each model's bias), not the others.
    const bool ltCan = std::is_same_v<T, float> && blas_ && !hooks && (prec_ == Precision::Fp32 || prec_ == Precision::Tf32) && p.op != Op::Update;
    const std::string ltKnob = knob(Knob::CublasLt);
    const bool ltAll = knobOn(Knob::CublasLt) && ltKnob != "forward";
    lt_ = ltCan && K_ == 1 && ltAll && !ops_ && ltAvailable();
    ltForward_ = ltCan && !ltAll && ltKnob != "0" && !ops_ && ltAvailable();
    if (lt_) ltBuf_.allocate(h, layers, shelf, kLtMaxWorkspace, true);
    st_.dbDone.assign(h.num_layers, false);
    // Work beside the run's stream (fork, onSide): a layer's weight-gradient product (and its
    // update) overlaps the error products below it, the weights' 16-bit casts overlap the gather.
    // Not with a scheduler or a group (host work between launches), a compact plan (regions of
    // different phases share bytes), cuBLASLt (one handle) or tf32x3 (one split workspace for
    // both products), nor for K models (their batched products fill the GPU: a second stream only
    // made them slower). NN_ARENA_SIDE_STREAM=0 keeps every launch on the run's stream.
    side_ = lane.side();
    besides_ = crossPhase_ && !sync && !lt_ && prec_ != Precision::Tf32x3 && K_ == 1 && !isPrimitive(p.op) && lane.sideStream && knob(Knob::SideStream, "1") != "0";
    if (blas_ && (prec_ == Precision::Tf32 || prec_ == Precision::Tf32x3) && K_ == 1 && p.op != Op::Update)
      work_.allocate(h, layers, prec_ == Precision::Tf32x3, besides_ && h.batch * layers[1].units >= kTransposeMin, shelf);
    // A narrow output layer's product by output_head.cuh, in every run but cuBLASLt's (its
    // forward epilogues), so that compact, budgeted and full runs keep the same bits; in the
    // output launch itself (headFused_) but with a scheduler (its stages keep the product and the
    // output apart), in a compact plan, or in the primitives (a Backward run's z holds a Forward
    // run's outputs).
    // One model through cuBLAS: a K-model arena keeps its batched products (with as many blocks
    // as rows x models the kernel was slower than they are), and the tiled
    // products keep K models bit-identical to one.
    head_ = !lt_ && blas_ && K_ == 1 && !ops_ && L_[last_].units <= kHeadMaxUnits;
    headFused_ = head_ && crossPhase_ && !isPrimitive(p.op);
    // Loss scaling (fp16, Train runs of one model: check.cc) defers the updates as clipping does:
    // they wait for the step's gradients to be known finite.
    scaling_ = p.lossScale.active() && p.op == Op::Train;
    // bf16 / fp16: that launch and its backward read z[L-1], w[L] and d[L] from the arena, rounded
    // as they load (output_head.cuh HeadRead::Rounds; the same values as the copies), so layer
    // L-1's forward product needs no pass to write z[L-1]'s copy: it takes bias and activation in
    // its cuBLASLt epilogue where it has one (a pass less a step). Not with loss
    // scaling (the products read d[L]'s scaled copy).
    headRounds_ = head_ && half_.active() && !scaling_;
    if (headRounds_ && last_ > 1 && !hooks && ltKnob != "0" && ltAvailable()) ltForward_ = true;
    if (lt_ || ltForward_) st_.maskFresh.assign(h.num_layers, false);
    // K models, an output layer of up to 32 units, blas: the output launch (outputWarpKernel) adds
    // the bias and applies f before the row's loss, as outputHeadKernel does for one model: a
    // pass less a step. Not in the primitives (a Forward run's
    // output launch is its own) nor with a scheduler (crossPhase_: its stages keep them apart).
    biasInOutput_ = K_ > 1 && blas_ && !lt_ && crossPhase_ && !isPrimitive(p.op) && L_[last_].units <= 32;
    if (ltForward_) ltBuf_.allocate(h, layers, shelf, forwardWorkspace(), false);  // after biasInOutput_: ltForwardProduct reads it
    if (p.clips() || scaling_) clip_.allocate(K_, h.num_layers, isPrimitive(p.op) ? 1 : p.numBatches, shelf, s_);
    if (scaling_) lossScale_.allocate(p.lossScale, shelf, s_);
    // SGD folds w -= lr dw into the batched product only where one alpha serves every model.
    sameLr_ = true;
    for (double x : p.lrs) sameLr_ = sameLr_ && x == p.lrs.front();
    allocateScaledCopies(shelf);
    // Not with a memory scheduler or a group (their work between launches is host-side), nor for
    // runs too short to repay the capture. NN_ARENA_CUDA_GRAPH=0 launches every step directly.
    // One-step training runs (step() in a loop) and forward runs (predict()'s batches) take part
    // where the arena keeps a cache: the first captures its only step, the next replay it, as a
    // long run's later steps do; each kind in a graph of its own.
    graphs_ = !hooks && !sync && !isPrimitive(p.op) && (p.numBatches >= 3 || (cache_ && (p.op == Op::Train || p.op == Op::Forward))) && knob(Knob::CudaGraph, "1") != "0";
    if (graphs_ && cache_) graph_ = p.op == Op::Forward ? &cache_->forward : &cache_->graph;
    graph_->beginRun();
    // A scheduled lr: cuBLAS's folded products read alpha from the device, graphed or not (with
    // its scalars in device memory cuBLAS may pick another kernel, as it did for bf16), so that
    // a run's bits do not depend on NN_ARENA_CUDA_GRAPH or on how steps are split into runs.
    if (blas_ && folds() && p.opt.schedule.kind != kConstant) foldScalars_.allocate(shelf);
  }

  // Returns whether the products went through cuBLAS.
  bool run() {
    if (hooks_) hooks_->beginRun(s_, p_.numBatches);
    // A one-step graphed run (step() in a loop, a forward run on the caller's batch): its copies,
    // the stats' reset and fold and the parameters' scan are nodes of the step's graph, so that a
    // call is one graph launch and one wait. Not with pageable host memory (a capture cannot hold
    // its copies).
    const bool whole = graphs_ && p_.numBatches == 1 && (!p_.copies || p_.copies->pinned);
    const auto begin = [&] {
      queueRunCopies(base_, p_, /*in=*/true, s_, [&](const RunCopies::Span& c) { return graph_->external(true, c.offset, c.bytes, p_.copies->host); });
      if (p_.resetStats) graph_->launch(s_, resetStatsKernel<T>, dim3(1, 1, K_), 1, base_, last_);
    };
    const auto end = [&] {
      if (st_.foldPending) graph_->launch(s_, foldStatsKernel<T>, dim3(1, 1, K_), 1, base_, last_, frac_);
      st_.foldPending = false;
      if (sync_) sync_->endRun(s_);  // never in a whole run (graphs_ is off in a group)
      if (!hooks_)
        if (const NonFiniteScan n = nonFiniteScan(h_, L_, p_); n.needed) graph_->launch(s_, nonFiniteKernel<T>, n.grid, kThreads, base_, n.last, T(n.step));
      queueRunCopies(base_, p_, /*in=*/false, s_, [&](const RunCopies::Span& c) { return graph_->external(false, c.offset, c.bytes, p_.copies->host); });
    };
    if (!whole) begin();
    if (sync_) sync_->beginRun(s_, p_.resetStats);
    if (isPrimitive(p_.op)) {
      primitive();  // never in a group (check.cc: reduce applies to train and grad runs)
    } else {
      const bool grad = p_.op == Op::Train || p_.op == Op::Grad;
      const bool deferred = p_.op == Op::Train && clip_.active();
      auto step = [&](uint64_t s) {
        if (whole) begin();
        firstStep_ = s == 0;
        opStep_ = p_.stepBase + s + 1;
        const StepRows sr = stepRows(h_.batch, p_, s);
        // A data-parallel replica may have no rows of the group's last step: it contributes zero
        // gradients to the reduction and still takes the step.
        const uint64_t rows = sr.rows;
        if (rows) {
          if (p_.resident) {
            // bf16 / fp16: the weights' copies (a folded step moved w) made beside the gather
            if (half_.active() && p_.op == Op::Train) {
              fork();
              onSide([&] { staleWeightsToHalf(); });
            }
            gather(sr);
            join();
          }
          for (uint32_t l = 1; l <= last_; ++l) {
            before(Stage::Forward, l);
            forward(l, rows);
            after(Stage::Forward, l);
          }
          before(Stage::Output, last_);
          output(rows, sr.scale, s, grad);
          after(Stage::Output, last_);
        }
        if (grad) {
          st_.stepNow = p_.stepBase + s + 1;
          const Hyper<T> hp = hyper(st_.stepNow);
          if (foldScalars_.get()) graph_->launch(s_, foldScalarsKernel<T>, 1, 1, foldScalars_.get(), foldAlpha(hp));
          // Layer l's update right after its backward pass: d[l-1] has been computed with the old
          // w[l] by then, and nothing later reads w[l], so the order gives the same values as
          // updating every layer at the end, with one pass less over each layer's memory.
          // With ops (one stream, no cross-layer passes) the steps wait for the last backward and
          // go in one launch: the same values (nothing after a layer's backward reads its w).
          std::vector<uint32_t> steps;
          st_.handedOff = 0;
          for (uint32_t l = last_; l >= 1; --l) {
            before(Stage::Backward, l);
            bool folded = false;
            if (rows)
              folded = backward(l, rows, hp);
            else
              zeroGradients(l);
            if (sync_)
              handOff(l);
            else if (p_.op == Op::Train && !folded && !deferred && ops_ && !hooks_)
              steps.push_back(l);
            else if (p_.op == Op::Train && !folded && !deferred)
              gradientWork(l, [&] { update(l, hp, s_); });  // after its dw, on the same stream
            after(Stage::Backward, l);
          }
          if (!steps.empty()) updateLayers(steps.data(), steps.size(), hp, s_);
          join();
          flushBiasSteps(hp);
          if (sync_) sync_->endStep(s_);
          if (deferred) clipAndUpdate(hp, s);
        }
        if (hooks_) hooks_->endStep(s, s_);
        if (whole) end();
      };
      // Where the updates write the weights' 16-bit copies (layers that do not fold), the first
      // step would be the only one to make them: made before it, so that it launches what the
      // later steps do (a folded layer's copy is made beside each step's gather, the first's too).
      if (half_.active() && p_.op == Op::Train && !folds()) staleWeightsToHalf(/*unfoldedOnly=*/true);
      // Graphs (step_graph.cuh): the second step is captured, later ones replayed (a one-step
      // run captures its only step, for the next one-step run to replay). A graph an
      // earlier run left serves from the first step: launched directly, a step keeps the GPU
      // waiting for the host's launches. Where that step differs from the
      // graph in more than kernel arguments, it is launched directly and the graph stays for the
      // next step.
      for (uint64_t s = 0; s < p_.numBatches; ++s) {
        if (!graphs_ || graph_->disabled() || (s == 0 && !graph_->ready() && p_.numBatches > 1)) {
          step(s);
          continue;
        }
        const HostState began = st_;
        if (graph_->ready() ? graph_->replay(
                                  s_, [&] { step(s); }, /*tentative=*/s == 0)
                            : graph_->capture(s_, [&] { step(s); }))
          continue;
        st_ = began;  // the host state the step began with, then the step launched directly
        step(s);
      }
      if (p_.graphSteps) *p_.graphSteps = graph_->replayed();
    }
    if (!whole) end();  // before the one sync that ends the run
    if (p_.epilogues) *p_.epilogues = st_.epilogues;
    if (p_.queued) return blas_;  // a feed's batch (RunFeed): the feed waits, once
    CUDA_CHECK(cudaStreamSynchronize(s_));
    if (p_.clips()) clip_.readNorms(p_.gradNorms);
    lossScale_.read(p_.lossScaleOut);
    return blas_;
  }

 private:
  // Backward, BackwardFromOutput, Update: the launches of one Train step split in three runs
  // (a Forward run first), the same kernels on the same data, so that they give a Train run's
  // values (bit for bit but for SGD through cuBLAS, whose Train run folds the update into the
  // weight-gradient product). Never with hooks: budgeted arenas refuse these ops (phases.h).
  // Every launch covers the K models (grid z, batched products; per-model lrs in updateKernel),
  // and the products go through the run's precision like a Train run's.
  void primitive() {
    const Hyper<T> hp = hyper(p_.stepBase + 1);
    opStep_ = p_.stepBase + 1;
    if (p_.op == Op::Update) {
      if (clip_.active()) return clipAndUpdate(hp, 0);
      return updateAll(hp);
    }
    if (p_.op == Op::Backward) {
      // The Forward run left softmax's probabilities in z[L], not the logits, and a loss read from
      // probabilities that underflowed would be clamped: the output layer's product again (z[L-1]
      // and w[L] are as the Forward run left them; their 16-bit copies made first, as this run
      // has not made them), so the loss and d are a Train run's (the CPU backend does the same).
      if (half_.active() && !head_) {
        const uint32_t in = last_ - 1;
        if (!st_.zFresh[in] || (in == 0 && !p_.resident)) toHalf(in, NNA_Z, p_.rows * L_[last_].fan_in);
        if (!st_.wFresh[last_]) toHalf(last_, NNA_W, L_[last_].units * L_[last_].fan_in);
      }
      forward(last_, p_.rows);
      output(p_.rows, stepRows(h_.batch, p_, 0).scale, 0, true);
    } else {
      graph_->launch(s_, outputGradKernel<T>, dim3(blocksFor(p_.rows), 1, K_), kThreads, base_, last_, p_.rows);
    }
    for (uint32_t l = last_; l >= 1; --l) backward(l, p_.rows, hp);  // not Train: never folds
  }

  // The output layer (softmax, loss into stats, d), then the fold of the step's loss sum.
  void output(uint64_t rows, uint64_t scaleRows, uint64_t s, bool grad) {
    const OutputLoss ol = outputLoss(L_[last_].activation, h_.act_param, p_);
    // A row of x that names no row of some table: NaN outputs (op_kernels.cuh, as the CPU's)
    if (embedColumns_) graph_->launch(s_, embedPoisonKernel<T>, dim3(blocksFor(rows), 1, K_), kThreads, base_, rows);
    const bool stats = p_.op != Op::Forward;
    // Up to 32 units a warp per row: one thread per row put M's 256 rows of 10 on one
    // multiprocessor, a serial chain of loads and exps per thread.
    st_.dLastHalf = st_.errorDone = false;
    if (headFused_) {
      const HalfOut dHalf = headRead() == HeadRead::Copies && grad && !scaling_ ? half_.d(last_) : HalfOut{};
      // d[L-1] too where it follows from this launch's d (a loss-scaled step's waits for the scale)
      const bool error = grad && last_ > 1 && !scaling_;
      head(rows, scaleRows, ol, grad, stats, s, dHalf, true, error);
      st_.dLastHalf = bool(dHalf);
      st_.errorDone = error;
    } else if (L_[last_].units > 32 && L_[last_].units <= kOutBlockMaxUnits)
      graph_->launch(s_, outputBlockKernel<T>, dim3(rowBlocks(rows), 1, K_), 256, base_, last_, rows, scaleRows, ol, grad, stats, s, frac_);
    else {
      // Up to 32 units: d's 16-bit copy (the error product's operand) and scalesD's copy made here
      OutputCopies<T> c;
      if (grad && L_[last_].units <= 32) {
        if (headRead() == HeadRead::Copies && !scaling_) c.dHalf = half_.d(last_);
        if (scalesD(last_)) {
          c.hp = hyper(p_.stepBase + s + 1);
          c.lrs = lrs_.get();
          if (half_.active())
            c.scaledHalf = gradientD(last_);
          else
            c.scaled = scaledCopy(last_);
          c.stride = uint64_t(stride(last_, NNA_D));
        }
      }
      const uint64_t n = L_[last_].units;  // a row a warp, or a half / quarter of one for rows of up to 16 / 8 units
      auto rowLaunch = [&](auto kernel, unsigned lanes) {
        graph_->launch(s_, kernel, dim3(blocksFor(rows * lanes), 1, K_), kThreads, base_, last_, rows, scaleRows, ol, grad, stats, s, frac_, c, biasInOutput_);
      };
      if (n <= 8)
        rowLaunch(outputWarpKernel<T, 8>, 8);
      else if (n <= 16)
        rowLaunch(outputWarpKernel<T, 16>, 16);
      else
        rowLaunch(outputWarpKernel<T, 32>, 32);
      st_.dLastHalf = bool(c.dHalf);
    }
    if (stats && crossPhase_ && p_.resident)
      st_.foldPending = true;  // the next gather (or the run's end) folds it
    else if (stats)
      graph_->launch(s_, foldStatsKernel<T>, dim3(1, 1, K_), 1, base_, last_, frac_);
    if constexpr (std::is_same_v<T, float>) {
      if (scaling_ && grad) {  // d[L] times the loss scale, and its fp16 copy (backwardHalf reads it)
        const uint64_t n = rows * L_[last_].units;
        graph_->launch(s_, scaleToHalfKernel, blocksFor(n), kThreads, at(last_, NNA_D), half_.d(last_), n, lossScale_.get());
      }
    }
  }

  // The optimizer step of layer l from its dw and db, on `stream` (a group's: after the reduction).
  // `scale`: each model's clip factor (clipAndUpdate), or null.
  void update(uint32_t l, const Hyper<T>& hp, cudaStream_t stream, const double* scale = nullptr) { updateLayers(&l, 1, hp, stream, scale); }

  // The optimizer steps of `layers` in one launch (kUpdateLayers a launch; blockIdx.y a layer):
  // one launch's latency instead of one a layer where nothing needs a layer's step earlier.
  void updateLayers(const uint32_t* layers, size_t count, const Hyper<T>& hp, cudaStream_t stream, const double* scale = nullptr) {
    for (size_t first = 0; first < count; first += kUpdateLayers) {
      UpdateLayers u;
      std::memset(&u, 0, sizeof u);
      uint64_t most = 0;
      for (size_t i = first; i < count && u.count < kUpdateLayers; ++i) {
        const uint32_t l = layers[i];
        const bool copy = half_.active() && L_[l].op == NNA_OP_DENSE;  // an op's gain has no 16-bit copy
        u.l[u.count] = l;
        if (copy) u.half[u.count] = half_.w(l);
        ++u.count;
        most = std::max(most, paramCount(L_[l]));
        if (!st_.wFresh.empty()) st_.wFresh[l] = copy;  // bf16 / fp16: the update wrote w's copy too
      }
      // 16 parameters a thread: each thread binds its model's layer from the header first (dozens
      // of loads): with one parameter a thread, every parameter paid for a binding.
      graph_->launch(stream, updateKernel<T>, dim3(blocksFor((most + 15) / 16), u.count, K_), kThreads, base_, u, h_.optimizer, hp, lrs_.get(), scale);
    }
  }
  // The optimizer steps of every layer, the output layer first.
  void updateAll(const Hyper<T>& hp, const double* scale = nullptr) {
    std::vector<uint32_t> ls;
    for (uint32_t l = last_; l >= 1; --l) ls.push_back(l);
    updateLayers(ls.data(), ls.size(), hp, s_, scale);
  }

  // Clipping: every model's global gradient norm over all of its dw and db (step s's, recorded),
  // its clip factor, then every layer's update with it.
  void clipAndUpdate(const Hyper<T>& hp, uint64_t s) {
    for (uint32_t l = 1; l <= last_; ++l) {
      graph_->launch(s_, sumSquaresKernel<T>, dim3(normBlocks(paramCount(L_[l])), 1, K_), kThreads, base_, l, h_.num_layers, clip_.partials());
    }
    if (scaling_)  // one model (check.cc)
      graph_->launch(s_, lossScaleKernel, 1, kThreads, clip_.partials(), h_.num_layers, p_.clips() ? p_.opt.clipGradNorm : 0.0, clip_.scale(), clip_.norms(s), lossScale_.get());
    else
      graph_->launch(s_, clipScaleKernel, K_, kThreads, clip_.partials(), h_.num_layers, p_.opt.clipGradNorm, clip_.scale(), clip_.norms(s));
    updateAll(hp, clip_.scale());
  }

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

  void gather(const StepRows& sr) {
    before(Stage::Gather, 0);
    graph_->launch(s_, gatherKernel<T>, rowBlocks(sr.rows), kThreads, base_, last_, sr.first, sr.rows, p_.permA, p_.permC, p_.samples, half_.active() ? half_.z(0) : HalfOut{},
                   st_.foldPending ? K_ : 0u, frac_);
    st_.foldPending = false;
    if (half_.active()) st_.zFresh[0] = true;  // the gather wrote z[0]'s copy
    after(Stage::Gather, 0);
  }

  // No rows this step: the layer's gradients are zero (db and dw of every model, one memset each).
  void zeroGradients(uint32_t l) {
    for (unsigned m = 0; m < K_; ++m)
      for (uint32_t kind : {uint32_t(NNA_DB), uint32_t(NNA_DW)})
        if (graph_->external(l, kind, m)) CUDA_CHECK(cudaMemsetAsync(at(l, kind) + m * stride(l, kind), 0, L_[l].region[kind].count * sizeof(T), s_));
  }

  // The tiled product of `MODE` over an M x N result, with the largest tile that still gives
  // at least one block per multiprocessor (64, then 32, then 16).
  template <int MODE> void tiled(uint32_t l, uint64_t rows, uint64_t M, uint64_t N, bool fold = false, const Hyper<T>& hp = {}) {
    if constexpr (std::is_same_v<T, float>) {
      if (prec_ != Precision::Fp32) {                                                                      // float only (checkRun): nn-arena's tensor-core kernels
        const dim3 grid(unsigned((N + kTcTile - 1) / kTcTile), unsigned((M + kTcTile - 1) / kTcTile), 1);  // one model: check.cc
        if (prec_ == Precision::Tf32x3)
          graph_->launch(s_, tcGemmKernel<MODE, true>, grid, 256, base_, l, rows, fold, hp);
        else
          graph_->launch(s_, tcGemmKernel<MODE, false>, grid, 256, base_, l, rows, fold, hp);
        return;
      }
    }
    auto blocks = [&](uint64_t tile) { return ((M + tile - 1) / tile) * ((N + tile - 1) / tile); };
    auto grid = [&](uint64_t tile) { return dim3(unsigned((N + tile - 1) / tile), unsigned((M + tile - 1) / tile), K_); };
    if (blocks(64) >= uint64_t(sms_))
      graph_->launch(s_, gemmKernel<T, MODE, 64>, grid(64), 256, base_, l, rows, fold, hp, lrs_.get());
    else if (blocks(32) >= uint64_t(sms_))
      graph_->launch(s_, gemmKernel<T, MODE, 32>, grid(32), 256, base_, l, rows, fold, hp, lrs_.get());
    else
      graph_->launch(s_, gemmKernel<T, MODE, 16>, grid(16), 256, base_, l, rows, fold, hp, lrs_.get());
  }

  // Row-major products through column-major cuBLAS: a row-major r x c matrix is the
  // column-major c x r matrix (its transpose) with leading dimension c.
  void forward(uint32_t l, uint64_t rows) {
    const uint64_t n = L_[l].units, m = L_[l].fan_in;
    if (L_[l].op != NNA_OP_DENSE) {
      const bool train = p_.op == Op::Train || p_.op == Op::Grad;  // dropout drops (check.cc refuses Backward runs with dropout)
      if (ops::isNorm(L_[l].op))
        graph_->launch(s_, normForwardKernel<T>, dim3(opRowBlocks(rows), 1, K_), kThreads, base_, l, rows);
      else if (L_[l].op == NNA_OP_EMBEDDING)
        graph_->launch(s_, embedForwardKernel<T>, dim3(elementBlocks(rows * n), 1, K_), kThreads, base_, rows);
      else
        graph_->launch(s_, opElementKernel<T>, dim3(elementBlocks(rows * n), 1, K_), kThreads, base_, l, rows, false, train, p_.dropoutSeed, opStep_);
      if (half_.active() && l < last_) {  // bf16 / fp16: the copy of z[l] the next layer's products read
        toHalf(l, NNA_Z, rows * n);
        st_.zFresh[l] = true;
      }
      return;
    }
    const bool biasLater = l == last_ && biasInOutput_;  // output()'s launch adds b and applies f
    if (l == last_ && head_) {
      if (!headFused_) head(rows, rows, OutputLoss{}, false, false, 0, HalfOut{}, false);
      return;  // else output() computes it
    }
    if (!blas_) return tiled<kForward>(l, rows, rows, n);
    if ((lt_ || ltForward_) && !half_.active() && ltForward(l, rows)) return;
    if (half_.active()) {                                                          // z[l]^T = w . z[l-1]^T from 16-bit copies; the pass after it writes z[l]'s
      if (l == 1 && (!st_.zFresh[0] || !p_.resident)) toHalf(0, NNA_Z, rows * m);  // not gathered: the caller's z[0]
      if (l == firstProduct_) staleWeightsToHalf();                                // before the forward's first product (ops before it have none)
      const bool copy = l < last_ && !(headRounds_ && l + 1 == last_);             // headRounds_: the output launch rounds z[L-1] itself
      if (!copy && ltForward_ && ltForward(l, rows)) return;
      gemmHalf(true, false, int(n), int(rows), int(m), 1.0f, half_.w(l), int(m), half_.z(l - 1), int(m), 0.0f, at(l, NNA_Z), int(n), stride(l, NNA_Z));
      if (biasLater) return;
      graph_->launch(s_, biasActivateKernel<T>, dim3(bandBlocks(rows, n, K_, sms_), 1, K_), kThreads, base_, l, rows, copy ? half_.z(l) : HalfOut{});
      if (copy) st_.zFresh[l] = true;
      return;
    }
    if (K_ > 1) {  // z[l]^T (n x rows) = w (n x m) . z[l-1]^T (m x rows), for every model at once (fp32: check.cc)
      gemmBatched(true, false, int(n), int(rows), int(m), T(1), at(l, NNA_W), int(m), stride(l, NNA_W), at(l - 1, NNA_Z), int(m), stride(l - 1, NNA_Z), T(0), at(l, NNA_Z), int(n),
                  stride(l, NNA_Z));
    } else {  // z[l]^T (n x rows) = w (n x m) . z[l-1]^T (m x rows)
      const Split a = split(0, at(l, NNA_W), n * m), b = split(1, at(l - 1, NNA_Z), rows * m);
      product(true, false, int(n), int(rows), int(m), T(1), a, int(m), b, int(m), T(0), at(l, NNA_Z), int(n));
    }
    if (biasLater) return;
    graph_->launch(s_, biasActivateKernel<T>, dim3(bandBlocks(rows, n, K_, sms_), 1, K_), kThreads, base_, l, rows, HalfOut{});
  }

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
  HeadRead headRead() const { return !half_.active() ? HeadRead::Own : headRounds_ ? HeadRead::Rounds : HeadRead::Copies; }
  void head(uint64_t rows, uint64_t scaleRows, const OutputLoss& ol, bool grad, bool stats, uint64_t s, HalfOut dHalf, bool finish, bool error = false) {
    HalfOut x, w;
    if (headRead() == HeadRead::Copies) {
      const uint32_t in = last_ - 1;
      if (!st_.zFresh[in] || (in == 0 && !p_.resident)) toHalf(in, NNA_Z, rows * L_[last_].fan_in);
      if (!st_.wFresh[last_]) toHalf(last_, NNA_W, L_[last_].units * L_[last_].fan_in);
      x = half_.z(in);
      w = half_.w(last_);
    }
    const HalfOut dPrev = error && half_.active() ? half_.d(last_ - 1) : HalfOut{};
    launchOutputHead<T>(L_[last_].units, rows, K_, headRead(), half_.fp16(), [&](auto kernel, dim3 grid, unsigned threads) {
      graph_->launch(s_, kernel, grid, threads, base_, last_, rows, scaleRows, ol, grad, stats, s, frac_, x, w, dHalf, finish, error, dPrev);
    });
  }

  // The output layer's backward where output_head.cuh computes that layer (head_): d[L-1]
  // (headError), then dw and db, or the folded SGD step, in one launch beside the chain. Its
  // operands are the products': the bf16 / fp16 copies of z[L-1] and d[L], made by then.
  bool headBackward(uint64_t rows, const Hyper<T>& hp, bool fold) {
    const uint32_t l = last_;
    const uint64_t n = L_[l].units, m = L_[l].fan_in;
    st_.dbDone[l] = false;
    HalfOut x, d;
    if (headRead() == HeadRead::Copies) {
      backwardCopies(l, rows);
      x = half_.z(l - 1);
      d = half_.d(l);
    }
    if (l > 1) headError(rows);
    fork();
    // A two-layer net: db[1] (and its bias step) in this launch beside layer 1's weight-gradient
    // product, where it was a launch of its own on the chain before that product (bf16 gains less:
    // its second stream overlaps less).
    // d[1] is final here: the output launch (headFused_) applied f' to it.
    const bool prevBias = l == 2 && headFused_ && !st_.dbDone[1];
    gradientWork(l, [&] {
      launchOutputWeightGrad<T>(n, m, K_, headRead(), half_.fp16(), prevBias, [&](auto kernel, dim3 grid, dim3 block) {
        graph_->launch(s_, kernel, grid, block, base_, l, rows, x, d, fold, h_.optimizer, hp, lrs_.get(), prevBias, prevBias && foldsLayer(1));
      });
    });
    if (prevBias) st_.dbDone[1] = true;
    if (fold && half_.active()) st_.wFresh[l] = false;  // w moved: the next forward makes its copy again
    return fold;
  }

  // d[L-1] of the output layer's backward where output_head.cuh computes that layer (head_):
  // done by the output launch (st_.errorDone), else here, from the products' operands (the
  // copies of w[L] and d[L] in bf16 / fp16, made by then). db[L-1] is then left to backward(L-1).
  void headError(uint64_t rows) {
    if (st_.errorDone) {
      st_.errorDone = false;
      return;
    }
    const bool copies = headRead() == HeadRead::Copies;
    const HalfOut w = copies ? half_.w(last_) : HalfOut{}, d = copies ? half_.d(last_) : HalfOut{};
    const HalfOut dPrev = half_.active() ? half_.d(last_ - 1) : HalfOut{};
    launchOutputError<T>(L_[last_].units, rows, K_, headRead(), half_.fp16(),
                         [&](auto kernel, dim3 grid, unsigned threads) { graph_->launch(s_, kernel, grid, threads, base_, last_, rows, w, d, dPrev); });
  }

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
    return which && crossPhase_ && K_ > 1 && !sameLr_ && blas_ && !lt_ && p_.op == Op::Train && optimizerFolds(h_.optimizer) && prec_ != Precision::Tf32x3 &&
           p_.opt.weightDecay == 0 && !sync_ && !clip_.active();
  }
  // scalesD's buffers (one from the shelf): layer 1's in fp32 / fp64, the output layer's in the
  // run's dtype or its 16 bits.
  void allocateScaledCopies(ScratchShelf& shelf) {
    // Layer 1 as one product over the models where they share z[0] (its 16-bit copy too) and
    // their w[1] lie back to back: w[1] of every model is then one matrix, and the scaled copy
    // of d[1] is written with the models' rows interleaved: one wide product instead of K narrow
    // ones in a batched call.
    const uint64_t n1 = L_[1].units, m1 = L_[1].fan_in;
    wideFirst_ = scalesD(1) && last_ > 1 && stride(0, NNA_Z) == 0 && uint64_t(stride(1, NNA_W)) == n1 * m1 && n1 * K_ < (1ull << 31) && (!half_.active() || half_.z(0).stride == 0);
    const size_t first = scalesD(1) && last_ > 1 && !half_.active() ? (size_t(K_) * size_t(stride(1, NNA_D)) * sizeof(T) + 255) / 256 * 256 : 0;
    const size_t last = !scalesD(last_) ? 0 : half_.active() ? size_t(K_) * size_t(half_.d(last_).stride) * 2 : size_t(K_) * size_t(stride(last_, NNA_D)) * sizeof(T);
    if (!first && !last) return;
    char* p = static_cast<char*>(shelf.take(ScratchShelf::kScaledD, first + last));
    if (first) scaledFirst_ = reinterpret_cast<T*>(p);
    if (last) scaledLast_ = p + first;
  }
  // The copy scalesD's product reads for layer l (fp32 / fp64 runs).
  T* scaledCopy(uint32_t l) const { return l == last_ ? static_cast<T*>(scaledLast_) : scaledFirst_; }
  // The 16-bit copy of d[l] layer l's weight-gradient product reads.
  HalfOut gradientD(uint32_t l) const {
    if (l != last_ || !scalesD(l)) return half_.d(l);
    HalfOut h = half_.d(l);
    h.p = scaledLast_;
    return h;
  }
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
  bool backward(uint32_t l, uint64_t rows, const Hyper<T>& hp) {
    const uint64_t n = L_[l].units, m = L_[l].fan_in;
    // The tiled kernels fold with each model's own lr (lrs[blockIdx.z]); a batched cuBLAS product
    // has one alpha for every model, so it folds only where the rates are equal. A compact SGD
    // arena (one model: spec.ts, validate.cc) has no dw: it always folds. tf32x3 through cuBLAS
    // does not fold: three products adding -lr * (a part) into w each round it to w's ulp (over
    // many steps the three roundings drift far past fp32's own noise); dw is summed first, then
    // applied (a compact SGD arena refuses tf32x3: check.cc). Never in a data-parallel group: the step must
    // use the group's reduced dw, not this replica's (a group refuses compact arenas: check.cc).
    // cuBLAS folds w -= lr * dw alone: not with weight decay (the tiled epilogue runs the
    // descriptor's whole update). A clipping run never folds (the step needs the global norm).
    if (L_[l].op != NNA_OP_DENSE) return opBackward(l, rows);
    const bool fold = foldsLayer(l);
    if (lt_) return ltBackward(l, rows, hp, fold);
    if (l == last_ && head_) return headBackward(rows, hp, fold);
    if (!st_.dbDone[l]) {  // db[l] reads d[l] only, as the products below do
      fork();
      gradientWork(l, [&] { biasGrad(l, rows, fold, hp, false, HalfOut{}); });
    }
    st_.dbDone[l] = false;
    if (!blas_) {
      if (l > 1 && residualInto(l - 1))
        NNA_FAIL("NOT_SUPPORTED", "a residual layer adds layer " + std::to_string(l - 1) + "'s output: without cuBLAS its error takes f' inside the product (use the CPU backend)");
      if (l > 1) tiled<kErrorPrev>(l, rows, rows, m);
      fork();
      gradientWork(l, [&] { tiled<kWeightGrad>(l, rows, n, m, fold, hp); });
      return fold;
    }
    if (half_.active()) return backwardHalf(l, rows, hp, fold);
    // d's split parts serve the error product, and the weight-gradient one unless it reads d^T
    const Split d = l > 1 || !transposeForTensorCores(l) ? split(1, at(l, NNA_D), rows * n) : Split{at(l, NNA_D)};
    const bool early = handsOffEarly(l);
    if (early) {  // the group reduces dw[l] while the error product runs
      weightGrad(l, rows, hp, fold, d);
      handOff(l, true);
    }
    if (l > 1) {
      // d[l-1]^T (m x rows) = w^T (m x n) . d^T (n x rows), then times act'(z[l-1])
      if (K_ > 1)
        gemmBatched(false, false, int(m), int(rows), int(n), T(1), at(l, NNA_W), int(m), stride(l, NNA_W), at(l, NNA_D), int(n), stride(l, NNA_D), T(0), at(l - 1, NNA_D), int(m),
                    stride(l - 1, NNA_D));
      else
        product(false, false, int(m), int(rows), int(n), T(1), split(0, at(l, NNA_W), n * m), int(m), d, int(n), T(0), at(l - 1, NNA_D), int(m));
      fork();  // the weight-gradient product reads d[l] and z[l-1], which the activation gradient leaves alone
      residualAdds(l - 1, rows);
      activationGrad(l, rows, fold, hp, HalfOut{});
    } else {
      fork();
    }
    if (early)
      sync_->weightsFree(l, s_, groupStep());
    else
      gradientWork(l, [&] { weightGrad(l, rows, hp, fold, d); });
    return fold;
  }

  // Layer l's op backward (op_kernels.cuh): dL/dz[l-1] into d[l-1], the residual additions and
  // layer l-1's f' on it, then a norm's gain and bias gradients. Its update is the caller's.
  bool opBackward(uint32_t l, uint64_t rows) {
    const bool norm = ops::isNorm(L_[l].op);
    if (norm)
      graph_->launch(s_, normBackwardKernel<T>, dim3(opRowBlocks(rows), 1, K_), kThreads, base_, l, rows, opRows_);
    else if (l > 1)
      graph_->launch(s_, opElementKernel<T>, dim3(elementBlocks(rows * L_[l].units), 1, K_), kThreads, base_, l, rows, true, true, p_.dropoutSeed, opStep_);
    if (l > 1) {
      residualAdds(l - 1, rows);
      // f' of layer l-1, and (bf16 / fp16) the copy of d[l-1] its products read
      graph_->launch(s_, activationGradKernel<T>, dim3(blocksFor(rows * L_[l].fan_in), 1, K_), kThreads, base_, l, rows, half_.active() ? half_.d(l - 1) : HalfOut{});
    }
    if (norm) graph_->launch(s_, opParamGradKernel<T>, dim3(unsigned((L_[l].units + kOpCols - 1) / kOpCols), 1, K_), dim3(kOpCols, kOpStripes), base_, l, rows, opRows_);
    if (L_[l].op == NNA_OP_EMBEDDING && L_[l].region[NNA_DW].count) {  // layer 1: its tables' gradients, nothing for x
      graph_->launch(s_, embedZeroKernel<T>, dim3(elementBlocks(L_[l].region[NNA_DW].count), 1, K_), kThreads, base_);
      const uint64_t sortLength = embedSortLength(rows);
      graph_->launch(s_, embedSortKernel<T>, dim3(embedColumns_, 1, K_), kSortThreads, base_, rows, sortLength, embedKeys_);
      graph_->launch(s_, embedSumKernel<T>, dim3(blocksFor(rows * embedMaxDim_), embedColumns_, K_), kThreads, base_, rows, sortLength, embedKeys_);
    }
    return false;
  }
  static unsigned opRowBlocks(uint64_t rows) { return unsigned((rows + kOpRowsPerBlock - 1) / kOpRowsPerBlock); }
  // An element kernel's grid: four blocks a multiprocessor at most, so that a thread's binding of
  // its layers from the header serves many elements.
  unsigned elementBlocks(uint64_t n) const { return std::min<unsigned>(blocksFor(n), 4 * sms_); }

  // Whether a residual layer adds z[k].
  bool residualInto(uint32_t k) const { return !adders_[k].empty(); }
  // d[k] += d[r] of every residual layer r that adds z[k], in layer order (before f' of layer k).
  void residualAdds(uint32_t k, uint64_t rows) {
    for (uint32_t r : adders_[k]) graph_->launch(s_, residualAddKernel<T>, dim3(blocksFor(rows * L_[k].units), 1, K_), kThreads, base_, k, r, rows);
  }

  // dw^T (m x n) = z[l-1]^T (m x rows) . d (rows x n)   [or w^T += -lr * that], fp32 / tf32 / fp64.
  void weightGrad(uint32_t l, uint64_t rows, const Hyper<T>& hp, bool fold, const Split& d) {
    const uint64_t n = L_[l].units, m = L_[l].fan_in;
    const T alpha = weightGradAlpha(l, hp, fold);
    const T* scalars = fold ? foldScalars_.get() : nullptr;  // alpha from the device (a scheduled fold)
    if (K_ > 1 && l == 1 && wideFirst_)                      // every model's at once: [w_1 .. w_K]^T += -1 z[0]^T [lr_1 d_1 .. lr_K d_K]
      gemmBatched(false, true, int(m), int(n * K_), int(rows), alpha, at(0, NNA_Z), int(m), 0, scaledFirst_, int(n * K_), 0, T(1), at(1, NNA_W), int(m), 0, nullptr, 1);
    else if (K_ > 1)
      gemmBatched(false, true, int(m), int(n), int(rows), alpha, at(l - 1, NNA_Z), int(m), stride(l - 1, NNA_Z), scalesD(l) ? scaledCopy(l) : at(l, NNA_D), int(n),
                  stride(l, NNA_D), fold ? T(1) : T(0), at(l, fold ? NNA_W : NNA_DW), int(m), stride(l, fold ? NNA_W : NNA_DW), scalars);
    else if (transposeForTensorCores(l))
      weightGradTf32(l, rows, alpha, fold, scalars);
    else {
      const Split z = split(0, at(l - 1, NNA_Z), rows * m);
      weightGradSlices(l, [&](uint64_t u0, uint64_t u1) {
        product(false, true, int(m), int(u1 - u0), int(rows), alpha, z, int(m), u0 ? Split{d.x + u0} : d, int(n), fold ? T(1) : T(0), at(l, fold ? NNA_W : NNA_DW) + u0 * m, int(m),
                scalars);
      });
    }
  }

  // ---- the side stream (besides_) ---------------------------------------------------------
  // Work given to the side stream from here on waits for what the run's stream has been given so far.
  void fork() {
    if (!besides_) return;
    graph_->follow(s_, side_.stream, lane_.order);
    st_.sideOpen = true;
  }
  // f's launches and products on the side stream (after the last fork), or on the run's stream
  // where the run has no side work.
  template <typename F> void onSide(F&& f) {
    if (!besides_) return f();
    const cudaStream_t main = s_;
    s_ = side_.stream;
    on_ = &side_;
    try {
      f();
    } catch (...) {
      s_ = main;
      on_ = &lane_;
      throw;
    }
    s_ = main;
    on_ = &lane_;
  }
  // Layer l's gradient work (its db where not taken yet, its dw, its update) beside the error
  // chain, but for layer 1: no error product follows it, so the run's stream is free, where the
  // side stream still has the layers above's work to do (more of it, after the output layer, than
  // the run's stream has).
  template <typename F> void gradientWork(uint32_t l, F&& f) {
    if (l == 1)
      f();
    else
      onSide(std::forward<F>(f));
  }
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
    return [this](uint32_t k, cudaStream_t stream) { update(k, hyper(st_.stepNow), stream); };
  }
  // Whether layer l's weight-gradient product goes before its error product, handed over between
  // them. tf32x3 keeps the order: the products' split operands share workspace slot 1.
  bool handsOffEarly(uint32_t l) const { return l > 1 && sync_ && sync_->early() && K_ == 1 && prec_ != Precision::Tf32x3; }
  // Layer l's weight-gradient product in the slices the group reduces as each is queued
  // (GradSync::slices; one: whole). f(u0, u1) queues units [u0, u1).
  template <typename F> void weightGradSlices(uint32_t l, F&& f) {
    const uint32_t n = sync_ && K_ == 1 && prec_ != Precision::Tf32x3 ? sync_->slices(l) : 1;
    for (uint32_t j = 0; j < n; ++j) {
      f(sliceUnits(L_[l].units, n, j), sliceUnits(L_[l].units, n, j + 1));
      if (n > 1) sync_->sliceReady(l, j, s_);
    }
  }

  // The run's stream waits for the side's work (within the step that forked it: a graph's
  // branches join before its end).
  void join() {
    if (!st_.sideOpen) return;
    graph_->follow(side_.stream, s_, lane_.order);
    st_.sideOpen = false;
  }

  // ---- cuBLASLt (lt_, and ltForward_ for the forward products): the products with their epilogues
  // z[l]^T (n x rows) = act(w (n x m) . z[l-1]^T + b) in one product (K models: one batched
  // product), where the activation has an epilogue: identity and softmax (the output applies it)
  // as Bias, relu. Under lt_ a hidden ReLU also writes its mask for the error product's epilogue,
  // in every run and plan (a Forward run's or a compact plan's z then has a full Train run's
  // bits: one epilogue, one algorithm). False: no such epilogue or algorithm (the caller's passes).
  bool ltForward(uint32_t l, uint64_t rows) {
    st_.maskFresh[l] = false;
    LtProduct p;
    if (!ltForwardProduct(l, rows, &p) || !ltReady(p)) return false;
    ltLaunch(p);
    st_.maskFresh[l] = p.aux != nullptr;
    return true;
  }
  // Layer l's forward product with its epilogue; false where the activation has none.
  bool ltForwardProduct(uint32_t l, uint64_t rows, LtProduct* out) const {
    const uint64_t n = L_[l].units, m = L_[l].fan_in;
    if (l == last_ && biasInOutput_) return false;  // the output launch adds the bias
    // bf16 / fp16: layer L-1's alone, from the 16-bit copies, where the output launch rounds its own operands
    if (half_.active() && !(headRounds_ && l + 1 == last_)) return false;
    LtProduct p = half_.active() ? ltBase(true, false, n, rows, m, half_.w(l).p, m, half_.z(l - 1).p, m, at(l, NNA_Z), n)
                                 : ltBase(true, false, n, rows, m, at(l, NNA_W), m, at(l - 1, NNA_Z), m, at(l, NNA_Z), n);
    if (half_.active()) p.inputs = half_.fp16() ? LtInputs::Fp16 : LtInputs::Bf16;
    p.bias = at(l, NNA_B);
    if (K_ > 1) {
      p.batch = int(K_);
      p.strideA = stride(l, NNA_W);
      p.strideB = stride(l - 1, NNA_Z);
      p.strideC = stride(l, NNA_Z);
      p.strideBias = stride(l, NNA_B);
    }
    const uint32_t act = L_[l].activation;
    const bool mask = lt_ && act == NNA_ACT_RELU && ltBuf_.mask(l);  // ltForward_: relu' from z, as without cuBLASLt
    if (act == NNA_ACT_IDENTITY || act == NNA_ACT_SOFTMAX) {
      p.epilogue = LtEpilogue::Bias;
    } else if (act == NNA_ACT_RELU) {
      p.epilogue = mask ? LtEpilogue::ReluAuxBias : LtEpilogue::ReluBias;
      if (mask) {
        p.aux = ltBuf_.mask(l);
        p.auxLd = ltBuf_.maskLd(l);
      }
    } else {
      return false;
    }
    *out = p;
    return true;
  }
  // The workspace ltForward_'s products ask for at the arena's batch (the largest algorithm's; a
  // shorter last step whose algorithm wants more takes cuBLAS and the pass).
  size_t forwardWorkspace() const {
    size_t most = 0;
    for (uint32_t l = 1; l <= last_; ++l) {
      LtProduct p;
      size_t need = 0;
      if (ltForwardProduct(l, h_.batch, &p) && ltSupports(p, &need)) most = std::max(most, need);
    }
    return most;
  }

  // Layer l's backward through cuBLASLt: the error product with ReLU's derivative (this step's
  // mask) and db[l-1] in its epilogue (a compact plan parks db[l-1] in LtScratch until layer
  // l-1's turn), the output layer's weight-gradient product with its db in the epilogue where the
  // step is not folded. What has no epilogue or algorithm takes the usual passes.
  bool ltBackward(uint32_t l, uint64_t rows, const Hyper<T>& hp, bool fold) {
    const uint64_t n = L_[l].units, m = L_[l].fan_in;
    const T alpha = fold ? foldAlpha(hp) : T(1);
    if (st_.dbParked == l) {
      graph_->launch(s_, parkedBiasKernel<T>, blocksFor(n), kThreads, base_, l, reinterpret_cast<const T*>(ltBuf_.parked()), fold, h_.optimizer, hp, lrs_.get());
      st_.dbParked = 0;
      st_.dbDone[l] = true;
    }
    // tf32 reads d transposed, as the cuBLAS path does (Tf32Workspace): read as stored, L's step
    // was much slower (M's no different).
    const bool dT = prec_ == Precision::Tf32;
    LtProduct wg = dT ? ltBase(false, false, m, n, rows, at(l - 1, NNA_Z), m, work_.transposed(l), rows, at(l, fold ? NNA_W : NNA_DW), m)
                      : ltBase(false, true, m, n, rows, at(l - 1, NNA_Z), m, at(l, NNA_D), n, at(l, fold ? NNA_W : NNA_DW), m);
    wg.alpha = float(alpha);
    wg.beta = fold ? 1.0f : 0.0f;
    wg.scalars = fold ? foldScalars_.get() : nullptr;
    // Only the output layer's db: below it, db comes from the layer above's error product or
    // bias-gradient pass in a full plan, and a compact plan must take the same kernels.
    bool dbInProduct = false;
    if (l == last_ && !st_.dbDone[l] && !fold) {
      LtProduct withDb = wg;
      withDb.epilogue = LtEpilogue::BGradB;
      withDb.bias = at(l, NNA_DB);
      if ((dbInProduct = ltReady(withDb))) wg = withDb;
    }
    if (!st_.dbDone[l] && !dbInProduct) biasGrad(l, rows, fold, hp, false, HalfOut{});
    st_.dbDone[l] = false;
    if (l > 1) {  // d[l-1]^T (m x rows) = w^T (m x n) . d^T (n x rows), times act'(z[l-1])
      const LtProduct plain = ltBase(false, false, m, rows, n, at(l, NNA_W), m, at(l, NNA_D), n, at(l - 1, NNA_D), m);
      LtProduct e = plain;
      if (L_[l - 1].activation == NNA_ACT_RELU && ltBuf_.mask(l - 1) && (!fold || !crossPhase_ || l - 1 < 64)) {
        // A Backward run (the primitives) has no mask from its Forward run: layer l-1's forward
        // product again makes it, and rewrites z[l-1] with the bits it holds (same operands,
        // same algorithm), so that the primitives give a Train step's bits.
        if (!st_.maskFresh[l - 1] && isPrimitive(p_.op)) ltForward(l - 1, rows);
        if (st_.maskFresh[l - 1]) {
          e.epilogue = LtEpilogue::DReluBGrad;
          e.aux = ltBuf_.mask(l - 1);
          e.auxLd = ltBuf_.maskLd(l - 1);
          e.bias = crossPhase_ ? static_cast<void*>(at(l - 1, NNA_DB)) : ltBuf_.parked();
        }
      }
      if (e.epilogue != LtEpilogue::None && ltReady(e)) {
        ltLaunch(e);
        if (!crossPhase_) {
          st_.dbParked = l - 1;
        } else {
          st_.dbDone[l - 1] = true;
          if (fold) st_.biasSteps |= uint64_t(1) << (l - 1);
        }
      } else {
        if (ltReady(plain))
          ltLaunch(plain);
        else
          product(false, false, int(m), int(rows), int(n), T(1), Split{at(l, NNA_W)}, int(m), Split{at(l, NNA_D)}, int(n), T(0), at(l - 1, NNA_D), int(m));
        activationGrad(l, rows, fold, hp, HalfOut{});
      }
    }
    // dw^T (m x n) = z[l-1]^T (m x rows) . d (rows x n)   [or w^T += -lr * that]
    if (ltReady(wg)) {
      if constexpr (std::is_same_v<T, float>)
        if (dT) graph_->launch(s_, transposeKernel, dim3(unsigned((n + 31) / 32), unsigned((rows + 31) / 32)), dim3(32, 8), at(l, NNA_D), work_.transposed(l), rows, n);
      ltLaunch(wg);
    } else if (transposeForTensorCores(l))
      weightGradTf32(l, rows, alpha, fold, wg.scalars ? foldScalars_.get() : nullptr);
    else
      product(false, true, int(m), int(n), int(rows), alpha, Split{at(l - 1, NNA_Z)}, int(m), Split{at(l, NNA_D)}, int(n), fold ? T(1) : T(0), at(l, fold ? NNA_W : NNA_DW), int(m),
              fold ? foldScalars_.get() : nullptr);
    return fold;
  }

  // The bias steps the step's cuBLASLt epilogues left (ltBackward under a fold), in one launch.
  void flushBiasSteps(const Hyper<T>& hp) {
    if (!st_.biasSteps) return;
    uint64_t most = 0;
    for (uint32_t l = 1; l <= last_ && l < 64; ++l)
      if (st_.biasSteps >> l & 1u) most = std::max(most, L_[l].units);
    graph_->launch(s_, biasStepsKernel<T>, dim3(blocksFor(most), last_, 1), kThreads, base_, st_.biasSteps, h_.optimizer, hp, lrs_.get());
    st_.biasSteps = 0;
  }

  // A cuBLASLt product of the run's precision (fp32 or tf32), no epilogue yet.
  // (Untyped operands: the double instantiation compiles this and never runs it, lt_ being false.)
  LtProduct ltBase(bool tA, bool tB, uint64_t m, uint64_t n, uint64_t k, const void* A, uint64_t lda, const void* B, uint64_t ldb, void* C, uint64_t ldc) const {
    LtProduct p;
    p.transA = tA;
    p.transB = tB;
    p.m = int(m);
    p.n = int(n);
    p.k = int(k);
    p.tf32 = prec_ == Precision::Tf32;
    p.A = A;
    p.lda = int(lda);
    p.B = B;
    p.ldb = int(ldb);
    p.C = static_cast<float*>(C);
    p.ldc = int(ldc);
    return p;
  }
  // Whether cuBLASLt takes p with the run's workspace.
  bool ltReady(const LtProduct& p) const {
    size_t need = 0;
    return ltSupports(p, &need) && need <= ltBuf_.workBytes();
  }
  void ltLaunch(const LtProduct& p) {
    if (firstStep_ && p.epilogue != LtEpilogue::None) ++st_.epilogues;  // also where a replay launches it
    if (!graph_->external(p.transA, p.transB, p.m, p.n, p.k, p.tf32, int(p.inputs), p.A, p.lda, p.B, p.ldb, p.C, p.ldc, p.scalars ? 0.0f : p.alpha, p.scalars ? 0.0f : p.beta,
                          p.scalars, uint32_t(p.epilogue), p.bias, p.aux, p.auxLd, ltBuf_.work()))
      return;
    ltMatmul(lane_, p, ltBuf_.work(), ltBuf_.workBytes());
  }
  // db of layer l (column sums of d[l]), with the bias step where `fold`; `applyGrad`: d[l] is
  // the error product's raw result, first multiplied by the activation's derivative.
  void biasGrad(uint32_t l, uint64_t rows, bool fold, const Hyper<T>& hp, bool applyGrad, HalfOut half) {
    const bool scaled = applyGrad && scalesD(l);  // the copy the folded product reads: d times lr
    const bool wide = scaled && wideFirst_;       // its rows interleaved over the models
    const uint64_t units = L_[l].units;
    if (wide && half) half.stride = units;
    const dim3 grid(unsigned((L_[l].units + kBiasCols - 1) / kBiasCols), 1, K_);
    // K models with blocks for every multiprocessor: narrow blocks (a wide block's 32 stripes serve
    // layers whose few blocks each walk many rows; here the blocks already fill the GPU)
    const bool narrow = K_ > 1 && uint64_t(grid.x) * K_ >= uint64_t(sms_);
    auto launch = [&](auto kernel, unsigned stripes) {
      graph_->launch(s_, kernel, grid, dim3(kBiasCols, stripes), base_, l, rows, fold, h_.optimizer, hp, lrs_.get(), applyGrad, half, scaled,
                     scaled && !half ? scaledFirst_ : nullptr, wide ? units : uint64_t(stride(l, NNA_D)), wide ? units * K_ : units);
    };
    if (narrow)
      launch(biasGradKernel<T, kBiasStripes>, kBiasStripes);
    else
      launch(biasGradKernel<T, kBiasStripesWide>, kBiasStripesWide);
  }

  // d[l-1] times act'(z[l-1]) after layer l's error product (and its 16-bit copy into `half`). Where
  // launches may reach into a later phase, layer l-1's bias gradient is taken in the same pass,
  // and backward(l - 1) skips its own.
  void activationGrad(uint32_t l, uint64_t rows, bool fold, const Hyper<T>& hp, HalfOut half) {
    if (crossPhase_) {
      biasGrad(l - 1, rows, foldsLayer(l - 1), hp, true, half);
      st_.dbDone[l - 1] = true;
      return;
    }
    graph_->launch(s_, activationGradKernel<T>, dim3(blocksFor(rows * L_[l].fan_in), 1, K_), kThreads, base_, l, rows, half);
  }

  // The 16-bit copies layer l's backward products read (d[L], w[l], z[l-1]) that the run has not
  // made (the primitives: backward after a separate forward run). A loss-scaled step's d[L] copy
  // was made with its scaling (output). backwardHalf's and headBackward's.
  void backwardCopies(uint32_t l, uint64_t rows) {
    const uint64_t n = L_[l].units, m = L_[l].fan_in;
    if (l == last_ && !scaling_ && !st_.dLastHalf) toHalf(l, NNA_D, rows * n);
    if (!st_.wFresh[l]) toHalf(l, NNA_W, n * m);
    if (!st_.zFresh[l - 1]) toHalf(l - 1, NNA_Z, rows * m);
  }

  // Precisions bf16 and fp16 (cuBLAS; K models in bf16): the error and weight-gradient products from
  // the 16-bit copies (backwardCopies makes those missing), d[l-1]'s copy written by the
  // activation-gradient pass.
  bool backwardHalf(uint32_t l, uint64_t rows, const Hyper<T>& hp, bool fold) {
    const uint64_t n = L_[l].units, m = L_[l].fan_in;
    backwardCopies(l, rows);
    const float alpha = float(weightGradAlpha(l, hp, fold));
    // dw^T (m x n) = z[l-1]^T (m x rows) . d (rows x n)   [or w^T += -lr * that]
    const auto weightGradHalf = [&] {
      if (l == 1 && wideFirst_) {  // every model's at once (weightGrad)
        HalfOut d = half_.d(1);
        d.stride = 0;
        gemmHalf(false, true, int(m), int(n * K_), int(rows), alpha, half_.z(0), int(m), d, int(n * K_), 1.0f, at(1, NNA_W), int(m), 0, nullptr, 1);
        return;
      }
      weightGradSlices(l, [&](uint64_t u0, uint64_t u1) {
        HalfOut d = gradientD(l);
        d.p = static_cast<char*>(d.p) + u0 * 2;  // 16-bit elements
        gemmHalf(false, true, int(m), int(u1 - u0), int(rows), alpha, half_.z(l - 1), int(m), d, int(n), fold ? 1.0f : 0.0f, at(l, fold ? NNA_W : NNA_DW) + u0 * m, int(m),
                 stride(l, fold ? NNA_W : NNA_DW), fold ? foldScalars_.get() : nullptr);
      });
    };
    const bool early = handsOffEarly(l);
    if (early) {  // the group reduces dw[l] while the error product runs
      weightGradHalf();
      handOff(l, true);
    }
    if (l > 1) {  // d[l-1]^T (m x rows) = w^T (m x n) . d^T (n x rows), then times act'(z[l-1])
      gemmHalf(false, false, int(m), int(rows), int(n), 1.0f, half_.w(l), int(m), half_.d(l), int(n), 0.0f, at(l - 1, NNA_D), int(m), stride(l - 1, NNA_D));
      fork();  // the weight-gradient product reads the copies of d[l] and z[l-1], which the activation gradient leaves alone
      residualAdds(l - 1, rows);
      activationGrad(l, rows, fold, hp, half_.d(l - 1));
    } else {
      fork();
    }
    if (early)
      sync_->weightsFree(l, s_, groupStep());
    else
      gradientWork(l, weightGradHalf);
    if (fold) st_.wFresh[l] = false;  // w moved: the next forward makes its copy again
    return fold;
  }

  // Column-major C = alpha op(A) op(B) + beta C for every model at once (strided operands).
  // `scalars`: alpha and beta from the device, as in product().
  // `count`: products (0: one a model).
  void gemmBatched(bool tA, bool tB, int m, int n, int k, T alpha, const T* A, int lda, long long sA, const T* B, int ldb, long long sB, T beta, T* C, int ldc, long long sC,
                   const T* scalars = nullptr, int count = 0) {
    if (!count) count = int(K_);
    if (!graph_->external(tA, tB, m, n, k, scalars ? T(0) : alpha, scalars, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, count)) return;
    blasGemmBatched(*on_, tA, tB, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, count, scalars);
  }

  // Column-major C = alpha op(A) op(B) + beta C from 16-bit operands (the run's copies: bf16 or
  // fp16) into fp32 (float arenas only: check.cc), for every model at once (sC: elements from one
  // model's C to the next; the copies carry their own strides). `scalars`: alpha and beta from
  // the device, as in product().
  void gemmHalf(bool tA, bool tB, int m, int n, int k, float alpha, HalfOut A, int lda, HalfOut B, int ldb, float beta, T* C, int ldc, long long sC, const T* scalars = nullptr,
                int count = 0) {
    if (!count) count = int(K_);
    const void *a = A.p, *b = B.p;
    const long long sA = static_cast<long long>(A.stride), sB = static_cast<long long>(B.stride);
    if (!graph_->external(tA, tB, m, n, k, scalars ? 0.0f : alpha, scalars, a, lda, sA, b, ldb, sB, beta, C, ldc, sC, count)) return;
    if constexpr (std::is_same_v<T, float>) blasGemmHalfBatched(*on_, half_.fp16(), tA, tB, m, n, k, alpha, a, lda, sA, b, ldb, sB, beta, C, ldc, sC, count, scalars);
  }

  // Every weight matrix whose copy is stale (an SGD step folded into its product moved it)
  // rounded into its copy, kMaxCasts matrices a launch.
  // unfoldedOnly: those of layers whose step does not fold (their update kernel keeps them fresh).
  void staleWeightsToHalf(bool unfoldedOnly = false) {
    if constexpr (std::is_same_v<T, float>) {
      HalfCasts c{};
      unsigned count = 0;
      auto flush = [&] {
        if (count) castsToHalf(c, count);
        c = HalfCasts{};
        count = 0;
      };
      for (uint32_t l = 1; l <= last_; ++l) {
        if (st_.wFresh[l] || (unfoldedOnly && foldsLayer(l)) || L_[l].op != NNA_OP_DENSE) continue;  // an op's gain is read in fp32
        c.src[count] = at(l, NNA_W);
        c.srcStride[count] = uint64_t(stride(l, NNA_W));
        c.dst[count] = half_.w(l);
        c.n[count] = L_[l].units * L_[l].fan_in;
        st_.wFresh[l] = true;
        if (++count == kMaxCasts) flush();
      }
      flush();
    }
  }

  // Region (l, kind)'s first n values rounded into its 16-bit copy (precision bf16 / fp16).
  void toHalf(uint32_t l, uint32_t kind, uint64_t n) {
    if constexpr (std::is_same_v<T, float>) {
      HalfCasts c{};
      c.src[0] = at(l, kind);
      c.srcStride[0] = uint64_t(stride(l, kind));
      c.dst[0] = kind == NNA_W ? half_.w(l) : kind == NNA_Z ? half_.z(l) : half_.d(l);
      c.n[0] = n;
      castsToHalf(c, 1);
      if (kind == NNA_W) st_.wFresh[l] = true;
      if (kind == NNA_Z) st_.zFresh[l] = true;
    }
  }

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
  void weightGradTf32(uint32_t l, uint64_t rows, T alpha, bool fold, const T* scalars) {
    if constexpr (std::is_same_v<T, float>) {
      const uint64_t n = L_[l].units, m = L_[l].fan_in;
      float* dT = work_.transposed(l);
      graph_->launch(s_, transposeKernel, dim3(unsigned((n + 31) / 32), unsigned((rows + 31) / 32)), dim3(32, 8), at(l, NNA_D), dT, rows, n);
      const Split z = split(0, at(l - 1, NNA_Z), rows * m), dTs = split(1, dT, rows * n);
      weightGradSlices(l, [&](uint64_t u0, uint64_t u1) {
        product(false, false, int(m), int(u1 - u0), int(rows), alpha, z, int(m), u0 ? Split{dT + u0 * rows} : dTs, int(rows), fold ? T(1) : T(0),
                at(l, fold ? NNA_W : NNA_DW) + u0 * m, int(m), scalars);
      });
    }
  }

  // Operand x (n elements) as a Split; tf32x3 splits it into workspace slot 0 or 1 first.
  Split split(int slot, const T* x, uint64_t n) {
    if (prec_ != Precision::Tf32x3) return {x};
    if constexpr (std::is_same_v<T, float>) {
      float* big = work_.slot(slot);
      float* small = big + work_.slotElements(slot);
      graph_->launch(s_, splitKernel, blocksFor(n), kThreads, x, big, small, n);
      return {x, big, small};
    }
    return {x};
  }

  // Column-major C = alpha op(A) op(B) + beta C through cuBLAS in the run's precision. tf32x3:
  // three TF32 products accumulated in C, the small terms first.
  // `scalars`: alpha and beta from the device (a fold under a schedule; tf32x3 never folds).
  void product(bool tA, bool tB, int m, int n, int k, T alpha, const Split& a, int lda, const Split& b, int ldb, T beta, T* C, int ldc, const T* scalars = nullptr) {
    if (!graph_->external(tA, tB, m, n, k, scalars ? T(0) : alpha, scalars, a.x, a.big, a.small, lda, b.x, b.big, b.small, ldb, beta, C, ldc)) return;
    if constexpr (std::is_same_v<T, float>) {
      if (prec_ == Precision::Tf32) return blasGemmTf32(*on_, tA, tB, m, n, k, alpha, a.x, lda, b.x, ldb, beta, C, ldc, scalars);
      if (prec_ == Precision::Tf32x3) {
        blasGemmTf32(*on_, tA, tB, m, n, k, alpha, a.small, lda, b.big, ldb, beta, C, ldc);
        blasGemmTf32(*on_, tA, tB, m, n, k, alpha, a.big, lda, b.small, ldb, 1.0f, C, ldc);
        return blasGemmTf32(*on_, tA, tB, m, n, k, alpha, a.big, lda, b.big, ldb, 1.0f, C, ldc);
      }
    }
    blasGemm(*on_, tA, tB, m, n, k, alpha, a.x, lda, b.x, ldb, beta, C, ldc, scalars);
  }

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
    bool foldPending = false;          // a step's loss sum awaits its fold (crossPhase_, resident runs)
    std::vector<bool> dbDone;          // db[l] of this step already taken by activationGrad
    std::vector<bool> maskFresh;       // lt_: this step's forward wrote layer l's ReLU mask
    uint64_t biasSteps = 0;            // lt_: layers (bits) whose folded bias step waits for flushBiasSteps
    uint32_t dbParked = 0;             // lt_, compact plans: the layer whose db waits in LtScratch::parked (0: none)
    uint64_t epilogues = 0;            // lt_: products of the run's first step with an epilogue (RunParams::epilogues)
    bool sideOpen = false;             // the side stream was given work this step that the run's stream has not joined
    bool dLastHalf = false;            // the step's output launch wrote d[L]'s 16-bit copy
    bool errorDone = false;            // ... and d[L-1] (headFused_: outputHeadKernel's `error`)
    uint32_t handedOff = 0;            // a group run: the layer last handed to the sync this step (handOff)
  } st_;
  cudaStream_t s_;           // the stream launches go to: the lane's, or its side stream inside onSide()
  Lane side_;                // the lane's side stream and handle
  const Lane* on_ = &lane_;  // the lane products go to (its handle): lane_, or side_ inside onSide()
  bool besides_ = false;     // whether the run gives work to the side stream (constructor)
  bool head_ = false;        // the output layer's product is output_head.cuh's
  bool headRounds_ = false;  // ... reading fp32 operands rounded to 16 bits as they load (bf16 / fp16)
  bool headFused_ = false;   // ... in the output launch itself
  uint32_t last_;
  int sms_;
  int frac_;  // fraction bits of the fixed-point loss sum for this batch size
  bool blas_;
  Precision prec_;
  bool lt_ = false;                  // products through cuBLASLt with epilogues (cublaslt_loader.h)
  bool ltForward_ = false;           // only the forward products through cuBLASLt, with bias (+ ReLU) epilogues
  bool firstStep_ = true;            // the step being launched is the run's first (RunParams::epilogues counts it)
  std::shared_ptr<RunCache> cache_;  // the arena's, or none
  ScratchShelf ownShelf_;            // a run without the cache: its buffers go with it
  LtScratch ltBuf_;
  Tf32Workspace work_;
  HalfCopies half_;
  ClipScratch clip_;  // clipping's scratch, also a loss-scaled run's (the step's norm)
  DeviceLossScale lossScale_;
  bool scaling_ = false;      // precision fp16 training: the loss scaled, each step checked (loss_scale.h)
  StepGraph own_;             // a run's own graph where the arena keeps none (graphs off: never captures)
  StepGraph* graph_ = &own_;  // launches pass through it either way
  // Launches may do work of a later phase of the step (a layer's bias gradient with the
  // activation gradient before it; the loss fold with the next gather): no scheduler acts between
  // launches (hooks) and no compact plan shares those regions' bytes with the phases between.
  bool crossPhase_;
  bool ops_ = false;                         // a layer is not dense (op_kernels.cuh)
  ops::NormRow* opRows_ = nullptr;           // a norm's per-row stats between its backward kernels (the shelf's)
  unsigned long long* embedKeys_ = nullptr;  // an embedding's sorted keys (the same bytes)
  uint32_t firstProduct_ = 1;                // the first dense layer: the forward's first product
  uint64_t opStep_ = 0;                      // the step's optimizer count: dropout's mask
  bool biasInOutput_ = false;                // the output launch adds the output layer's bias (K models)
  bool graphs_ = false;                      // steps after the first may run as graph launches
  FoldScalars<T> foldScalars_;               // a fold under a schedule: its alpha on the device
  unsigned K_;                               // models (grid z of every per-model launch, batch count of every product)
  DeviceLrs lrs_;                            // per-model learning rates on the device, or none
  bool sameLr_ = true;
  T* scaledFirst_ = nullptr;    // scalesD: d[1] times each model's lr (fp32 / fp64 runs; the shelf's)
  bool wideFirst_ = false;      // scalesD: layer 1's product over every model at once (allocateScaledCopies)
  void* scaledLast_ = nullptr;  // scalesD: d[L] times each model's lr (the run's dtype or 16 bits)
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

// The precision's tensor cores: its descriptor's compute capability or newer (of the current
// device: the arena's, made current by Backend::activate on the run's thread).
static void requireTensorCores(Precision p) {
  const PrecisionInfo& info = *precisionInfo(p);
  int device = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major < info.minMajor)
    NNA_FAIL_FIELD("BAD_OPTION", "precision",
                   std::string("precision '") + info.name + "' needs " + info.cores + " (compute capability " + std::to_string(info.minMajor) + ".0 or newer); this GPU is " +
                       std::to_string(major) + "." + std::to_string(minor));
}

// One run on `lane` (runCuda's checks made): its copies in, the fused kernel or the per-layer
// path, its copies out, and (unless p.queued) the wait that ends it.
static const char* runOnLane(void* devBase, const nna_header& h, const std::vector<nna_layer>& layers, const OpTables& ops, const RunParams& p, const Lane& lane, LayerHooks* hooks,
                             GradSync* sync) {
  // The fused kernel knows nothing of groups (shards, a group's loss rows or a reduction) and
  // runs whole steps in FP32 only: those, the trainer primitives and the TF32 precisions take
  // the per-layer path, which queues the run's copies itself (LayerRun::run).
  const bool own = !sync && !p.globalBatch && !p.shardOffset && !p.lossRows && (p.resident || p.rows > 0);
  FusedNorms norms;
  if (!hooks && own && !isPrimitive(p.op) && p.precision == Precision::Fp32 && fusedRuns(h, layers, p)) {
    queueRunCopies(devBase, p, /*in=*/true, lane.stream);
    runFused(devBase, h, layers, p, lane, &norms);
    launchNonFinite(devBase, h, layers, p, lane.stream);
    queueRunCopies(devBase, p, /*in=*/false, lane.stream);
    if (p.queued) return "fused";
    CUDA_CHECK(cudaStreamSynchronize(lane.stream));  // the run's end (the fused launch does not wait itself)
    if (norms.count && p.gradNorms) {
      p.gradNorms->resize(norms.count);
      CUDA_CHECK(cudaMemcpy(p.gradNorms->data(), norms.at, norms.count * sizeof(double), cudaMemcpyDeviceToHost));
    }
    return "fused";
  }
  bool blas = false;
  try {
    if (h.dtype == NNA_FLOAT64)
      blas = LayerRun<double>(devBase, h, layers, ops, p, lane, hooks, sync).run();
    else
      blas = LayerRun<float>(devBase, h, layers, ops, p, lane, hooks, sync).run();
  } catch (...) {
    if (sync) sync->abort();
    if (hooks) {
      cudaStreamSynchronize(lane.stream);
      hooks->endRun(lane.stream);
    }
    throw;
  }
  // Budgeted arenas: the parameters need not be on the device after the run (a stager's pool).
  if (hooks) hooks->endRun(lane.stream);
  return blas ? "layers (cublas)" : "layers (tiled)";
}

const char* runCuda(void* devBase, const void* header, const RunParams& p, LayerHooks* hooks, GradSync* sync) {
  checkRun(header, p);
  checkTarget(header, p, RunTarget{/*cuda=*/true, /*budgeted=*/hooks != nullptr});  // budget_run.cu checks it too, before its schedulers
  if (p.reduce && !sync) NNA_FAIL("NOT_SUPPORTED", "reduce needs an arena in a data-parallel group (a communicator)");
  if (!p.reduce) sync = nullptr;
  nna_header h;
  std::memcpy(&h, header, sizeof h);
  std::vector<nna_layer> layers(h.num_layers);
  std::memcpy(layers.data(), static_cast<const char*>(header) + h.layers_offset, layers.size() * sizeof(nna_layer));
  if (p.precision != Precision::Fp32) requireTensorCores(p.precision);
  if (precisionInfo(p.precision)->needsBlas && !productsUseBlas(h, layers))
    NNA_FAIL_FIELD("NOT_SUPPORTED", "precision",
                   std::string("precision '") + precisionName(p.precision) +
                       "' computes its products through cuBLAS, which this run cannot use "
                       "(not found, NN_ARENA_GEMM=tiled, or a dimension beyond 2^31): use 'tf32' or 'fp32'");
  if (p.copies && (hooks || sync)) NNA_FAIL("NOT_SUPPORTED", "a run's own copies on a budgeted arena or in a data-parallel group");
  LaneGuard lane;
  std::vector<uint32_t> from(h.num_layers, 0);  // residual layers' sources, from the op parameter table
  for (uint32_t l = 0; l < h.num_layers; ++l)
    if (const nna_op_param* q = nna_op_param_of(header, l)) from[l] = q->from;
  OpTables tables;
  tables.adders.resize(h.num_layers);
  for (uint32_t k = 0; k < h.num_layers; ++k)
    tables.adders[k] = ops::residualAdders(
        h.num_layers, k, [&](uint32_t r) { return layers[r].op; }, [&](uint32_t r) { return from[r]; });
  if (const nna_embed_col* cols = nna_embed_cols_of(header)) {
    tables.embedColumns = nna_op_param_of(header, 1)->count;
    for (uint32_t j = 0; j < tables.embedColumns; ++j) tables.embedMaxDim = std::max(tables.embedMaxDim, cols[j].dim);
  }
  if (p.feed) return runFeed(devBase, p, *lane, [&](const RunParams& q) { return runOnLane(devBase, h, layers, tables, q, *lane, nullptr, nullptr); });
  const char* path = runOnLane(devBase, h, layers, tables, p, *lane, hooks, sync);
  if (!p.queued && !hooks && !sync) lane.settled();  // it ended with its stream's wait (runOnLane)
  return path;
}

}  // namespace nna
