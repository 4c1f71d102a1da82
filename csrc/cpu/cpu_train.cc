// cpu_train.cc: the CPU backend's training step over one arena. Every tensor is bound from
// the base pointer through nn_arena.h; the three products of each layer go through the blocked
// GEMM (gemm.h) with bias + activation, act' and the optimizer step fused into its epilogues,
// and all parallel work runs on the one persistent pool (thread_pool.h).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../core/failure.h"
#include "../train/math.h"
#include "../train/train.h"
#include "cpu_ops.h"
#include "gemm.h"
#include "../core/thread_pool.h"

namespace nna {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NNA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=haswell", "default")))
#else
#define NNA_CLONES
#endif

// Column sums of d (rows x n), row after row: the same order whatever the thread count.
template <typename T> inline void colSumT(const T* d, uint64_t rows, uint64_t n, T* out) {
  std::fill(out, out + n, T(0));
  for (uint64_t r = 0; r < rows; ++r) {
    const T* row = d + r * n;
#pragma omp simd
    for (uint64_t j = 0; j < n; ++j) out[j] += row[j];
  }
}
NNA_CLONES void colSum(const float* d, uint64_t rows, uint64_t n, float* out) { colSumT(d, rows, n, out); }
NNA_CLONES void colSum(const double* d, uint64_t rows, uint64_t n, double* out) { colSumT(d, rows, n, out); }

// Whether every x[i] is finite: x * 0 is 0 for a finite x and NaN otherwise, and the sum is
// NaN as soon as one is (any order: vectorized).
template <typename T> inline bool allFiniteT(const T* x, uint64_t n) {
  T acc = T(0);
#pragma omp simd reduction(+ : acc)
  for (uint64_t i = 0; i < n; ++i) acc += x[i] * T(0);
  return acc == T(0);
}
NNA_CLONES bool allFinite(const float* x, uint64_t n) { return allFiniteT(x, n); }
NNA_CLONES bool allFinite(const double* x, uint64_t n) { return allFiniteT(x, n); }
// Sum of squares in double, in 4 interleaved partial sums added in a fixed order.
template <typename T> inline double sumSquaresT(const T* g, uint64_t n) {
  double s[4] = {0, 0, 0, 0};
  uint64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) s[k] += double(g[i + k]) * double(g[i + k]);
  for (; i < n; ++i) s[0] += double(g[i]) * double(g[i]);
  return (s[0] + s[1]) + (s[2] + s[3]);
}
NNA_CLONES double sumSquares(const float* g, uint64_t n) { return sumSquaresT(g, n); }
NNA_CLONES double sumSquares(const double* g, uint64_t n) { return sumSquaresT(g, n); }

