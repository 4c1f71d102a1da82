// gemm_neon.cc: AArch64 Advanced SIMD (NEON) micro-kernels: 8 rows x 3 q-registers (12 floats
// or 6 doubles) of accumulators, 24 of the 32 vector registers, with fused multiply-add
// (vfmaq), over the same packing and epilogues as the AVX2 / AVX-512 kernels (gemm_driver.h).
// NEON is part of every AArch64 CPU; NN_ARENA_CPU_ISA=portable still picks the GCC-vector
// kernels (separate multiply and add) at run time.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "../train/math.h"
#include "gemm_isa.h"
#include "../core/thread_pool.h"

#if defined(NNA_ARM_KERNELS)
#include <arm_neon.h>

namespace nna {
namespace cpu {
namespace {

struct NeonF {
  using T = float;
  using V = float32x4_t;
  static constexpr size_t L = 4, MR = 8, NV = 3, KC = 256, MC = 128, NC = 3072;
  static V zero() { return vdupq_n_f32(0.0f); }
  static V load(const T* p) { return vld1q_f32(p); }
  static V loadu(const T* p) { return vld1q_f32(p); }
  static void storeu(T* p, V v) { vst1q_f32(p, v); }
  static V set1(T x) { return vdupq_n_f32(x); }
  static V fma(V a, V b, V c) { return vfmaq_f32(c, a, b); }
  static V mul(V a, V b) { return vmulq_f32(a, b); }
  static V add(V a, V b) { return vaddq_f32(a, b); }
  static V sub(V a, V b) { return vsubq_f32(a, b); }
  static V div(V a, V b) { return vdivq_f32(a, b); }
  static V sqrt(V a) { return vsqrtq_f32(a); }
  static T fmaS(T a, T b, T c) { return __builtin_fmaf(a, b, c); }
  static constexpr bool kT16 = false;
};
struct NeonD {
  using T = double;
  using V = float64x2_t;
  static constexpr size_t L = 2, MR = 8, NV = 3, KC = 256, MC = 128, NC = 2048;
  static V zero() { return vdupq_n_f64(0.0); }
  static V load(const T* p) { return vld1q_f64(p); }
  static V loadu(const T* p) { return vld1q_f64(p); }
  static void storeu(T* p, V v) { vst1q_f64(p, v); }
  static V set1(T x) { return vdupq_n_f64(x); }
  static V fma(V a, V b, V c) { return vfmaq_f64(c, a, b); }
  static V mul(V a, V b) { return vmulq_f64(a, b); }
  static V add(V a, V b) { return vaddq_f64(a, b); }
  static V sub(V a, V b) { return vsubq_f64(a, b); }
  static V div(V a, V b) { return vdivq_f64(a, b); }
  static V sqrt(V a) { return vsqrtq_f64(a); }
  static T fmaS(T a, T b, T c) { return __builtin_fma(a, b, c); }
  static constexpr bool kT16 = false;
};

}  // namespace
}  // namespace cpu
}  // namespace nna

#include "gemm_driver.h"

namespace nna {
namespace cpu {
void gemmNeon(const Gemm<float>& g, unsigned threads) { Driver<NeonF>::run(g, threads); }
void gemmNeon(const Gemm<double>& g, unsigned threads) { Driver<NeonD>::run(g, threads); }
void updateNeon(const Epilogue<float>& e, const float* g, size_t rows, size_t cols) { Driver<NeonF>::updateMatrix(e, g, rows, cols); }
void updateNeon(const Epilogue<double>& e, const double* g, size_t rows, size_t cols) { Driver<NeonD>::updateMatrix(e, g, rows, cols); }
double squaresNeon(const float* c, size_t rows, size_t cols) { return Driver<NeonF>::squaresOf(c, rows, cols); }
double squaresNeon(const double* c, size_t rows, size_t cols) { return Driver<NeonD>::squaresOf(c, rows, cols); }
}  // namespace cpu
}  // namespace nna

#endif
