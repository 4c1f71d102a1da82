// optimizers.h: one descriptor per optimizer, and the learning-rate schedules. A descriptor gives
// the optimizer's state regions, its hyperparameters (names, defaults, ranges: the table that
// TypeScript reads through the addon, csrc/addon/descriptors.cc) and its element update: the ONE
// definition that every path runs (the CPU's scalar and SIMD code, the per-layer CUDA kernels,
// the fused CUDA kernel). An element update is written over a number type N: the dtype T itself,
// or the CPU's vector of T (csrc/cpu/gemm_driver.h Lanes), so the vector code needs no copy.
// Adding an optimizer: a struct here, its row in NNA_OPTIMIZERS, its code in nn_arena.h.
#pragma once
#include <math.h>
#include <stdint.h>

#include "../include/nn_arena.h"
#include "schedules.h"

// Element updates are inlined into their callers, whose instruction set they then use (the CPU's
// AVX2 and AVX-512 GEMM drivers instantiate them on vectors).
#if defined(__CUDACC__)
#define NNA_ELEM __host__ __device__ __forceinline__
#else
#define NNA_ELEM inline __attribute__((always_inline))
#endif

namespace nna {

// ---- What an optimizer step reads ------------------------------------------------------------

// The run's optimizer settings (RunParams::opt; also passed by value to the CUDA kernels).
// Flags are 0 / 1 so that every entry of the hyperparameter table is one double.
struct OptimizerParams {
  double momentum = 0.9, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weightDecay = 0, nesterov = 0, decayBiases = 0;
  double clipGradNorm = 0;  // 0: no clipping
  Schedule schedule;
};

// The values of one step as the element updates read them, in the dtype T. Derived values are
// computed in double once, so every path rounds them alike; lr, decay and stepSize depend on the
// (scheduled) learning rate: withLr gives a K-model arena's model m its own.
template <typename T> struct Hyper {
  T lr, mu, b2, eps;
  T nb1, nb2;           // 1 - beta, rounded from double (as PyTorch's Python floats)
  T sqrtBc2, stepSize;  // sqrt(1 - beta2^t); lr / (1 - beta1^t): Adam's bias corrections
  T wd, decay;          // this parameter's weight decay; 1 - lr * wd (AdamW)
  T gs;                 // gradient scale (clipping by global norm; 1 otherwise)
  bool nesterov;
  // Kept to re-derive per model and for the biases (not read by the element updates): the
  // step's learning rate, this parameter's decay, the biases' decay, 1 - beta1^t, t.
  double lrd, wdd, wdB, bc1d;
  uint64_t step;
  Schedule sched;
};

// h with base learning rate baseLr (model m of a K-model arena: RunParams::lrs[m]), scheduled.
template <typename T> NNA_FN Hyper<T> withLr(Hyper<T> h, double baseLr) {
  h.lrd = lrAt(h.sched, baseLr, h.step - 1);
  h.lr = T(h.lrd);
  h.stepSize = T(h.lrd / h.bc1d);
  h.decay = T(1.0 - h.lrd * h.wdd);
  return h;
}

// The hyperparameters of optimizer step t (1-based) with base learning rate lr: the one
// definition every path uses (CPU, per-layer CUDA on the host, the fused kernel on the device).
template <typename T> NNA_FN Hyper<T> hyperAt(const OptimizerParams& o, double lr, uint64_t t) {
  Hyper<T> h;
  h.mu = T(o.momentum);
  h.b2 = T(o.beta2);
  h.eps = T(o.eps);
  h.nb1 = T(1.0 - o.beta1);
  h.nb2 = T(1.0 - o.beta2);
  h.bc1d = 1.0 - pow(o.beta1, double(t));
  const double bc2 = 1.0 - pow(o.beta2, double(t));
  h.sqrtBc2 = T(sqrt(bc2));
  h.wdd = o.weightDecay;
  h.wdB = o.decayBiases != 0 ? o.weightDecay : 0.0;
  h.wd = T(h.wdd);
  h.gs = T(1);
  h.nesterov = o.nesterov != 0;
  h.step = t;
  h.sched = o.schedule;
  return withLr(h, lr);
}

// torch.nn.utils.clip_grad_norm_'s factor for a global norm: min(1, max / (norm + 1e-6)).
NNA_FN double clipScale(double maxNorm, double norm) {
  const double c = maxNorm / (norm + 1e-6);
  return c < 1.0 ? c : 1.0;
}

// The same step for a bias: decayed only with decayBiases.
template <typename T> NNA_FN Hyper<T> forBiases(Hyper<T> h) {
  h.wdd = h.wdB;
  h.wd = T(h.wdB);
  h.decay = T(1.0 - h.lrd * h.wdB);
  return h;
}

// ---- The descriptors -------------------------------------------------------------------------

// One hyperparameter: a field of OptimizerParams (null: the run's lr), its default and range.
using HyperSpec = ParamSpec<OptimizerParams>;

#define NNA_HYPER_LR(def) \
  { "lr", nullptr, def, 0, INFINITY, true, true, kReal, "learning rate (the maximum of a one-cycle schedule)" }
#define NNA_HYPER_WD(def, doc) \
  { "weightDecay", &OptimizerParams::weightDecay, def, 0, INFINITY, false, true, kReal, doc }
#define NNA_HYPER_DECAY_BIASES \
  { "decayBiases", &OptimizerParams::decayBiases, 0, 0, 1, false, false, kFlag, "apply weight decay to the biases too" }
#define NNA_HYPER_BETAS                                                                                      \
  {"beta1", &OptimizerParams::beta1, 0.9, 0, 1, false, true, kReal, "decay of the first moment"},            \
      {"beta2", &OptimizerParams::beta2, 0.999, 0, 1, false, true, kReal, "decay of the second moment"}, {   \
    "eps", &OptimizerParams::eps, 1e-8, 0, INFINITY, true, true, kReal, "added to sqrt of the second moment" \
  }

// The gradient after clipping and L2 weight decay (PyTorch: clip_grad_norm_ scales the
// gradients in place; SGD and Adam's weight_decay adds wd * w to them).
template <typename N, typename T> NNA_ELEM N gradOf(const N& w, N g, const Hyper<T>& h) { return g * N(h.gs) + N(h.wd) * w; }

// torch.optim.SGD(lr, weight_decay).
struct Sgd {
  static constexpr uint32_t code = NNA_SGD;
  static constexpr const char* name = "sgd";
  static constexpr const char* doc = "SGD: w -= lr * (g + weightDecay * w)";
  static constexpr uint32_t states = 0;  // no state regions
  static constexpr HyperSpec hypers[] = {NNA_HYPER_LR(0.05), NNA_HYPER_WD(0, "L2 penalty added to the gradient"), NNA_HYPER_DECAY_BIASES};
  template <typename N, typename T> NNA_ELEM static void step(N& w, N g, N& m, N& v, const Hyper<T>& h) { w = w - N(h.lr) * gradOf(w, g, h); }
};

// torch.optim.SGD(lr, momentum, weight_decay, nesterov; dampening 0): buf = mu * buf + g.
struct Momentum {
  static constexpr uint32_t code = NNA_MOMENTUM;
  static constexpr const char* name = "momentum";
  static constexpr const char* doc = "SGD with momentum: v = momentum * v + g; w -= lr * v (nesterov: lr * (g + momentum * v))";
  static constexpr uint32_t states = (1u << NNA_MW) | (1u << NNA_MB);
  static constexpr HyperSpec hypers[] = {NNA_HYPER_LR(0.05),
                                         {"momentum", &OptimizerParams::momentum, 0.9, 0, 1, false, true, kReal, "velocity decay"},
                                         {"nesterov", &OptimizerParams::nesterov, 0, 0, 1, false, false, kFlag, "Nesterov momentum (PyTorch's formula)"},
                                         NNA_HYPER_WD(0, "L2 penalty added to the gradient"),
                                         NNA_HYPER_DECAY_BIASES};
  template <typename N, typename T> NNA_ELEM static void step(N& w, N g, N& m, N& v, const Hyper<T>& h) {
    const N d = gradOf(w, g, h);
    m = N(h.mu) * m + d;
    w = w - N(h.lr) * (h.nesterov ? d + N(h.mu) * m : m);
  }
};

// Adam's moments and step from gradient g, in torch.optim.Adam / AdamW's operations and order:
// m = lerp(m, g, 1 - b1); v = v * b2 + (1 - b2) * g * g; w += -(lr / bc1) * (m / (sqrt(v) /
// sqrt(bc2) + eps)), the factors rounded from double as PyTorch's Python floats are.
template <typename N, typename T> NNA_ELEM void adamStep(N& w, N g, N& m, N& v, const Hyper<T>& h) {
  m = m + N(h.nb1) * (g - m);
  v = v * N(h.b2) + N(h.nb2) * g * g;
  w = w + N(-h.stepSize) * (m / (nsqrt(v) / N(h.sqrtBc2) + N(h.eps)));
}

// torch.optim.Adam (weight_decay: L2 added to the gradient).
struct Adam {
  static constexpr uint32_t code = NNA_ADAM;
  static constexpr const char* name = "adam";
  static constexpr const char* doc = "Adam (L2 weightDecay added to the gradient, as torch.optim.Adam's weight_decay)";
  static constexpr uint32_t states = (1u << NNA_MW) | (1u << NNA_MB) | (1u << NNA_VW) | (1u << NNA_VB);
  static constexpr HyperSpec hypers[] = {NNA_HYPER_LR(0.001), NNA_HYPER_BETAS, NNA_HYPER_WD(0, "L2 penalty added to the gradient"), NNA_HYPER_DECAY_BIASES};
  template <typename N, typename T> NNA_ELEM static void step(N& w, N g, N& m, N& v, const Hyper<T>& h) { adamStep(w, gradOf(w, g, h), m, v, h); }
};

// torch.optim.AdamW, in its operations' order: w *= 1 - lr * wd, then Adam's step.
struct AdamW {
  static constexpr uint32_t code = NNA_ADAMW;
  static constexpr const char* name = "adamw";
  static constexpr const char* doc = "AdamW: decoupled weight decay (torch.optim.AdamW)";
  static constexpr uint32_t states = Adam::states;
  static constexpr HyperSpec hypers[] = {NNA_HYPER_LR(0.001), NNA_HYPER_BETAS, NNA_HYPER_WD(0.01, "decoupled decay: w *= 1 - lr * weightDecay"), NNA_HYPER_DECAY_BIASES};
  template <typename N, typename T> NNA_ELEM static void step(N& w, N g, N& m, N& v, const Hyper<T>& h) {
    w = w * N(h.decay);
    adamStep(w, g * N(h.gs), m, v, h);
  }
};

// Every optimizer, in code order: the one list (the table, the dispatch).
#define NNA_OPTIMIZERS(X) X(Sgd) X(Momentum) X(Adam) X(AdamW)

// Calls f(Descriptor{}) for an optimizer code (f's result; unknown codes: the SGD one, which
// validation makes unreachable).
template <typename F> NNA_FN auto withOptimizer(uint32_t code, F&& f) {
  switch (code) {
// A one-line case macro, left as written: the formatter would join it with what follows.
// clang-format off
#define NNA_CASE(D) case D::code: return f(D{});
    // clang-format on
    NNA_OPTIMIZERS(NNA_CASE)
#undef NNA_CASE
    default: return f(Sgd{});
  }
}

// One parameter's update on values in registers (kernels that load several parameters before
// updating any): w, m and v in place from the gradient g.
template <typename T> NNA_FN void stepParam(uint32_t optimizer, T& w, T g, T& m, T& v, const Hyper<T>& h) {
  withOptimizer(optimizer, [&](auto d) { decltype(d)::step(w, g, m, v, h); });
}

// One parameter's update from its gradient g; m and v are its optimizer state (null where the
// optimizer has none).
template <typename T> NNA_FN void updateParam(uint32_t optimizer, T* w, T g, T* m, T* v, const Hyper<T>& h) {
  T w0 = *w, m0 = m ? *m : T(0), v0 = v ? *v : T(0);
  stepParam(optimizer, w0, g, m0, v0, h);
  *w = w0;
  if (m) *m = m0;
  if (v) *v = v0;
}

// Weight e of layer C (its index in w) from its gradient g, with its optimizer state where it has one.
template <typename T> NNA_FN void updateWeight(uint32_t optimizer, const nna_bound_layer<T>& C, uint64_t e, T g, const Hyper<T>& h) {
  updateParam<T>(optimizer, C.w + e, g, C.mw ? C.mw + e : nullptr, C.vw ? C.vw + e : nullptr, h);
}

// Bias i of layer C from its gradient g, with its optimizer state where it has one (h: the
// step's hyperparameters for biases, forBiases).
template <typename T> NNA_FN void updateBias(uint32_t optimizer, const nna_bound_layer<T>& C, uint64_t i, T g, const Hyper<T>& h) {
  updateParam<T>(optimizer, C.b + i, g, C.mb ? C.mb + i : nullptr, C.vb ? C.vb + i : nullptr, h);
}

// ---- The table (host only: the addon, validation, phases) ------------------------------------

struct OptimizerInfo {
  uint32_t code;
  const char* name;
  const char* doc;
  uint32_t states;  // bit k: the optimizer keeps region kind k (NNA_MW..NNA_VB) per layer
  const HyperSpec* hypers;
  uint32_t numHypers;
};

// The optimizer of a code, or null.
inline const OptimizerInfo* optimizerInfo(uint32_t code) {
  static const OptimizerInfo table[] = {
#define NNA_ROW(D) {D::code, D::name, D::doc, D::states, D::hypers, uint32_t(sizeof D::hypers / sizeof D::hypers[0])},
      NNA_OPTIMIZERS(NNA_ROW)
#undef NNA_ROW
  };
  for (const OptimizerInfo& o : table)
    if (o.code == code) return &o;
  return nullptr;
}

// Whether optimizer `code` keeps state of region kind `kind`.
inline bool optimizerKeeps(uint32_t code, uint32_t kind) {
  const OptimizerInfo* o = optimizerInfo(code);
  return o && (o->states >> kind & 1u);
}

// An optimizer without state folds its step into the weight-gradient product (the CUDA paths;
// a compact plan of it has no dw regions). Host and device.
NNA_FN bool optimizerFolds(uint32_t code) {
  return withOptimizer(code, [](auto d) { return decltype(d)::states == 0u; });
}

// Run settings every optimizer reads, beside its hyperparameters.
inline const HyperSpec* commonParams(uint32_t* count) {
  static const HyperSpec table[] = {{"clipGradNorm", &OptimizerParams::clipGradNorm, 0, 0, INFINITY, false, true, kReal,
                                     "clip the gradients to this global norm before each step (torch.nn.utils.clip_grad_norm_); 0: off"}};
  *count = uint32_t(sizeof table / sizeof table[0]);
  return table;
}

// The parameter called `name` of any optimizer, or a common one; null if none has it.
inline const HyperSpec* hyperNamed(const char* name) {
  auto same = [](const char* a, const char* b) {
    while (*a && *a == *b) ++a, ++b;
    return *a == *b;
  };
  for (uint32_t code = 0; const OptimizerInfo* o = optimizerInfo(code); ++code)
    for (uint32_t i = 0; i < o->numHypers; ++i)
      if (same(o->hypers[i].name, name)) return &o->hypers[i];
  uint32_t n = 0;
  const HyperSpec* c = commonParams(&n);
  for (uint32_t i = 0; i < n; ++i)
    if (same(c[i].name, name)) return &c[i];
  return nullptr;
}

}  // namespace nna