// ---- One run -------------------------------------------------------------------------------
// K-model arenas (nna_header.models): each step gathers the shared batch once, then runs every
// model's forward, output and backward pass in turn on its own copies of the regions, with its
// own learning rate and stats; each model's arithmetic is exactly a one-model run's.
template <typename T> class CpuRun {
 public:
  CpuRun(void* base, const RunParams& p) : p_(p) {
    std::memcpy(&h_, base, sizeof h_);
    models_ = nna_models(&h_);
    L_.resize(models_);
    for (uint64_t m = 0; m < models_; ++m)
      for (uint32_t l = 0; l < h_.num_layers; ++l) L_[m].push_back(nna_bind_model<T>(base, l, m));
  }

  void run() {
    if (p_.resetStats)
      for (uint64_t m = 0; m < models_; ++m) {
        T* stats = L_[m].back().stats;
        std::fill(stats, stats + NNA_STATS_COUNT, T(0));
        stats[NNA_STAT_BAD_STEP] = T(-1);
      }
    if (p_.gradNorms && p_.clips()) p_.gradNorms->assign((isPrimitive(p_.op) ? 1 : p_.numBatches) * models_, std::nan(""));
    if (isPrimitive(p_.op)) {
      for (uint64_t m = 0; m < models_; ++m) primitive(L_[m], p_.lrOf(m), m);
      return;
    }
    std::vector<bool> stopped(models_, false);  // a diverged model stops, as a run of it alone would
    for (uint64_t s = 0; s < p_.numBatches; ++s) {
      const StepRows sr = stepRows(h_.batch, p_, s);
      const uint64_t rows = p_.resident ? gather(sr) : sr.rows;
      scale_ = sr.scale;
      ops_.step = p_.stepBase + s + 1;
      bool any = false;
      for (uint64_t m = 0; m < models_; ++m) {
        if (stopped[m]) continue;
        any = true;
        const std::vector<nna_bound_layer<T>>& L = L_[m];
        if (rows == 0) {  // a replica's empty shard: zero gradients (and a step with them)
          if (p_.op == Op::Train || p_.op == Op::Grad) emptyStep(L, p_.stepBase + s + 1, p_.lrOf(m), s * models_ + m);
          continue;
        }
        for (uint32_t l = 1; l < h_.num_layers; ++l) forward(L, l, rows);
        output(L, rows, s);
        if (p_.op == Op::Forward || p_.op == Op::Eval) continue;
        for (uint32_t l = h_.num_layers - 1; l >= 1; --l) backward(L, l, rows, p_.stepBase + s + 1, p_.lrOf(m));
        if (p_.op == Op::Grad) continue;
        if (deferred_) applyUpdates(L, hyper(p_.lrOf(m), p_.stepBase + s + 1), s * models_ + m, true);
        markNonFinite(L, s);
        if (L.back().stats[NNA_STAT_BAD_STEP] >= T(0)) stopped[m] = true;  // diverged: the weights are no longer finite
      }
      if (!any) break;
    }
    if (scaling_ && p_.lossScaleOut) *p_.lossScaleOut = ls_;
  }

 private:
  // A step without rows: gradients are zero; training still takes the optimizer step (momentum
  // and Adam state move on, as on the replicas that had rows).
  void emptyStep(const std::vector<nna_bound_layer<T>>& L, uint64_t t, double lr, uint64_t normSlot) {
    for (uint32_t l = 1; l < h_.num_layers; ++l) {
      const nna_bound_layer<T>& C = L[l];
      if (C.db) std::fill(C.db, C.db + C.b_count, T(0));
      if (C.dw) std::fill(C.dw, C.dw + C.w_count, T(0));
    }
    if (p_.op == Op::Train) applyUpdates(L, hyper(lr, t), normSlot);
  }

  // The optimizer step of every layer from its dw and db, through the GEMM's update code
  // (cpu::update: the bits of the dW product's epilogue). Clipping scales the gradients by the
  // step's global norm first (the element update multiplies g by hp.gs) and records the norm;
  // `products`: this step's dW products left their squares in squares_.
  // With the loss scaled (fp16), the gradients are S times the true ones: a step whose norm is
  // not finite is skipped (loss_scale.h), and the others are divided by S in the update (gs),
  // clipped by their true norm.
  void applyUpdates(const std::vector<nna_bound_layer<T>>& L, Hyper<T> hp, uint64_t normSlot, bool products = false) {
    if (p_.clips() || scaling_) {
      const double s = scaling_ ? ls_.scale : 1.0, norm = gradNorm(L, products) / s;
      if (p_.clips() && p_.gradNorms) (*p_.gradNorms)[normSlot] = norm;
      if (scaling_ && !ls_.afterStep(std::isfinite(norm))) return;
      hp.gs = T((p_.clips() ? clipScale(p_.opt.clipGradNorm, norm) : 1.0) / s);
    }
    for (uint32_t l = h_.num_layers - 1; l >= 1; --l) updateLayer(L[l], hp);
  }

  // Layer C's parameters from its dw and db: a dense layer's weights through the GEMM's update
  // code, an embedding's tables element by element, a norm's gain element by element with the
  // biases' hyperparameters (no weight decay unless decayBiases: it is not a 2-D parameter).
  void updateLayer(const nna_bound_layer<T>& C, const Hyper<T>& hp) {
    if (C.op == NNA_OP_DENSE)
      cpu::update(updateEpilogue(C, hp), C.dw, C.units, C.fan_in);
    else {
      const Hyper<T> hw = nna_op_w_decays(C.op) ? hp : forBiases(hp);  // tables decay; a gain as a bias
      for (uint64_t i = 0; i < C.w_count; ++i) updateWeight<T>(h_.optimizer, C, i, C.dw[i], hw);
    }
    updateBiases(C, hp);
  }

  // The global norm of one model's gradients, summed in double, layer by layer: dw's squares
  // micro-tile by micro-tile in slot order (the dW product's Squares epilogue took them, or
  // cpu::squares from memory: the same bits), then db's. The same bits whatever the thread count.
  double gradNorm(const std::vector<nna_bound_layer<T>>& L, bool products) {
    double total = 0;
    for (uint32_t l = 1; l < h_.num_layers; ++l) {
      const nna_bound_layer<T>& C = L[l];
      if (C.op != NNA_OP_DENSE)
        total += sumSquares(C.dw, C.w_count);
      else
        total += products ? cpu::squaresTotal(squares_[l].data(), squares_[l].size()) : cpu::squares(C.dw, C.units, C.fan_in);
      total += sumSquares(C.db, C.b_count);
    }
    return std::sqrt(total);
  }

  // Backward, BackwardFromOutput, Update for one model: a Train step split in three runs (a
  // Forward run first) through the same code, so together they give a Train run's bits: the
  // weights' update goes through the GEMM's own update code with its tiling (cpu::update), the
  // biases' as in backward().
  void primitive(const std::vector<nna_bound_layer<T>>& L, double lr, uint64_t m) {
    const uint64_t rows = p_.rows;
    scale_ = stepRows(h_.batch, p_, 0).scale;
    if (p_.op == Op::Update) {
      applyUpdates(L, hyper(lr, p_.stepBase + 1), m);
      markNonFinite(L, 0);
      return;
    }
    if (p_.op == Op::Backward) {
      // The Forward run left softmax's probabilities in z[L], not the logits, and a loss read
      // from probabilities that underflowed would be clamped: the output layer's product again
      // (z[L-1] and w[L] are as the Forward run left them), so the loss and d are a Train run's.
      forward(L, h_.num_layers - 1, rows);
      output(L, rows, 0);
    } else {
      const nna_bound_layer<T>& O = L.back();
      parallelFor(rows, O.units * 4, [&](uint64_t b, uint64_t e) {
        for (uint64_t r = b; r < e; ++r) outputGradRow<T>(O.z + r * O.units, O.d + r * O.units, O.units, O.activation, T(O.act_param));
      });
    }
    for (uint32_t l = h_.num_layers - 1; l >= 1; --l) backward(L, l, rows, p_.stepBase + 1, lr);
  }

  // A step that left a weight or bias non-finite diverged even when its loss was finite (a
  // ReLU maps NaN to 0 and a saturated sigmoid maps inf to 1, so the next losses can stay
  // finite): it becomes the run's bad step like a non-finite loss. One pass over the
  // parameters a step, against the three products' passes over them.
  void markNonFinite(const std::vector<nna_bound_layer<T>>& L, uint64_t step) {
    T* stats = L.back().stats;
    if (stats[NNA_STAT_BAD_STEP] >= T(0)) return;
    for (uint32_t l = 1; l < h_.num_layers; ++l)
      if (!allFinite(L[l].w, L[l].w_count) || !allFinite(L[l].b, L[l].b_count)) {
        stats[NNA_STAT_BAD_STEP] = T(step);
        return;
      }
  }

  Hyper<T> hyper(double lr, uint64_t t) const { return hyperAt<T>(p_.opt, lr, t); }

  // Copies the step's rows of the shuffled epoch from the resident data set into z[0] and y
  // (shared by every model).
  uint64_t gather(const StepRows& sr) {
    const nna_bound_layer<T>& in = L_[0].front();
    const nna_bound_layer<T>& out = L_[0].back();
    const uint64_t first = sr.first;
    const uint64_t rows = sr.rows;
    parallelFor(rows, in.units, [&](uint64_t b, uint64_t e) {
      for (uint64_t r = b; r < e; ++r) {
        const uint64_t k = permIndex(first + r, p_.permA, p_.permC, p_.samples);
        std::memcpy(in.z + r * in.units, in.xdata + k * in.units, in.units * sizeof(T));
        std::memcpy(out.y + r * out.units, out.ydata + k * out.units, out.units * sizeof(T));
      }
    });
    return rows;
  }

  // z_l = act(z_{l-1} W_l^T + b_l) (softmax is finished in output()).
  void forward(const std::vector<nna_bound_layer<T>>& L, uint32_t l, uint64_t rows) {
    const nna_bound_layer<T>& P = L[l - 1];
    const nna_bound_layer<T>& C = L[l];
    if (C.op != NNA_OP_DENSE) return cpu::opForward(L, l, rows, ops_);
    cpu::Gemm<T> g;
    g.transB = true;
    g.m = rows;
    g.n = C.units;
    g.k = C.fan_in;
    g.a = P.z;
    g.lda = C.fan_in;
    g.b = C.w;
    g.ldb = C.fan_in;
    g.c = C.z;
    g.ldc = C.units;
    g.ep.kind = cpu::Epi::BiasAct;
    g.ep.act = C.activation;
    g.ep.param = T(C.act_param);
    g.ep.bias = C.b;
    g.ep.pre = C.pre;
    g.round = round_;
    cpu::gemm(g);
    if (l + 1 == h_.num_layers && L[1].op == NNA_OP_EMBEDDING) cpu::embedPoison(L, rows);
  }

  void output(const std::vector<nna_bound_layer<T>>& L, uint64_t rows, uint64_t step) {
    const nna_bound_layer<T>& O = L.back();
    T* stats = O.stats;
    const OutputLoss ol = outputLoss(O.activation, O.act_param, p_);
    const bool grad = p_.op == Op::Train || p_.op == Op::Grad || p_.op == Op::Backward;
    res_.resize(rows);
    parallelFor(rows, O.units * 16, [&](uint64_t b, uint64_t e) {
      for (uint64_t r = b; r < e; ++r) {
        res_[r] = outputRow<T>(O.z + r * O.units, O.y + r * O.units, O.d + r * O.units, O.units, ol, scale_, grad);
        if (scaling_)  // the loss scale: d of S times the loss (the loss itself stays unscaled)
          for (uint64_t j = 0; j < O.units; ++j) O.d[r * O.units + j] *= T(ls_.scale);
      }
    });
    if (p_.op == Op::Forward) return;  // outputs only (softmax applied); y may be anything
    double loss = 0, correct = 0;
    bool bad = false;
    for (uint64_t r = 0; r < rows; ++r) {  // in row order, so the sum never depends on threads
      loss += res_[r].loss;
      correct += res_[r].correct;
      bad |= !std::isfinite(res_[r].loss);
    }
    stats[NNA_STAT_LOSS] += T(loss);
    stats[NNA_STAT_CORRECT] += T(correct);
    stats[NNA_STAT_ROWS] += T(rows);
    if (bad && stats[NNA_STAT_BAD_STEP] < T(0)) stats[NNA_STAT_BAD_STEP] = T(step);
  }

  // d_{l-1} = (d_l W_l) * act'(z_{l-1}) first, while W_l is unchanged; then db_l = column sums
  // of d_l and dW_l = d_l^T z_{l-1}. Training updates W_l in the same product, in the epilogue
  // of each finished dW tile (every optimizer; SGD is not folded into the product as on CUDA,
  // so that an Update run from dw gives the same bits, cpu::update).
  void backward(const std::vector<nna_bound_layer<T>>& L, uint32_t l, uint64_t rows, uint64_t t, double lr) {
    const nna_bound_layer<T>& P = L[l - 1];
    const nna_bound_layer<T>& C = L[l];
    const uint64_t n = C.units, m = C.fan_in;
    if (C.op != NNA_OP_DENSE) {
      cpu::opBackward(L, l, rows, ops_, normRows_);
      if (l > 1) cpu::finishError(L, l - 1, rows);
      if (p_.op == Op::Train && !deferred_) updateLayer(C, hyper(lr, t));
      return;
    }
    // d[l-1] takes f' in the product's epilogue unless a residual layer adds z[l-1] too: then
    // the additions first, f' after (finishError).
    const bool adds = l > 1 && cpu::residualAdds(L, l - 1);
    if (l > 1) {
      cpu::Gemm<T> g;
      g.m = rows;
      g.n = m;
      g.k = n;
      g.a = C.d;
      g.lda = n;
      g.b = C.w;
      g.ldb = m;
      g.c = P.d;
      g.ldc = m;
      g.ep.kind = cpu::Epi::ActGrad;
      g.ep.act = adds ? uint32_t(NNA_ACT_IDENTITY) : P.activation;
      g.ep.param = T(P.act_param);
      g.ep.z = P.pre ? P.pre : P.z;  // f' from the pre-activations where the activation keeps them
      g.ep.ldz = m;
      g.round = round_;
      cpu::gemm(g);
      if (adds) cpu::finishError(L, l - 1, rows);
    }
    colSum(C.d, rows, n, C.db);
    // Clipping defers every update until the step's gradients are all in (applyUpdates).
    const bool train = p_.op == Op::Train && !deferred_;
    const Hyper<T> hp = hyper(lr, t);
    cpu::Gemm<T> g;
    g.transA = true;
    g.m = n;
    g.n = m;
    g.k = rows;
    g.a = C.d;
    g.lda = n;
    g.b = P.z;
    g.ldb = m;
    g.ldc = m;
    g.round = round_;
    g.c = C.dw;
    if (!g.c) {  // a compact SGD arena has no dw: the same product and epilogue through a scratch (gradScratch_)
      if (gradScratch_.size() < n * m) gradScratch_.resize(n * m);
      g.c = gradScratch_.data();
    }
    if (train) g.ep = updateEpilogue(C, hp);
    if (deferred_) {  // the clipping norm's squares, as the tiles finish
      if (squares_.size() < h_.num_layers) squares_.resize(h_.num_layers);
      squares_[l].assign(cpu::squareSlots(g.m, g.n), 0.0);
      g.ep.kind = cpu::Epi::Squares;
      g.ep.squares = squares_[l].data();
    }
    cpu::gemm(g);
    if (train) updateBiases(C, hp);
  }

  // The optimizer step of C's weights, as the dW product's epilogue or cpu::update runs it.
  cpu::Epilogue<T> updateEpilogue(const nna_bound_layer<T>& C, const Hyper<T>& hp) const {
    cpu::Epilogue<T> e;
    e.kind = cpu::Epi::Update;
    e.optimizer = h_.optimizer;
    e.w = C.w;
    e.m = C.mw;
    e.v = C.vw;
    e.h = hp;
    return e;
  }

  void updateBiases(const nna_bound_layer<T>& C, const Hyper<T>& hp) {
    const Hyper<T> hb = forBiases(hp);
    for (uint64_t i = 0; i < C.b_count; ++i) updateBias<T>(h_.optimizer, C, i, C.db[i], hb);
  }

  RunParams p_;
  // Precisions bf16 and fp16 (float arenas: check.cc): the three products read roundings of
  // their operands (gemm.h), as the CUDA path's products read its bf16 copies.
  cpu::Round round_ = !std::is_same_v<T, float>         ? cpu::Round::None
                      : p_.precision == Precision::Bf16 ? cpu::Round::Bf16
                      : p_.precision == Precision::Fp16 ? cpu::Round::Fp16
                                                        : cpu::Round::None;
  // fp16's dynamic loss scaling (loss_scale.h), for a Train run (checkRun refuses the primitives):
  // d[L] times the scale; the updates wait for the step's gradients to be known finite.
  LossScale ls_ = p_.lossScale;
  bool scaling_ = ls_.active() && p_.op == Op::Train;
  bool deferred_ = (p_.clips() && p_.op == Op::Train) || scaling_;  // updates wait for the step's global norm
  std::vector<std::vector<double>> squares_;                        // per layer: the Squares epilogue's slots (gradNorm)
  uint64_t scale_ = 0;                                              // rows the step's mean loss divides by
  nna_header h_;
  uint64_t models_ = 1;
  std::vector<std::vector<nna_bound_layer<T>>> L_;  // [model][layer]
  std::vector<RowResult> res_;
  // The ops' step: dropout drops in runs that differentiate (the primitives' Backward runs are
  // refused on such arenas: checkRun), with the Trainer's seed and the step's count.
  cpu::OpStep ops_{p_.op == Op::Train || p_.op == Op::Grad, p_.dropoutSeed, p_.stepBase + 1};
  std::vector<ops::NormRow> normRows_;  // per-row stats of a norm's backward
  // The weight gradient of a layer whose arena has no dw (a compact SGD plan): the dW product
  // and its update epilogue run as on a full plan (the same bits), into these transient bytes
  // outside the arena, like the GEMM's packing buffers. Sized for the largest layer once.
  std::vector<T> gradScratch_;
};

}  // namespace

void runCpu(void* base, const RunParams& p) {
  checkRun(base, p);
  if (p.reduce) NNA_FAIL("NOT_SUPPORTED", "an all-reduce over replicas needs the CUDA backend and NCCL; this arena uses the CPU backend");
  checkTarget(base, p, RunTarget{/*cuda=*/false, /*budgeted=*/false});
  const uint32_t dtype = static_cast<const nna_header*>(base)->dtype;
  if (dtype == NNA_FLOAT64)
    CpuRun<double>(base, p).run();
  else
    CpuRun<float>(base, p).run();
}

}  // namespace nna
