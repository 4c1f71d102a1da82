// lt_tune.cu: for the per-layer path's products of M (784-1024-1024-10, batch 256) and of K S
// models (784-128-10, batch 100), how long cuBLAS's own choice takes against each algorithm
// cuBLASLt's heuristics offer, every product timed as graphed replays (as a step runs). On the GPU
// machine (it has cublasLt.h):
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/micro/lt_tune.cu -lcublasLt -lcublas -o /tmp/lt_tune && /tmp/lt_tune
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                          \
  do {                                                                 \
    auto e_ = (x);                                                     \
    if (int(e_) != 0) {                                                \
      std::printf("%s failed: %d (line %d)\n", #x, int(e_), __LINE__); \
      std::exit(1);                                                    \
    }                                                                  \
  } while (0)

struct Shape {
  const char* name;
  bool tA, tB;
  int m, n, k, lda, ldb, ldc;
  long long sA, sB, sC;
  int count;
  bool tf32;
  float beta;
};

static float* gA;
static float* gB;
static float* gC;
static void* gWork;
static const size_t kWork = size_t(32) << 20;

// Microseconds a product takes: 20 launches captured in a graph, the graph replayed 20 times.
template <typename F> float timeGraph(cudaStream_t s, F launch) {
  launch();  // warm (and any lazy set-up outside capture)
  CK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < 20; ++i) launch();
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphLaunch(ge, s));
  CK(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  float best = 1e30f;
  for (int r = 0; r < 5; ++r) {
    CK(cudaEventRecord(a, s));
    for (int i = 0; i < 4; ++i) CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    best = std::min(best, ms * 1000.0f / 80.0f);
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return best;
}

int main() {
  const Shape shapes[] = {
      // M (784-1024-1024-10, batch 256), tf32: forward 1, forward 2, error 2, weight gradient 1 and 2 (the SGD fold: beta 1)
      {"M tf32 fwd1", true, false, 1024, 256, 784, 784, 784, 1024, 0, 0, 0, 1, true, 0},
      {"M tf32 fwd2", true, false, 1024, 256, 1024, 1024, 1024, 1024, 0, 0, 0, 1, true, 0},
      {"M tf32 err2", false, false, 1024, 256, 1024, 1024, 1024, 1024, 0, 0, 0, 1, true, 0},
      {"M tf32 wg1", false, true, 784, 1024, 256, 784, 1024, 784, 0, 0, 0, 1, true, 1},
      {"M tf32 wg2", false, true, 1024, 1024, 256, 1024, 1024, 1024, 0, 0, 0, 1, true, 1},
      {"M fp32 err2", false, false, 1024, 256, 1024, 1024, 1024, 1024, 0, 0, 0, 1, false, 0},
      {"M fp32 wg2", false, true, 1024, 1024, 256, 1024, 1024, 1024, 0, 0, 0, 1, false, 1},
      // K S models (784-128-10, batch 100), fp32: layer 1's forward batched (z[0] shared) and as one product, its folded weight gradient as one product
      {"K256 fwd1 batched", true, false, 128, 100, 784, 784, 784, 128, 128LL * 784, 0, 128LL * 100, 256, false, 0},
      {"K256 fwd1 one", true, false, 128 * 256, 100, 784, 784, 784, 128 * 256, 0, 0, 0, 1, false, 0},
      {"K256 wg1 one", false, true, 784, 128 * 256, 100, 784, 128 * 256, 784, 0, 0, 0, 1, false, 1},
      {"K64 fwd1 batched", true, false, 128, 100, 784, 784, 784, 128, 128LL * 784, 0, 128LL * 100, 64, false, 0},
      {"K64 fwd1 one", true, false, 128 * 64, 100, 784, 784, 784, 128 * 64, 0, 0, 0, 1, false, 0},
      {"K64 wg1 one", false, true, 784, 128 * 64, 100, 784, 128 * 64, 784, 0, 0, 0, 1, false, 1},
      {"K256 err2 batched", false, false, 128, 100, 10, 128, 10, 128, 10LL * 128, 10LL * 100, 128LL * 100, 256, false, 0},
  };
  const size_t elems = size_t(64) << 20;  // 256 MiB each: the largest operand is 256 x 784 x 128 floats
  CK(cudaMalloc(&gA, elems * 4));
  CK(cudaMalloc(&gB, elems * 4));
  CK(cudaMalloc(&gC, elems * 4));
  CK(cudaMalloc(&gWork, kWork));
  CK(cudaMemset(gA, 0, elems * 4));
  CK(cudaMemset(gB, 0, elems * 4));
  CK(cudaMemset(gC, 0, elems * 4));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cublasHandle_t bh;
  CK(cublasCreate(&bh));
  CK(cublasSetStream(bh, s));
  CK(cublasSetWorkspace(bh, gWork, kWork));
  cublasLtHandle_t lh;
  CK(cublasLtCreate(&lh));
  const float alpha = 1.0f;
  for (const Shape& x : shapes) {
    const float beta = x.beta;
    const cublasOperation_t oa = x.tA ? CUBLAS_OP_T : CUBLAS_OP_N, ob = x.tB ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasComputeType_t ct = x.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const float tb = timeGraph(s, [&] {
      if (x.count == 1)
        CK(cublasGemmEx(bh, oa, ob, x.m, x.n, x.k, &alpha, gA, CUDA_R_32F, x.lda, gB, CUDA_R_32F, x.ldb, &beta, gC, CUDA_R_32F, x.ldc, ct, CUBLAS_GEMM_DEFAULT));
      else
        CK(cublasGemmStridedBatchedEx(bh, oa, ob, x.m, x.n, x.k, &alpha, gA, CUDA_R_32F, x.lda, x.sA, gB, CUDA_R_32F, x.ldb, x.sB, &beta, gC, CUDA_R_32F, x.ldc, x.sC, x.count, ct,
                                      CUBLAS_GEMM_DEFAULT));
    });
    cublasLtMatmulDesc_t d;
    CK(cublasLtMatmulDescCreate(&d, ct, CUDA_R_32F));
    CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &oa, sizeof oa));
    CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof ob));
    cublasLtMatrixLayout_t la, lb, lc;
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, x.tA ? x.k : x.m, x.tA ? x.m : x.k, x.lda));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, x.tB ? x.n : x.k, x.tB ? x.k : x.n, x.ldb));
    CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, x.m, x.n, x.ldc));
    if (x.count > 1) {
      const int32_t c = x.count;
      for (auto [l, st] : {std::pair{la, x.sA}, std::pair{lb, x.sB}, std::pair{lc, x.sC}}) {
        CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &c, sizeof c));
        const int64_t st64 = st;
        CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st64, sizeof st64));
      }
    }
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t cap = kWork;
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &cap, sizeof cap));
    cublasLtMatmulHeuristicResult_t res[32];
    int found = 0;
    const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lh, d, la, lb, lc, lc, pref, 32, res, &found);
    std::printf("%-20s m %d n %d k %d count %d: cuBLAS %.2f us; Lt candidates %d (status %d):", x.name, x.m, x.n, x.k, x.count, tb, found, int(hs));
    float bestLt = 1e30f;
    int bestI = -1;
    for (int i = 0; i < found; ++i) {
      if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
      const float t = timeGraph(s, [&] { CK(cublasLtMatmul(lh, d, &alpha, gA, la, gB, lb, &beta, gC, lc, gC, lc, &res[i].algo, gWork, kWork, s)); });
      std::printf(" %.2f", t);
      if (t < bestLt) {
        bestLt = t;
        bestI = i;
      }
    }
    std::printf("\n  best Lt #%d %.2f us (%.2fx cuBLAS)\n", bestI, bestLt, tb / bestLt);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(d);
  }
  return 0;
}
