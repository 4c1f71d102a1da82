// gemm_bench.cc: GFLOP/s of the CPU GEMM (csrc/cpu/gemm.h) on the three products of every layer
// of the step benchmark's networks (bench/steps.ts), beside the machine's FMA peak measured in
// the same run and, where one is installed, a system BLAS (cblas_sgemm found with dlopen).
// Built and driven by bench/cpu-gemm.ts; prints progress on stderr and one JSON object on stdout.
//   gemm_bench [--only S,M,L] [--product forward|backward|weight] [--seconds 0.3]
//              [--isa avx512|avx2|portable] [--blas libopenblas.so.0|none]
#include <dlfcn.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cpu/gemm.h"
#include "core/thread_pool.h"

using namespace nna;
using namespace nna::cpu;
using Clock = std::chrono::steady_clock;

// 16 independent chains of vfmadd231ps: enough to cover 4 cycles of latency on 2 FMA ports.
__attribute__((target("avx512f"), noinline)) static double fmaLoop512(uint64_t iters) {
  __m512 acc[16];
  const __m512 a = _mm512_set1_ps(1.0000001f), b = _mm512_set1_ps(0.9999999f);
  for (auto& x : acc) x = _mm512_setzero_ps();
  for (uint64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  float s = 0, out[16];
  for (auto& x : acc) { _mm512_storeu_ps(out, x); s += out[0]; }
  return s;
}
__attribute__((target("avx2,fma"), noinline)) static double fmaLoop256(uint64_t iters) {
  __m256 acc[12];
  const __m256 a = _mm256_set1_ps(1.0000001f), b = _mm256_set1_ps(0.9999999f);
  for (auto& x : acc) x = _mm256_setzero_ps();
  for (uint64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  float s = 0, out[8];
  for (auto& x : acc) { _mm256_storeu_ps(out, x); s += out[0]; }
  return s;
}

// Float32 FMA peak of `threads` threads running the loop at once: best of 15 short tries, as
// many chances at a quiet moment as the GEMM timings get.
static double fmaPeak(unsigned threads, bool avx512) {
  const uint64_t iters = 20'000'000;
  const double flopsPerIter = avx512 ? 16.0 * 16 * 2 : 12.0 * 8 * 2;
  double best = 0;
  for (int rep = 0; rep < 15; ++rep) {
    std::atomic<double> sink{0};
    const auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; ++t) ts.emplace_back([&] { sink = sink + (avx512 ? fmaLoop512(iters) : fmaLoop256(iters)); });
    for (auto& t : ts) t.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, threads * iters * flopsPerIter / s / 1e9);
  }
  return best;
}

using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);

struct Shape { std::string net, product; size_t m, n, k; bool ta, tb; };

template <typename F>
static void timeIt(F&& f, double seconds, double& best, double& median) {
  f();  // warm-up: pages, packing buffers, the pool
  std::vector<double> ts;
  const auto start = Clock::now();
  do {
    const auto t0 = Clock::now();
    f();
    ts.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  } while (ts.size() < 3 || (std::chrono::duration<double>(Clock::now() - start).count() < seconds && ts.size() < 1000));
  std::sort(ts.begin(), ts.end());
  best = ts.front();
  median = ts[ts.size() / 2];
}

