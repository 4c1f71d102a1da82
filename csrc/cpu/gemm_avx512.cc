// gemm_avx512.cc: AVX-512 micro-kernels: 12 rows x 2 zmm (32 floats or 16 doubles) of
// accumulators, 24 of the 32 registers.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "../train/math.h"
#include "gemm_isa.h"
#include "../core/thread_pool.h"

#if defined(NNA_X86_KERNELS)
// GCC 12's avx512fintrin.h builds its "undefined" vectors as `__m512 __Y = __Y;`, which its own
// -Wuninitialized reports (34 warnings per build) wherever the intrinsics inline: not ours.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
// GCC: a target pragma; clang ignores it and needs the attribute on every function instead.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma,bmi2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx2,fma,bmi2")
#endif

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

  // dst[q * ds + i] = src[i * ss + q] for i < rows (<= 16), q < 16: a 16 x 16 transpose in
  // registers (unpack ps, unpack pd, two 128-bit lane shuffles) for the transposing packs.
  static constexpr bool kT16 = true;
  static void transpose16(const T* src, size_t ss, size_t rows, T* dst, size_t ds) {
    __m512 r[16], t[16];
    for (size_t i = 0; i < 16; ++i) r[i] = i < rows ? _mm512_loadu_ps(src + i * ss) : _mm512_setzero_ps();
    for (size_t i = 0; i < 16; i += 2) {
      t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    // r[4g + m], lane k: column 4k + m of rows 4g .. 4g + 3.
    for (size_t g = 0; g < 16; g += 4) {
      const __m512d a = _mm512_castps_pd(t[g]), b = _mm512_castps_pd(t[g + 1]), c = _mm512_castps_pd(t[g + 2]), d = _mm512_castps_pd(t[g + 3]);
      r[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
      r[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
      r[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
      r[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    const __mmask16 mask = rows >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << rows) - 1);
    for (size_t m = 0; m < 4; ++m) {
      const __m512 ta = _mm512_shuffle_f32x4(r[m], r[4 + m], 0x88), tb = _mm512_shuffle_f32x4(r[m], r[4 + m], 0xDD);
      const __m512 ua = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0x88), ub = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0xDD);
      _mm512_mask_storeu_ps(dst + m * ds, mask, _mm512_shuffle_f32x4(ta, ua, 0x88));
      _mm512_mask_storeu_ps(dst + (8 + m) * ds, mask, _mm512_shuffle_f32x4(ta, ua, 0xDD));
      _mm512_mask_storeu_ps(dst + (4 + m) * ds, mask, _mm512_shuffle_f32x4(tb, ub, 0x88));
      _mm512_mask_storeu_ps(dst + (12 + m) * ds, mask, _mm512_shuffle_f32x4(tb, ub, 0xDD));
    }
  }
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
  static constexpr bool kT16 = false;
};

}  // namespace
}  // namespace cpu
}  // namespace nna

#include "gemm_driver.h"

namespace nna {
namespace cpu {
void gemmAvx512(const Gemm<float>& g, unsigned threads) { Driver<Avx512F>::run(g, threads); }
void gemmAvx512(const Gemm<double>& g, unsigned threads) { Driver<Avx512D>::run(g, threads); }
void updateAvx512(const Epilogue<float>& e, const float* g, size_t rows, size_t cols) { Driver<Avx512F>::updateMatrix(e, g, rows, cols); }
void updateAvx512(const Epilogue<double>& e, const double* g, size_t rows, size_t cols) { Driver<Avx512D>::updateMatrix(e, g, rows, cols); }
double squaresAvx512(const float* c, size_t rows, size_t cols) { return Driver<Avx512F>::squaresOf(c, rows, cols); }
double squaresAvx512(const double* c, size_t rows, size_t cols) { return Driver<Avx512D>::squaresOf(c, rows, cols); }
}  // namespace cpu
}  // namespace nna

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
