// gemm_check.cc: the CPU GEMM (csrc/cpu/gemm.h) against a naive long-double reference, for every
// ISA this CPU runs, float and double, every transpose, alpha/beta, odd shapes and each epilogue;
// then bit-identity across repeats and thread counts. Built and run by test/cpu-gemm.test.ts.
// Prints one line per case and "ok N" or "FAIL ..." lines; exit status 1 on any failure.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/gemm.h"
#include "include/nn_arena.h"
#include "train/math.h"

using namespace nna;
using namespace nna::cpu;

static int failures = 0, passed = 0;

template <typename T>
static std::vector<T> randomVec(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<T> v(n);
  for (auto& x : v) x = T(u(rng));
  return v;
}

// Reference: long-double sums of the same product, then alpha/beta and the epilogue.
template <typename T>
static std::vector<T> reference(const Gemm<T>& g, const std::vector<T>& c0, std::vector<T>* w, std::vector<T>* m, std::vector<T>* v) {
  std::vector<T> c(c0);
  for (size_t i = 0; i < g.m; ++i)
    for (size_t j = 0; j < g.n; ++j) {
      long double s = 0;
      for (size_t p = 0; p < g.k; ++p) {
        const T a = g.transA ? g.a[p * g.lda + i] : g.a[i * g.lda + p];
        const T b = g.transB ? g.b[j * g.ldb + p] : g.b[p * g.ldb + j];
        s += (long double)a * b;
      }
      T& out = c[i * g.ldc + j];
      T r = T((long double)g.alpha * s + (g.beta == T(0) ? 0.0L : (long double)g.beta * out));
      const Epilogue<T>& e = g.ep;
      if (e.kind == Epi::BiasAct) r = activate<T>(e.act, r + e.bias[j]);
      if (e.kind == Epi::ActGrad) r *= activationGrad<T>(e.act, e.z[i * e.ldz + j]);
      if (e.kind == Epi::Update) {
        const size_t o = i * g.ldc + j;
        updateParam<T>(e.optimizer, &(*w)[o], r, m ? &(*m)[o] : nullptr, v ? &(*v)[o] : nullptr, e.h);
      }
      out = r;
    }
  return c;
}

template <typename T>
static double maxRelErr(const std::vector<T>& got, const std::vector<T>& want, double scale) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(double(got[i]))) return INFINITY;
    worst = std::max(worst, std::fabs(double(got[i]) - double(want[i])) / scale);
  }
  return worst;
}

template <typename T>
static void check(Isa isa, bool ta, bool tb, size_t m, size_t n, size_t k, T alpha, T beta, Epi epi, uint32_t act, std::mt19937_64& rng) {
  Gemm<T> g;
  g.transA = ta; g.transB = tb; g.m = m; g.n = n; g.k = k; g.alpha = alpha; g.beta = beta;
  // Leading dimensions a little over the minimum, so strides are exercised too.
  g.lda = (ta ? m : k) + 3; g.ldb = (tb ? k : n) + 1; g.ldc = n + 2;
  auto A = randomVec<T>((ta ? k : m) * g.lda, rng), B = randomVec<T>((tb ? n : k) * g.ldb, rng);
  auto C = randomVec<T>(m * g.ldc, rng), bias = randomVec<T>(n, rng), Z = randomVec<T>(m * n, rng);
  for (auto& z : Z) z = act == NNA_ACT_SIGMOID ? T(0.5) + z / T(4) : z;
  g.a = A.data(); g.b = B.data();
  g.ep.kind = epi; g.ep.act = act; g.ep.bias = bias.data(); g.ep.z = Z.data(); g.ep.ldz = n;
  auto W = randomVec<T>(m * g.ldc, rng), M1 = randomVec<T>(m * g.ldc, rng), V1 = randomVec<T>(m * g.ldc, rng);
  for (auto& x : V1) x = x * x;
  g.ep.optimizer = epi == Epi::Update ? act : 0; g.ep.h = hyperAt<T>(OptimizerParams{}, 0.01, 1);
  auto Wr = W, Mr = M1, Vr = V1;
  const auto want = reference(g, C, &Wr, &Mr, act == NNA_ADAM ? &Vr : nullptr);
  g.ep.w = W.data(); g.ep.m = M1.data(); g.ep.v = act == NNA_ADAM ? V1.data() : nullptr;
  std::vector<T> got(C);
  g.c = got.data();
  gemm(g, isa);
  // Bound: a few ulps of the sum of |terms| (<= k for entries in [-1, 1]) per product.
  const double eps = sizeof(T) == 4 ? 1.2e-7 : 2.3e-16;
  const double scale = std::max<double>(1.0, double(k) * std::fabs(double(alpha)) + std::fabs(double(beta)));
  double err = maxRelErr(got, want, scale);
  if (epi == Epi::Update) {
    err = std::max({err, maxRelErr(W, Wr, 1.0), maxRelErr(M1, Mr, 1.0)});
    if (act == NNA_ADAM) err = std::max(err, maxRelErr(V1, Vr, 1.0));
  }
  const bool ok = err <= 8 * eps * std::sqrt(double(std::max<size_t>(k, 1)));
  char what[200];
  std::snprintf(what, sizeof what, "%s %s ta=%d tb=%d m=%zu n=%zu k=%zu alpha=%g beta=%g epi=%u act=%u", isaName(isa),
                sizeof(T) == 4 ? "f32" : "f64", ta, tb, m, n, k, double(alpha), double(beta), unsigned(epi), act);
  if (ok) ++passed;
  else { ++failures; std::printf("FAIL %s: error %.3g\n", what, err); }
}