int main(int argc, char** argv) {
  std::string only = "S,M,L", blasName = "libopenblas.so.0", product;
  double seconds = 0.3;
  Isa isa = activeIsa();
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--only") only = v;
    else if (k == "--seconds") seconds = std::atof(v.c_str());
    else if (k == "--blas") blasName = v == "none" ? "" : v;
    else if (k == "--product") product = v;
    else if (k == "--isa") isa = v == "portable" ? Isa::Portable : v == "avx2" ? Isa::Avx2 : Isa::Avx512;
  }
  isa = capIsa(isa);
  const unsigned threads = poolThreads();
  const bool avx512 = detectedIsa() == Isa::Avx512;
  // The peak is the best of several measurements spread over the run (before the shapes, before
  // each L shape and at the end): on a shared machine one try can land in a busy moment, and a
  // low peak would flatter the GEMM's share of it.
  double peak1 = fmaPeak(1, avx512), peakN = fmaPeak(threads, avx512);

  SgemmFn sgemm = nullptr;
  void* lib = blasName.empty() ? nullptr : dlopen(blasName.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib) {
    sgemm = reinterpret_cast<SgemmFn>(dlsym(lib, "cblas_sgemm"));
    if (auto setThreads = reinterpret_cast<void (*)(int)>(dlsym(lib, "openblas_set_num_threads"))) setThreads(int(threads));
  }

  struct Net { const char* name; std::vector<size_t> layers; size_t batch; };
  const Net nets[] = {{"S", {784, 128, 10}, 100}, {"M", {784, 1024, 1024, 10}, 256}, {"L", {4096, 4096, 4096, 4096}, 2048}};
  std::vector<Shape> shapes;
  for (const Net& net : nets) {
    if (only.find(net.name) == std::string::npos) continue;
    for (size_t l = 1; l < net.layers.size(); ++l) {
      const size_t in = net.layers[l - 1], out = net.layers[l], b = net.batch;
      auto add = [&](const char* p, size_t m, size_t n, size_t k, bool ta, bool tb) {
        if (!product.empty() && std::string(p).find(product) == std::string::npos) return;
        for (const Shape& s : shapes) if (s.net == net.name && s.m == m && s.n == n && s.k == k && s.ta == ta && s.tb == tb) return;
        shapes.push_back({net.name, p, m, n, k, ta, tb});
      };
      add("forward x.W^T", b, out, in, false, true);
      if (l > 1) add("backward d.W", b, in, out, false, false);
      add("weight grad d^T.z", out, in, b, true, false);
    }
  }

  std::string json = "\"rows\":[";
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Shape& s = shapes[si];
    std::vector<float> A(s.m * s.k), B(s.k * s.n), C(s.m * s.n);
    for (size_t i = 0; i < A.size(); ++i) A[i] = float(i % 13) / 13.0f - 0.5f;
    for (size_t i = 0; i < B.size(); ++i) B[i] = float(i % 7) / 7.0f - 0.5f;
    Gemm<float> g;
    g.transA = s.ta; g.transB = s.tb; g.m = s.m; g.n = s.n; g.k = s.k;
    g.a = A.data(); g.lda = s.ta ? s.m : s.k;
    g.b = B.data(); g.ldb = s.tb ? s.k : s.n;
    g.c = C.data(); g.ldc = s.n;
    const double flops = 2.0 * double(s.m) * double(s.n) * double(s.k);
    double best, median, bBest = 0, bMedian = 0;
    if (s.net == "L") peakN = std::max(peakN, fmaPeak(threads, avx512));
    timeIt([&] { gemm(g, isa); }, seconds, best, median);
    if (sgemm)
      timeIt([&] { sgemm(101, s.ta ? 112 : 111, s.tb ? 112 : 111, int(s.m), int(s.n), int(s.k), 1.0f, g.a, int(g.lda), g.b, int(g.ldb), 0.0f, g.c, int(g.ldc)); },
             seconds, bBest, bMedian);
    const double gf = flops / best / 1e9, gfMed = flops / median / 1e9;
    const double bgf = sgemm ? flops / bBest / 1e9 : 0, bgfMed = sgemm ? flops / bMedian / 1e9 : 0;
    std::fprintf(stderr, "  %s %-18s m=%5zu n=%5zu k=%5zu: %7.1f GFLOP/s best, %7.1f median (%.0f%% of the peak so far)%s\n", s.net.c_str(), s.product.c_str(),
                 s.m, s.n, s.k, gf, gfMed, 100 * gf / peakN, sgemm ? (", BLAS " + std::to_string(int(bgf)) + " best, " + std::to_string(int(bgfMed)) + " median").c_str() : "");
    char row[512];
    std::snprintf(row, sizeof row,
                  "%s{\"network\":\"%s\",\"product\":\"%s\",\"m\":%zu,\"n\":%zu,\"k\":%zu,\"gflops\":%.2f,\"gflopsMedian\":%.2f,\"blasGflops\":%s,\"blasGflopsMedian\":%s}",
                  si ? "," : "", s.net.c_str(), s.product.c_str(), s.m, s.n, s.k, gf, gfMed,
                  sgemm ? std::to_string(bgf).c_str() : "null", sgemm ? std::to_string(bgfMed).c_str() : "null");
    json += row;
  }
  json += "]}";
  peakN = std::max(peakN, fmaPeak(threads, avx512));
  peak1 = std::max(peak1, fmaPeak(1, avx512));
  std::fprintf(stderr, "  FMA peak (float32, %s, best of the run): %.1f GFLOP/s on 1 thread, %.1f on %u\n", avx512 ? "avx512" : "avx2", peak1, peakN, threads);
  std::printf("{\"isa\":\"%s\",\"threads\":%u,\"fmaPeak1\":%.2f,\"fmaPeak\":%.2f,\"blas\":%s,%s\n", isaName(isa), threads, peak1, peakN,
              sgemm ? ("\"" + blasName + "\"").c_str() : "null", json.c_str());
  return 0;
}
