// gemm.cc: the portable micro-kernels (GCC vectors of 16 bytes: SSE2 on x86-64, NEON on arm64,
// separate multiply and add) and the run-time choice between them and the AVX2 / AVX-512 ones
// (x86-64) or the NEON FMA ones (AArch64, gemm_neon.cc).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "../train/math.h"
#include "gemm_isa.h"
#include "../core/thread_pool.h"

namespace nna {
namespace cpu {
namespace {

template <typename TT, size_t Lanes> struct PortableK {
  using T = TT;
  typedef T V __attribute__((vector_size(sizeof(T) * Lanes)));
  static constexpr size_t L = Lanes, MR = 4, NV = 2, KC = 256, MC = 128, NC = 2048;
  static constexpr bool kT16 = false;
  static V zero() { return V{}; }
  static V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static V loadu(const T* p) { return load(p); }
  static void storeu(T* p, V v) { std::memcpy(p, &v, sizeof v); }
  static V set1(T x) { return V{} + x; }
  static V fma(V a, V b, V c) { return a * b + c; }
  static V mul(V a, V b) { return a * b; }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V div(V a, V b) { return a / b; }
  static V sqrt(V a) {
    for (size_t i = 0; i < L; ++i) a[i] = nsqrt(a[i]);
    return a;
  }
  static T fmaS(T a, T b, T c) {
    // Same rounding as the vector form: one multiply, then one add.
    volatile T prod = a * b;
    return prod + c;
  }
};

}  // namespace
}  // namespace cpu
}  // namespace nna

#include "gemm_driver.h"
#include <string>

#include "../core/env.h"
#include "../core/failure.h"

namespace nna {
namespace cpu {

void gemmPortable(const Gemm<float>& g, unsigned threads) { Driver<PortableK<float, 4>>::run(g, threads); }
void gemmPortable(const Gemm<double>& g, unsigned threads) { Driver<PortableK<double, 2>>::run(g, threads); }
void updatePortable(const Epilogue<float>& e, const float* g, size_t rows, size_t cols) { Driver<PortableK<float, 4>>::updateMatrix(e, g, rows, cols); }
void updatePortable(const Epilogue<double>& e, const double* g, size_t rows, size_t cols) { Driver<PortableK<double, 2>>::updateMatrix(e, g, rows, cols); }
double squaresPortable(const float* c, size_t rows, size_t cols) { return Driver<PortableK<float, 4>>::squaresOf(c, rows, cols); }
double squaresPortable(const double* c, size_t rows, size_t cols) { return Driver<PortableK<double, 2>>::squaresOf(c, rows, cols); }

Isa detectedIsa() {
#if defined(NNA_X86_KERNELS)
  static const Isa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) return Isa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
    return Isa::Portable;
  }();
  return isa;
#elif defined(NNA_ARM_KERNELS)
  return Isa::Neon;
#else
  return Isa::Portable;
#endif
}

static int level(Isa i) { return i == Isa::Portable ? 0 : i == Isa::Avx512 ? 2 : 1; }

bool isaRuns(Isa isa) {
  const Isa best = detectedIsa();
  if (isa == Isa::Portable) return true;
  if (isa == Isa::Neon) return best == Isa::Neon;
  return best != Isa::Neon && best != Isa::Portable && level(isa) <= level(best);
}

Isa capIsa(Isa want) {
  Isa out = Isa::Portable;
  for (Isa i : {Isa::Avx2, Isa::Neon, Isa::Avx512})
    if (isaRuns(i) && level(i) <= level(want) && level(i) > level(out)) out = i;
  return out;
}

Isa activeIsa() {
  static const Isa isa = [] {
    const Isa best = detectedIsa();
    const std::string env = knob(Knob::CpuIsa);
    if (env.empty()) return best;
    Isa want = best;
    if (env == "portable")
      want = Isa::Portable;
    else if (env == "avx2")
      want = Isa::Avx2;
    else if (env == "avx512")
      want = Isa::Avx512;
    else if (env == "neon")
      want = Isa::Neon;
    else
      NNA_FAIL("BAD_OPTION", "NN_ARENA_CPU_ISA must be portable, avx2, avx512 or neon, got '" + env + "'");
    return capIsa(want);
  }();
  return isa;
}

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    case Isa::Neon: return "neon";
    default: return "portable";
  }
}

template <typename T> static void dispatch(const Gemm<T>& g, Isa isa, unsigned threads) {
  isa = capIsa(isa);
#if defined(NNA_X86_KERNELS)
  if (isa == Isa::Avx512) return gemmAvx512(g, threads);
  if (isa == Isa::Avx2) return gemmAvx2(g, threads);
#endif
#if defined(NNA_ARM_KERNELS)
  if (isa == Isa::Neon) return gemmNeon(g, threads);
#endif
  gemmPortable(g, threads);
}

void gemm(const Gemm<float>& g, Isa isa, unsigned threads) { dispatch(g, isa, threads); }
void gemm(const Gemm<double>& g, Isa isa, unsigned threads) { dispatch(g, isa, threads); }

template <typename T> static void dispatchUpdate(const Epilogue<T>& e, const T* g, size_t rows, size_t cols) {
  const Isa isa = capIsa(activeIsa());  // the ISA gemm(g) runs, so its epilogue's bits
#if defined(NNA_X86_KERNELS)
  if (isa == Isa::Avx512) return updateAvx512(e, g, rows, cols);
  if (isa == Isa::Avx2) return updateAvx2(e, g, rows, cols);
#endif
#if defined(NNA_ARM_KERNELS)
  if (isa == Isa::Neon) return updateNeon(e, g, rows, cols);
#endif
  (void)isa;
  updatePortable(e, g, rows, cols);
}

void update(const Epilogue<float>& e, const float* g, size_t rows, size_t cols) { dispatchUpdate(e, g, rows, cols); }
void update(const Epilogue<double>& e, const double* g, size_t rows, size_t cols) { dispatchUpdate(e, g, rows, cols); }

template <typename T> static double dispatchSquares(const T* c, size_t rows, size_t cols) {
  const Isa isa = capIsa(activeIsa());  // the ISA gemm(g) runs, so its Squares epilogue's bits
#if defined(NNA_X86_KERNELS)
  if (isa == Isa::Avx512) return squaresAvx512(c, rows, cols);
  if (isa == Isa::Avx2) return squaresAvx2(c, rows, cols);
#endif
#if defined(NNA_ARM_KERNELS)
  if (isa == Isa::Neon) return squaresNeon(c, rows, cols);
#endif
  (void)isa;
  return squaresPortable(c, rows, cols);
}

double squares(const float* c, size_t rows, size_t cols) { return dispatchSquares(c, rows, cols); }
double squares(const double* c, size_t rows, size_t cols) { return dispatchSquares(c, rows, cols); }

}  // namespace cpu
}  // namespace nna