// --quick (under qemu-user, where every instruction is emulated and the long-double reference
// is software quad precision on AArch64): smaller products, the same kinds of checks.
static bool quick = false;

// The same product twice and with 1..4 threads: every result bit-identical to the first.
template <typename T>
static void determinism(Isa isa, std::mt19937_64& rng) {
  const size_t m = quick ? 131 : 203, n = quick ? 257 : 517, k = quick ? 300 : 1031;
  auto A = randomVec<T>(m * k, rng), B = randomVec<T>(k * n, rng), C0 = randomVec<T>(m * n, rng);
  std::vector<T> first;
  for (unsigned threads : {0u, 1u, 2u, 3u, 4u, 0u}) {
    Gemm<T> g;
    g.m = m; g.n = n; g.k = k; g.alpha = T(-0.01); g.beta = T(1);
    g.a = A.data(); g.lda = k; g.b = B.data(); g.ldb = n;
    std::vector<T> c(C0);
    g.c = c.data(); g.ldc = n;
    gemm(g, isa, threads);
    if (first.empty()) first = c;
    else if (std::memcmp(first.data(), c.data(), c.size() * sizeof(T)) != 0) {
      ++failures;
      std::printf("FAIL %s %s: %u threads differ from the first run\n", isaName(isa), sizeof(T) == 4 ? "f32" : "f64", threads);
      return;
    }
  }
  ++passed;
}

int main(int argc, char** argv) {
  quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::mt19937_64 rng(7);
  std::printf("detected %s, active %s\n", isaName(detectedIsa()), isaName(activeIsa()));
  const size_t rows[] = {1, 3, 17, quick ? size_t(67) : size_t(1000)};
  const size_t widths[] = {1, 5, 33, 130};
  for (int isaI = 0; isaI <= int(Isa::Neon); ++isaI) {
    const Isa isa = Isa(isaI);
    if (!isaRuns(isa)) continue;
    for (size_t m : rows)
      for (size_t n : widths)
        for (size_t k : {size_t(1), size_t(7), size_t(300)})
          for (int t = 0; t < 4; ++t) {
            const bool ta = t & 1, tb = t & 2;
            check<float>(isa, ta, tb, m, n, k, 1.0f, 0.0f, Epi::None, 0, rng);
            check<double>(isa, ta, tb, m, n, k, 1.0, 0.0, Epi::None, 0, rng);
          }
    // alpha/beta (the folded SGD step), a K past one block, epilogues.
    for (size_t m : {size_t(17), size_t(64)}) {
      check<float>(isa, true, false, m, 45, 600, -0.01f, 1.0f, Epi::None, 0, rng);
      check<double>(isa, true, false, m, 45, 600, -0.01, 1.0, Epi::None, 0, rng);
      check<float>(isa, false, false, m, 70, 20, 2.0f, 0.5f, Epi::None, 0, rng);
      for (uint32_t act : {uint32_t(NNA_ACT_RELU), uint32_t(NNA_ACT_SIGMOID), uint32_t(NNA_ACT_TANH), uint32_t(NNA_ACT_IDENTITY)}) {
        check<float>(isa, false, true, m, 37, 300, 1.0f, 0.0f, Epi::BiasAct, act, rng);
        check<double>(isa, false, true, m, 37, 300, 1.0, 0.0, Epi::BiasAct, act, rng);
        check<float>(isa, false, false, m, 41, 50, 1.0f, 0.0f, Epi::ActGrad, act, rng);
        check<double>(isa, false, false, m, 41, 50, 1.0, 0.0, Epi::ActGrad, act, rng);
      }
      for (uint32_t opt : {uint32_t(NNA_MOMENTUM), uint32_t(NNA_ADAM)}) {  // `act` carries the optimizer here
        check<float>(isa, true, false, m, 29, 333, 1.0f, 0.0f, Epi::Update, opt, rng);
        check<double>(isa, true, false, m, 29, 333, 1.0, 0.0, Epi::Update, opt, rng);
      }
    }
    determinism<float>(isa, rng);
    determinism<double>(isa, rng);
    std::printf("isa %s checked\n", isaName(isa));
  }
  if (failures) { std::printf("%d failures, %d passed\n", failures, passed); return 1; }
  std::printf("ok %d\n", passed);
  return 0;
}
