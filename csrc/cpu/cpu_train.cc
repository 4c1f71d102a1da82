// cpu_train.cc: the CPU backend's training step over one arena. Every tensor is bound from
// the base pointer through nn_arena.h; inner loops run over contiguous rows so the compiler
// vectorises them (AVX2/FMA clones where the CPU has them), and rows or output units are
// split across the cores.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "../core/failure.h"
#include "../train/math.h"
#include "../train/train.h"
#include "../core/env.h"

namespace nna {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NNA_CLONES __attribute__((target_clones("arch=haswell", "default")))
#else
#define NNA_CLONES
#endif

// ---- Vector primitives (the hot loops) -----------------------------------------------------
template <typename T>
inline T dotT(const T* a, const T* b, uint64_t n) {
  T acc = T(0);
#pragma omp simd reduction(+ : acc)
  for (uint64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}
template <typename T>
inline void axpyT(T* y, T a, const T* x, uint64_t n) {
#pragma omp simd
  for (uint64_t i = 0; i < n; ++i) y[i] += a * x[i];
}
NNA_CLONES float dot(const float* a, const float* b, uint64_t n) { return dotT(a, b, n); }
NNA_CLONES double dot(const double* a, const double* b, uint64_t n) { return dotT(a, b, n); }
NNA_CLONES void axpy(float* y, float a, const float* x, uint64_t n) { axpyT(y, a, x, n); }
NNA_CLONES void axpy(double* y, double a, const double* x, uint64_t n) { axpyT(y, a, x, n); }

// ---- Work splitting ------------------------------------------------------------------------
unsigned threadCount() {
  static const unsigned n = [] {
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    return unsigned(knobInt(Knob::Threads, hw, 1, 256));
  }();
  return n;
}

// Runs f(begin, end) over [0, count) in contiguous chunks, one per thread, when the work
// (count * costPerItem multiply-adds) is worth a thread; otherwise inline.
template <typename F>
void parallelFor(uint64_t count, uint64_t costPerItem, F&& f) {
  const uint64_t work = count * std::max<uint64_t>(costPerItem, 1);
  const unsigned t = unsigned(std::min<uint64_t>({threadCount(), count, std::max<uint64_t>(work / 200000, 1)}));
  if (t <= 1) { f(uint64_t(0), count); return; }
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  const uint64_t chunk = (count + t - 1) / t;
  for (unsigned i = 1; i < t; ++i) {
    const uint64_t b = i * chunk, e = std::min(count, b + chunk);
    if (b < e) pool.emplace_back([&f, b, e] { f(b, e); });
  }
  f(0, std::min(count, chunk));
  for (auto& th : pool) th.join();
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
      const uint64_t rows = p_.resident ? gather(p_.firstBatch + s) : p_.rows;
      for (uint32_t l = 1; l < h_.num_layers; ++l) forward(l, rows);
      output(rows, s);
      if (p_.op == Op::Forward || p_.op == Op::Eval) continue;
      for (uint32_t l = h_.num_layers - 1; l >= 1; --l) backward(l, rows);
      if (p_.op == Op::Grad) continue;
      update(p_.stepBase + s + 1);
      if (stats_[NNA_STAT_BAD_STEP] >= T(0)) break;  // diverged: the weights are no longer finite
    }
  }

 private:
  // Copies batch `batch` of the shuffled epoch from the resident data set into z[0] and y.
  uint64_t gather(uint64_t batch) {
    const nna_bound_layer<T>& in = L_.front();
    const nna_bound_layer<T>& out = L_.back();
    const uint64_t first = batch * h_.batch;
    const uint64_t rows = std::min<uint64_t>(h_.batch, p_.samples - first);
    parallelFor(rows, in.units, [&](uint64_t b, uint64_t e) {
      for (uint64_t r = b; r < e; ++r) {
        const uint64_t k = permIndex(first + r, p_.permA, p_.permC, p_.samples);
        std::memcpy(in.z + r * in.units, in.xdata + k * in.units, in.units * sizeof(T));
        std::memcpy(out.y + r * out.units, out.ydata + k * out.units, out.units * sizeof(T));
      }
    });
    return rows;
  }

