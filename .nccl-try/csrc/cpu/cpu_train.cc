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
#include "gemm.h"
#include "thread_pool.h"

namespace nna {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NNA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=haswell", "default")))
#else
#define NNA_CLONES
#endif

// Column sums of d (rows x n), row after row: the same order whatever the thread count.
template <typename T>
inline void colSumT(const T* d, uint64_t rows, uint64_t n, T* out) {
  std::fill(out, out + n, T(0));
  for (uint64_t r = 0; r < rows; ++r) {
    const T* row = d + r * n;
#pragma omp simd
    for (uint64_t j = 0; j < n; ++j) out[j] += row[j];
  }
}
NNA_CLONES void colSum(const float* d, uint64_t rows, uint64_t n, float* out) { colSumT(d, rows, n, out); }
NNA_CLONES void colSum(const double* d, uint64_t rows, uint64_t n, double* out) { colSumT(d, rows, n, out); }

// Runs f(begin, end) over [0, count) in one contiguous chunk per pool thread when the work
// (count * costPerItem) is worth waking them; otherwise inline.
template <typename F>
void parallelFor(uint64_t count, uint64_t costPerItem, F&& f) {
  const uint64_t work = count * std::max<uint64_t>(costPerItem, 1);
  const unsigned t = unsigned(std::min<uint64_t>({cpu::poolThreads(), count, std::max<uint64_t>(work / 200000, 1)}));
  if (t <= 1) { f(uint64_t(0), count); return; }
  cpu::parallel(t, [&](unsigned i) { f(count * i / t, count * (i + 1) / t); });
}

// ---- One run -------------------------------------------------------------------------------
template <typename T>
class CpuRun {
 public:
  CpuRun(void* base, const RunParams& p) : p_(p) {
    std::memcpy(&h_, base, sizeof h_);
    for (uint32_t l = 0; l < h_.num_layers; ++l) L_.push_back(nna_bind<T>(base, l));
    stats_ = L_.back().stats;
  }

  void run() {
    if (p_.resetStats) {
      std::fill(stats_, stats_ + NNA_STATS_COUNT, T(0));
      stats_[NNA_STAT_BAD_STEP] = T(-1);
    }
    for (uint64_t s = 0; s < p_.numBatches; ++s) {
      const StepRows sr = stepRows(h_.batch, p_, s);
      const uint64_t rows = p_.resident ? gather(sr) : sr.rows;
      scale_ = sr.scale;
      if (rows == 0) {  // a replica's empty shard: zero gradients (and a step with them)
        if (p_.op == Op::Train || p_.op == Op::Grad) emptyStep(p_.stepBase + s + 1);
        continue;
      }
      for (uint32_t l = 1; l < h_.num_layers; ++l) forward(l, rows);
      output(rows, s);
      if (p_.op == Op::Forward || p_.op == Op::Eval) continue;
      for (uint32_t l = h_.num_layers - 1; l >= 1; --l) backward(l, rows, p_.stepBase + s + 1);
      if (p_.op == Op::Grad) continue;
      if (stats_[NNA_STAT_BAD_STEP] >= T(0)) break;  // diverged: the weights are no longer finite
    }
  }

 private:
  // A step without rows: gradients are zero; training still takes the optimizer step (momentum
  // and Adam state move on, as on the replicas that had rows).
  void emptyStep(uint64_t t) {
    const Hyper<T> hp = hyper(t);
    for (uint32_t l = 1; l < h_.num_layers; ++l) {
      const nna_bound_layer<T>& C = L_[l];
      const uint64_t n = C.units, nw = C.units * C.fan_in;
      std::fill(C.db, C.db + n, T(0));
      std::fill(C.dw, C.dw + nw, T(0));
      if (p_.op != Op::Train) continue;
      for (uint64_t i = 0; i < nw; ++i) updateParam<T>(h_.optimizer, C.w + i, T(0), C.mw ? C.mw + i : nullptr, C.vw ? C.vw + i : nullptr, hp);
      for (uint64_t i = 0; i < n; ++i) updateParam<T>(h_.optimizer, C.b + i, T(0), C.mb ? C.mb + i : nullptr, C.vb ? C.vb + i : nullptr, hp);
    }
  }

