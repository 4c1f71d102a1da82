// activations.h: f and f' of every activation, one definition each, compiled for the host (CPU
// backend, its SIMD GEMM epilogue) and the device (per-layer, tf32 and fused CUDA kernels). The
// table of activations (names, codes, which keep their pre-activation) is NNA_ACTIVATIONS in
// nn_arena.h; each row has one Act<code> here. Formulas are PyTorch's (aten's CPU kernels), so
// float64 results match torch.nn.functional to rounding.
#pragma once
#include <math.h>
#include <stdint.h>

#include "../include/nn_arena.h"

#include "../descriptors/host_device.h"

namespace nna {

NNA_FN float nexp(float x) { return expf(x); }
NNA_FN double nexp(double x) { return exp(x); }
NNA_FN float nlog(float x) { return logf(x); }
NNA_FN double nlog(double x) { return log(x); }
NNA_FN float nlog1p(float x) { return log1pf(x); }
NNA_FN double nlog1p(double x) { return log1p(x); }
NNA_FN float ntanh(float x) { return tanhf(x); }
NNA_FN double ntanh(double x) { return tanh(x); }
NNA_FN float nerf(float x) { return erff(x); }
NNA_FN double nerf(double x) { return erf(x); }

// Act<code>::f(x, p) and Act<code>::df(v, p): v is the pre-activation x where the table's
// keeps_pre is 1, else the output f(x). p is the header's act_param (leaky-relu's slope).
template <uint32_t A> struct Act;

template <> struct Act<NNA_ACT_IDENTITY> {
  template <typename T> static NNA_FN T f(T x, T) { return x; }
  template <typename T> static NNA_FN T df(T, T) { return T(1); }
};
template <> struct Act<NNA_ACT_RELU> {
  template <typename T> static NNA_FN T f(T x, T) { return x > T(0) ? x : T(0); }
  template <typename T> static NNA_FN T df(T z, T) { return z > T(0) ? T(1) : T(0); }
};
template <> struct Act<NNA_ACT_SIGMOID> {
  template <typename T> static NNA_FN T f(T x, T) { return T(1) / (T(1) + nexp(-x)); }
  template <typename T> static NNA_FN T df(T z, T) { return z * (T(1) - z); }
};
template <> struct Act<NNA_ACT_TANH> {
  template <typename T> static NNA_FN T f(T x, T) { return ntanh(x); }
  template <typename T> static NNA_FN T df(T z, T) { return T(1) - z * z; }
};
// Softmax is applied per row by the output code; here it passes through.
template <> struct Act<NNA_ACT_SOFTMAX> : Act<NNA_ACT_IDENTITY> {};
template <> struct Act<NNA_ACT_INPUT> : Act<NNA_ACT_IDENTITY> {};

// F.gelu: x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)); f' = Phi(x) + x phi(x).
template <> struct Act<NNA_ACT_GELU> {
  template <typename T> static NNA_FN T f(T x, T) { return x * T(0.5) * (T(1) + nerf(x * T(0.70710678118654752440))); }
  template <typename T> static NNA_FN T df(T x, T) {
    const T cdf = T(0.5) * (T(1) + nerf(x * T(0.70710678118654752440)));
    const T pdf = nexp(T(-0.5) * x * x) * T(0.39894228040143267794);  // 1 / sqrt(2 pi)
    return cdf + x * pdf;
  }
};
// F.gelu(approximate='tanh'): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <> struct Act<NNA_ACT_GELU_TANH> {
  static constexpr double kBeta = 0.79788456080286535588, kKappa = 0.044715;
  template <typename T> static NNA_FN T f(T x, T) {
    const T inner = T(kBeta) * (x + T(kKappa) * (x * x * x));
    return T(0.5) * x * (T(1) + ntanh(inner));
  }
  template <typename T> static NNA_FN T df(T x, T) {
    const T x2 = x * x;
    const T t = ntanh(T(kBeta) * (x + T(kKappa) * (x2 * x)));
    const T left = T(0.5) * x, right = T(1) + t;
    return T(0.5) * right + left * (T(1) - t * t) * (T(kBeta) * (T(1) + T(3) * T(kKappa) * x2));
  }
};
// F.silu: x sigmoid(x); f' = s (1 + x (1 - s)).
template <> struct Act<NNA_ACT_SILU> {
  template <typename T> static NNA_FN T f(T x, T) { return x / (T(1) + nexp(-x)); }
  template <typename T> static NNA_FN T df(T x, T) {
    const T s = T(1) / (T(1) + nexp(-x));
    return s * (T(1) + x * (T(1) - s));
  }
};
// F.leaky_relu(negative_slope=p), p >= 0 (the header's act_param): z > 0 exactly where x > 0,
// so f' comes from the output.
template <> struct Act<NNA_ACT_LEAKY_RELU> {
  template <typename T> static NNA_FN T f(T x, T p) { return x > T(0) ? x : x * p; }
  template <typename T> static NNA_FN T df(T z, T p) { return z > T(0) ? T(1) : p; }
};
// F.softplus (beta 1, threshold 20): log1p(exp(x)), x itself above 20; f' = sigmoid(x), 1 above 20.
template <> struct Act<NNA_ACT_SOFTPLUS> {
  template <typename T> static NNA_FN T f(T x, T) { return x > T(20) ? x : nlog1p(nexp(x)); }
  template <typename T> static NNA_FN T df(T x, T) {
    if (x > T(20)) return T(1);
    const T e = nexp(x);
    return e / (e + T(1));
  }
};

// One-line case macros, left as written: the formatter would join them.
// clang-format off
#define NNA_ACT_F_(e, code, name, pre, on, init, param, torch) case code: return Act<code>::f<T>(x, p);
#define NNA_ACT_DF_(e, code, name, pre, on, init, param, torch) case code: return Act<code>::df<T>(v, p);
// clang-format on

// f(x) of activation `act` (softmax: x; the output code applies it per row).
template <typename T> NNA_FN T activate(uint32_t act, T x, T p = T(0)) {
  switch (act) { NNA_ACTIVATIONS(NNA_ACT_F_) default : return x; }
}

// f' from v: the pre-activation where nna_act_keeps_pre(act), else the output.
template <typename T> NNA_FN T activationGrad(uint32_t act, T v, T p = T(0)) {
  switch (act) { NNA_ACTIVATIONS(NNA_ACT_DF_) default : return T(1); }
}

// A layer's forward at element e: z[e] = f(x), and x kept where f' needs it. Returns f(x).
template <typename T> NNA_FN T activateAt(const nna_bound_layer<T>& C, uint64_t e, T x) {
  const T v = activate<T>(C.activation, x, T(C.act_param));
  C.z[e] = v;
  if (C.pre) C.pre[e] = x;
  return v;
}

// What a layer's f' is a function of: its pre-activations where it keeps them, else its outputs.
template <typename T> NNA_FN const T* activationGradInput(const nna_bound_layer<T>& P) { return P.pre ? P.pre : P.z; }

// f' of a layer at element e, from what the layer keeps (pre-activation or output).
template <typename T> NNA_FN T activationGradAt(const nna_bound_layer<T>& P, uint64_t e) { return activationGrad<T>(P.activation, activationGradInput(P)[e], T(P.act_param)); }

}  // namespace nna
