// act_float.h: GELU and SiLU in float for the CPU GEMM epilogues (gemm_driver.h), branch-free
// so that the epilogue loops vectorise; the other activations and float64 use activations.h.
// Included inside gemm_driver.h's anonymous namespace, so each ISA's file compiles its own copy
// under its target pragma; it needs <algorithm>, <cmath> and <cstring>, as gemm_driver.h does.
//
// erff and expf are library calls the compiler cannot vectorise: they were a large part of a
// GELU step on the CPU. Here Phi(x) and phi(x) come from
// polynomials fitted for this (least squares in relative error on dense grids; the fit and its
// check: scripts/fit-gelu.py): e^r on |r| <= ln2/2 (max 2.5 ulp over [-87, 88]); erf(a) / a on
// |a| < 0.875; erfc(a) e^(a^2) in t = 1 / (1 + a/2) on [0.875, 4]. Phi(x) of a negative x is
// 0.5 erfc(|a|) itself, with no 1 + erf cancellation. SiLU's sigmoid takes the same e^x. Float
// only: float64 keeps libm's erf and exp (PyTorch's float64 fixtures match to 1e-12).
constexpr float kExpP[] = {0.5f, 0.166666672f, 0.041666504f, 0.00833337102f, 0.00139294798f, 0.000198445094f};
constexpr float kErfSmall[] = {1.12837923f, -0.376126379f, 0.112837903f, -0.0268659852f, 0.00522298878f, -0.000851943856f, 0.000115827577f, -1.07832657e-05f};
constexpr float kErfcTail[] = {-0.000159133808f, 0.284985214f, 0.259236068f, 0.349340826f, -0.106713794f, 0.566975415f, -0.473630756f, 0.120024055f};

template <size_t N> inline float horner(const float (&c)[N], float v) {
  float p = c[N - 1];
  for (size_t i = N - 1; i-- > 0;) p = p * v + c[i];  // a constant count: unrolled
  return p;
}

// e^x, x clamped to [-87, 88]: 2^n e^r with n = x / ln2 rounded (the 1.5 * 2^23 trick) and ln2
// split in two (r exact enough).
inline float expF(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693145752f) - n * 1.42860677e-06f;
  const float y = horner(kExpP, r) * (r * r) + (r + 1.0f);
  const int32_t bits = (int32_t(n) + 127) << 23;
  float s;
  std::memcpy(&s, &bits, sizeof s);
  return y * s;
}

// Phi(x) (the standard normal's cdf) and phi(x) (its pdf).
inline void normalF(float x, float& cdf, float& pdf) {
  const float a = x * 0.707106781f, aa = std::fabs(a);
  const float hi = a * a, lo = std::fma(a, a, -hi);                            // a^2 = hi + lo
  const float e = aa < 10.0f ? expF(-hi) * (1.0f - lo) : 0.0f;                 // e^(-a^2)
  const float tail = 0.5f * e * horner(kErfcTail, 1.0f / (1.0f + 0.5f * aa));  // 0.5 erfc(|a|)
  const float small = 0.5f + 0.5f * a * horner(kErfSmall, hi);
  cdf = aa < 0.875f ? small : (a > 0.0f ? 1.0f - tail : tail);
  pdf = e * 0.398942280f;
}

// GELU(x) = x Phi(x) and its derivative Phi(x) + x phi(x).
inline float geluF(float x) {
  float cdf, pdf;
  normalF(x, cdf, pdf);
  return x * cdf;
}
inline float geluGradF(float x) {
  float cdf, pdf;
  normalF(x, cdf, pdf);
  return cdf + x * pdf;
}

// SiLU(x) = x s(x) = x / (1 + e^-x), s = sigmoid, and its derivative s (1 + x (1 - s)).
inline float siluF(float x) { return x / (1.0f + expF(-x)); }
inline float sigmoidF(float x) { return 1.0f / (1.0f + expF(-x)); }
inline float siluGradF(float x) {
  const float s = sigmoidF(x);
  return s * (1.0f + x * (1.0f - s));
}
