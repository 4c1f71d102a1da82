// gemm.cc: the portable micro-kernels (GCC vectors of 16 bytes: SSE2 on x86-64, NEON on arm64)
// and the run-time choice between them and the AVX2 / AVX-512 ones.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "../train/math.h"
#include "gemm_isa.h"
#include "thread_pool.h"

namespace nna {
namespace cpu {
namespace {

template <typename TT, size_t Lanes>
struct PortableK {
  using T = TT;
  typedef T V __attribute__((vector_size(sizeof(T) * Lanes)));
  static constexpr size_t L = Lanes, MR = 4, NV = 2, KC = 256, MC = 128, NC = 2048;
  static constexpr bool kT16 = false;
  static V zero() { return V{}; }
  static V load(const T* p) { V v; std::memcpy(&v, p, sizeof v); return v; }
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

Isa detectedIsa() {
#if defined(NNA_X86_KERNELS)
  static const Isa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) return Isa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
    return Isa::Portable;
  }();
  return isa;
#else
  return Isa::Portable;
#endif
}

Isa activeIsa() {
  static const Isa isa = [] {
    const Isa best = detectedIsa();
    const std::string env = knob(Knob::CpuIsa);
    if (env.empty()) return best;
    Isa want = best;
    if (env == "portable") want = Isa::Portable;
    else if (env == "avx2") want = Isa::Avx2;
    else if (env == "avx512") want = Isa::Avx512;
    else NNA_FAIL("BAD_OPTION", "NN_ARENA_CPU_ISA must be portable, avx2 or avx512, got '" + env + "'");
    return std::min(want, best);
  }();
  return isa;
}

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    default: return "portable";
  }
}

template <typename T>
static void dispatch(const Gemm<T>& g, Isa isa, unsigned threads) {
  isa = std::min(isa, detectedIsa());
#if defined(NNA_X86_KERNELS)
  if (isa == Isa::Avx512) return gemmAvx512(g, threads);
  if (isa == Isa::Avx2) return gemmAvx2(g, threads);
#endif
  gemmPortable(g, threads);
}

void gemm(const Gemm<float>& g, Isa isa, unsigned threads) { dispatch(g, isa, threads); }
void gemm(const Gemm<double>& g, Isa isa, unsigned threads) { dispatch(g, isa, threads); }

}  // namespace cpu
}  // namespace nna
