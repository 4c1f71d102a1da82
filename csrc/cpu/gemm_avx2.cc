// gemm_avx2.cc: AVX2+FMA micro-kernels: 6 rows x 2 ymm (16 floats or 8 doubles) of
// accumulators, 12 of the 16 registers.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "../train/math.h"
#include "gemm_isa.h"
#include "../core/thread_pool.h"

#if defined(NNA_X86_KERNELS)
#include <immintrin.h>
// GCC: a target pragma; clang ignores it and needs the attribute on every function instead.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,bmi2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,bmi2")
#endif

namespace nna {
namespace cpu {
namespace {

struct Avx2F {
  using T = float;
  using V = __m256;
  static constexpr size_t L = 8, MR = 6, NV = 2, KC = 256, MC = 192, NC = 4096;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const T* p) { return _mm256_load_ps(p); }
  static V loadu(const T* p) { return _mm256_loadu_ps(p); }
  static void storeu(T* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(T x) { return _mm256_set1_ps(x); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V sqrt(V a) { return _mm256_sqrt_ps(a); }
  static T fmaS(T a, T b, T c) { return __builtin_fmaf(a, b, c); }
  static constexpr bool kT16 = false;
};
struct Avx2D {
  using T = double;
  using V = __m256d;
  static constexpr size_t L = 4, MR = 6, NV = 2, KC = 256, MC = 192, NC = 2048;
  static V zero() { return _mm256_setzero_pd(); }
  static V load(const T* p) { return _mm256_load_pd(p); }
  static V loadu(const T* p) { return _mm256_loadu_pd(p); }
  static void storeu(T* p, V v) { _mm256_storeu_pd(p, v); }
  static V set1(T x) { return _mm256_set1_pd(x); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_pd(a, b); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static V sub(V a, V b) { return _mm256_sub_pd(a, b); }
  static V div(V a, V b) { return _mm256_div_pd(a, b); }
  static V sqrt(V a) { return _mm256_sqrt_pd(a); }
  static T fmaS(T a, T b, T c) { return __builtin_fma(a, b, c); }
  static constexpr bool kT16 = false;
};

}  // namespace
}  // namespace cpu
}  // namespace nna

#include "gemm_driver.h"

namespace nna {
namespace cpu {
void gemmAvx2(const Gemm<float>& g, unsigned threads) { Driver<Avx2F>::run(g, threads); }
void gemmAvx2(const Gemm<double>& g, unsigned threads) { Driver<Avx2D>::run(g, threads); }
void updateAvx2(const Epilogue<float>& e, const float* g, size_t rows, size_t cols) { Driver<Avx2F>::updateMatrix(e, g, rows, cols); }
void updateAvx2(const Epilogue<double>& e, const double* g, size_t rows, size_t cols) { Driver<Avx2D>::updateMatrix(e, g, rows, cols); }
double squaresAvx2(const float* c, size_t rows, size_t cols) { return Driver<Avx2F>::squaresOf(c, rows, cols); }
double squaresAvx2(const double* c, size_t rows, size_t cols) { return Driver<Avx2D>::squaresOf(c, rows, cols); }
}  // namespace cpu
}  // namespace nna

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