  // Copies the step's rows of the shuffled epoch from the resident data set into z[0] and y.
  uint64_t gather(const StepRows& sr) {
    const nna_bound_layer<T>& in = L_.front();
    const nna_bound_layer<T>& out = L_.back();
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
  void forward(uint32_t l, uint64_t rows) {
    const nna_bound_layer<T>& P = L_[l - 1];
    const nna_bound_layer<T>& C = L_[l];
    cpu::Gemm<T> g;
    g.transB = true;
    g.m = rows; g.n = C.units; g.k = C.fan_in;
    g.a = P.z; g.lda = C.fan_in;
    g.b = C.w; g.ldb = C.fan_in;
    g.c = C.z; g.ldc = C.units;
    g.ep.kind = cpu::Epi::BiasAct;
    g.ep.act = C.activation;
    g.ep.bias = C.b;
    cpu::gemm(g);
  }

  void output(uint64_t rows, uint64_t step) {
    const nna_bound_layer<T>& O = L_.back();
    const bool mse = p_.loss == Loss::Mse, grad = p_.op == Op::Train || p_.op == Op::Grad;
    res_.resize(rows);
    parallelFor(rows, O.units * 16, [&](uint64_t b, uint64_t e) {
      for (uint64_t r = b; r < e; ++r)
        res_[r] = outputRow<T>(O.z + r * O.units, O.y + r * O.units, O.d + r * O.units, O.units, O.activation, mse, scale_, grad);
    });
    if (p_.op == Op::Forward) return;  // outputs only (softmax applied); y may be anything
    double loss = 0, correct = 0;
    bool bad = false;
    for (uint64_t r = 0; r < rows; ++r) {  // in row order, so the sum never depends on threads
      loss += res_[r].loss;
      correct += res_[r].correct;
      bad |= !std::isfinite(res_[r].loss);
    }
    stats_[NNA_STAT_LOSS] += T(loss);
    stats_[NNA_STAT_CORRECT] += T(correct);
    stats_[NNA_STAT_ROWS] += T(rows);
    if (bad && stats_[NNA_STAT_BAD_STEP] < T(0)) stats_[NNA_STAT_BAD_STEP] = T(step);
  }

  // d_{l-1} = (d_l W_l) * act'(z_{l-1}) first, while W_l is unchanged; then db_l = column sums
  // of d_l and dW_l = d_l^T z_{l-1}. Training updates W_l in the same product: SGD as
  // W_l -= lr d_l^T z_{l-1} (alpha = -lr, beta = 1; dw is not written, as on CUDA), momentum and
  // Adam in the epilogue of each finished dW tile.
  void backward(uint32_t l, uint64_t rows, uint64_t t) {
    const nna_bound_layer<T>& P = L_[l - 1];
    const nna_bound_layer<T>& C = L_[l];
    const uint64_t n = C.units, m = C.fan_in;
    if (l > 1) {
      cpu::Gemm<T> g;
      g.m = rows; g.n = m; g.k = n;
      g.a = C.d; g.lda = n;
      g.b = C.w; g.ldb = m;
      g.c = P.d; g.ldc = m;
      g.ep.kind = cpu::Epi::ActGrad;
      g.ep.act = P.activation;
      g.ep.z = P.z;
      g.ep.ldz = m;
      cpu::gemm(g);
    }
    colSum(C.d, rows, n, C.db);
    const bool train = p_.op == Op::Train;
    const Hyper<T> hp = hyper(t);
    cpu::Gemm<T> g;
    g.transA = true;
    g.m = n; g.n = m; g.k = rows;
    g.a = C.d; g.lda = n;
    g.b = P.z; g.ldb = m;
    g.ldc = m;
    g.c = C.dw;
    if (train && h_.optimizer == NNA_SGD) {
      g.c = C.w;
      g.alpha = -hp.lr;
      g.beta = T(1);
    } else if (train) {
      g.ep.kind = cpu::Epi::Update;
      g.ep.optimizer = h_.optimizer;
      g.ep.w = C.w; g.ep.m = C.mw; g.ep.v = C.vw;
      g.ep.lr = hp.lr; g.ep.mu = hp.mu; g.ep.b1 = hp.b1; g.ep.b2 = hp.b2; g.ep.eps = hp.eps; g.ep.bc1 = hp.bc1; g.ep.bc2 = hp.bc2;
    }
    cpu::gemm(g);
    if (train)
      for (uint64_t i = 0; i < n; ++i) updateParam<T>(h_.optimizer, C.b + i, C.db[i], C.mb ? C.mb + i : nullptr, C.vb ? C.vb + i : nullptr, hp);
  }

  Hyper<T> hyper(uint64_t t) const { return hyperAt<T>(p_.lr, p_.momentum, p_.beta1, p_.beta2, p_.eps, t); }

  RunParams p_;
  uint64_t scale_ = 0;  // rows the step's mean loss divides by
  nna_header h_;
  std::vector<nna_bound_layer<T>> L_;
  T* stats_ = nullptr;
  std::vector<RowResult> res_;
};

}  // namespace

void runCpu(void* base, const RunParams& p) {
  checkRun(base, p);
  if (p.reduce) NNA_FAIL("NOT_SUPPORTED", "an all-reduce over replicas needs the CUDA backend and NCCL; this arena uses the CPU backend");
  const uint32_t dtype = static_cast<const nna_header*>(base)->dtype;
  if (dtype == NNA_FLOAT64) CpuRun<double>(base, p).run();
  else CpuRun<float>(base, p).run();
}

}  // namespace nna
