// gemm_avx512.cc: AVX-512 micro-kernels: 12 rows x 2 zmm (32 floats or 16 doubles) of
// accumulators, 24 of the 32 registers.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "../train/math.h"
#include "gemm_isa.h"
#include "thread_pool.h"

#if defined(NNA_X86_KERNELS)
#include <immintrin.h>
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx2,fma,bmi2")

namespace nna {
namespace cpu {
namespace {

struct Avx512F {
  using T = float;
  using V = __m512;
  static constexpr size_t L = 16, MR = 12, NV = 2, KC = 256, MC = 384, NC = 4096;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const T* p) { return _mm512_load_ps(p); }
  static V loadu(const T* p) { return _mm512_loadu_ps(p); }
  static void storeu(T* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(T x) { return _mm512_set1_ps(x); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V sqrt(V a) { return _mm512_sqrt_ps(a); }
  static T fmaS(T a, T b, T c) { return __builtin_fmaf(a, b, c); }
};
struct Avx512D {
  using T = double;
  using V = __m512d;
  static constexpr size_t L = 8, MR = 12, NV = 2, KC = 256, MC = 192, NC = 2048;
  static V zero() { return _mm512_setzero_pd(); }
  static V load(const T* p) { return _mm512_load_pd(p); }
  static V loadu(const T* p) { return _mm512_loadu_pd(p); }
  static void storeu(T* p, V v) { _mm512_storeu_pd(p, v); }
  static V set1(T x) { return _mm512_set1_pd(x); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_pd(a, b); }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
  static V sub(V a, V b) { return _mm512_sub_pd(a, b); }
  static V div(V a, V b) { return _mm512_div_pd(a, b); }
  static V sqrt(V a) { return _mm512_sqrt_pd(a); }
  static T fmaS(T a, T b, T c) { return __builtin_fma(a, b, c); }
};

}  // namespace
}  // namespace cpu
}  // namespace nna

#include "gemm_driver.h"

namespace nna {
namespace cpu {
void gemmAvx512(const Gemm<float>& g, unsigned threads) { Driver<Avx512F>::run(g, threads); }
void gemmAvx512(const Gemm<double>& g, unsigned threads) { Driver<Avx512D>::run(g, threads); }
}  // namespace cpu
}  // namespace nna

#pragma GCC pop_options
#endif