  // z_l = act(z_{l-1} W_l^T + b_l), row by row (softmax is finished in output()).
  void forward(uint32_t l, uint64_t rows) {
    const nna_bound_layer<T>& P = L_[l - 1];
    const nna_bound_layer<T>& C = L_[l];
    const uint64_t n = C.units, m = C.fan_in;
    parallelFor(rows, n * m, [&](uint64_t b, uint64_t e) {
      for (uint64_t r = b; r < e; ++r) {
        const T* a = P.z + r * m;
        T* z = C.z + r * n;
        for (uint64_t j = 0; j < n; ++j) z[j] = activate<T>(C.activation, C.b[j] + dot(a, C.w + j * m, m));
      }
    });
  }

  void output(uint64_t rows, uint64_t step) {
    const nna_bound_layer<T>& O = L_.back();
    const bool mse = p_.loss == Loss::Mse, grad = p_.op == Op::Train || p_.op == Op::Grad;
    double loss = 0, correct = 0;
    bool bad = false;
    for (uint64_t r = 0; r < rows; ++r) {
      const RowResult res = outputRow<T>(O.z + r * O.units, O.y + r * O.units, O.d + r * O.units, O.units, O.activation, mse, rows, grad);
      if (p_.op == Op::Forward) continue;  // outputs only (softmax applied); y may be anything
      loss += res.loss;
      correct += res.correct;
      bad |= !std::isfinite(res.loss);
    }
    if (p_.op == Op::Forward) return;
    stats_[NNA_STAT_LOSS] += T(loss);
    stats_[NNA_STAT_CORRECT] += T(correct);
    stats_[NNA_STAT_ROWS] += T(rows);
    if (bad && stats_[NNA_STAT_BAD_STEP] < T(0)) stats_[NNA_STAT_BAD_STEP] = T(step);
  }

  // dW_l = d_l^T z_{l-1}, db_l = column sums of d_l, d_{l-1} = (d_l W_l) * act'(z_{l-1}).
  void backward(uint32_t l, uint64_t rows) {
    const nna_bound_layer<T>& P = L_[l - 1];
    const nna_bound_layer<T>& C = L_[l];
    const uint64_t n = C.units, m = C.fan_in;
    parallelFor(n, rows * m, [&](uint64_t b, uint64_t e) {
      for (uint64_t j = b; j < e; ++j) {
        T* dw = C.dw + j * m;
        std::fill(dw, dw + m, T(0));
        T db = T(0);
        for (uint64_t r = 0; r < rows; ++r) {
          const T g = C.d[r * n + j];
          db += g;
          if (g != T(0)) axpy(dw, g, P.z + r * m, m);
        }
        C.db[j] = db;
      }
    });
    if (l == 1) return;
    parallelFor(rows, n * m, [&](uint64_t b, uint64_t e) {
      for (uint64_t r = b; r < e; ++r) {
        T* dp = P.d + r * m;
        std::fill(dp, dp + m, T(0));
        const T* dr = C.d + r * n;
        for (uint64_t j = 0; j < n; ++j) if (dr[j] != T(0)) axpy(dp, dr[j], C.w + j * m, m);
        const T* zp = P.z + r * m;
        for (uint64_t i = 0; i < m; ++i) dp[i] *= activationGrad<T>(P.activation, zp[i]);
      }
    });
  }

  void update(uint64_t t) {
    const Hyper<T> hp = hyperAt<T>(p_.lr, p_.momentum, p_.beta1, p_.beta2, p_.eps, t);
    const uint32_t opt = h_.optimizer;
    for (uint32_t l = 1; l < h_.num_layers; ++l) {
      const nna_bound_layer<T>& C = L_[l];
      const uint64_t nw = C.units * C.fan_in;
      parallelFor(nw, 8, [&](uint64_t b, uint64_t e) {
        for (uint64_t i = b; i < e; ++i) updateParam<T>(opt, C.w + i, C.dw[i], C.mw ? C.mw + i : nullptr, C.vw ? C.vw + i : nullptr, hp);
      });
      for (uint64_t i = 0; i < C.units; ++i) updateParam<T>(opt, C.b + i, C.db[i], C.mb ? C.mb + i : nullptr, C.vb ? C.vb + i : nullptr, hp);
    }
  }

  RunParams p_;
  nna_header h_;
  std::vector<nna_bound_layer<T>> L_;
  T* stats_ = nullptr;
};

}  // namespace

void runCpu(void* base, const RunParams& p) {
  checkRun(base, p);
  const uint32_t dtype = static_cast<const nna_header*>(base)->dtype;
  if (dtype == NNA_FLOAT64) CpuRun<double>(base, p).run();
  else CpuRun<float>(base, p).run();
}

}  // namespace nna
