// cublas_loader.cc: dlopen of libcublas and the few entry points nn-arena calls. The
// prototypes below are cuBLAS's stable v2 C ABI (the same since CUDA 6), declared here because
// the build machines have no cublas_v2.h.
#include "cublas_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "../core/failure.h"
#include "check.cuh"
#include "library_search.h"
#include "../core/env.h"

namespace nna {
namespace {

using Handle = void*;
using Status = int;                   // cublasStatus_t: 0 = CUBLAS_STATUS_SUCCESS
constexpr int kOpN = 0, kOpT = 1;     // cublasOperation_t
constexpr int kDefaultMath = 0;       // cublasMath_t CUBLAS_DEFAULT_MATH: no TF32 for SGEMM
constexpr int kR32F = 0;              // cudaDataType_t CUDA_R_32F
constexpr int kR16BF = 14;            // cudaDataType_t CUDA_R_16BF
constexpr int kR16F = 2;              // cudaDataType_t CUDA_R_16F
constexpr int kCompute32F = 68;       // cublasComputeType_t CUBLAS_COMPUTE_32F
constexpr int kComputeFastTf32 = 77;  // cublasComputeType_t CUBLAS_COMPUTE_32F_FAST_TF32
constexpr int kGemmDefault = -1;      // cublasGemmAlgo_t CUBLAS_GEMM_DEFAULT

struct Api {
  Status (*create)(Handle*) = nullptr;
  Status (*destroy)(Handle) = nullptr;
  Status (*setStream)(Handle, cudaStream_t) = nullptr;
  Status (*setMathMode)(Handle, int) = nullptr;
  Status (*setPointerMode)(Handle, int) = nullptr;  // cublasPointerMode_t: 0 host, 1 device
  Status (*sgemm)(Handle, int, int, int, int, int, const float*, const float*, int, const float*, int, const float*, float*, int) = nullptr;
  Status (*dgemm)(Handle, int, int, int, int, int, const double*, const double*, int, const double*, int, const double*, double*, int) = nullptr;
  // cublasGemmEx (cuBLAS 8+): the TF32 and BF16 products.
  Status (*gemmEx)(Handle, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int, const void*, void*, int, int, int, int) = nullptr;
  // Strided batched products (K-model arenas: one call for every model's product; cuBLAS 8+).
  // Optional: without them the batch runs as one call per model.
  Status (*sgemmBatched)(Handle, int, int, int, int, int, const float*, const float*, int, long long, const float*, int, long long, const float*, float*, int, long long,
                         int) = nullptr;
  Status (*dgemmBatched)(Handle, int, int, int, int, int, const double*, const double*, int, long long, const double*, int, long long, const double*, double*, int, long long,
                         int) = nullptr;
  Status (*gemmBatchedEx)(Handle, int, int, int, int, int, const void*, const void*, int, int, long long, const void*, int, int, long long, const void*, void*, int, int, long long,
                          int, int, int) = nullptr;
  std::string status = "not loaded";
  bool ok = false;
};

const Api& api() {
  static const Api a = [] {
    Api r;
    const std::string env = knob(Knob::Cublas);
    if (env == "0") {
      r.status = "disabled (NN_ARENA_CUBLAS=0)";
      return r;
    }
    std::string tried;
    void* lib = openCudaLibrary(env == "1" ? "" : env, {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}, "libcublas.so", &tried);
    if (!lib) {
      r.status = "libcublas not found (tried " + tried + ")";
      return r;
    }
    auto sym = [&](const char* name) { return dlsym(lib, name); };
    r.create = reinterpret_cast<decltype(r.create)>(sym("cublasCreate_v2"));
    r.destroy = reinterpret_cast<decltype(r.destroy)>(sym("cublasDestroy_v2"));
    r.setStream = reinterpret_cast<decltype(r.setStream)>(sym("cublasSetStream_v2"));
    r.setMathMode = reinterpret_cast<decltype(r.setMathMode)>(sym("cublasSetMathMode"));
    r.setPointerMode = reinterpret_cast<decltype(r.setPointerMode)>(sym("cublasSetPointerMode_v2"));
    r.sgemm = reinterpret_cast<decltype(r.sgemm)>(sym("cublasSgemm_v2"));
    r.dgemm = reinterpret_cast<decltype(r.dgemm)>(sym("cublasDgemm_v2"));
    r.gemmEx = reinterpret_cast<decltype(r.gemmEx)>(sym("cublasGemmEx"));
    r.sgemmBatched = reinterpret_cast<decltype(r.sgemmBatched)>(sym("cublasSgemmStridedBatched"));
    r.dgemmBatched = reinterpret_cast<decltype(r.dgemmBatched)>(sym("cublasDgemmStridedBatched"));
    r.gemmBatchedEx = reinterpret_cast<decltype(r.gemmBatchedEx)>(sym("cublasGemmStridedBatchedEx"));
    if (!r.create || !r.destroy || !r.setStream || !r.setMathMode || !r.setPointerMode || !r.sgemm || !r.dgemm || !r.gemmEx) {
      r.status = "libcublas loaded but an entry point is missing";
      return r;  // the library stays loaded; nothing of it is called
    }
    r.ok = true;
    r.status = "";
    return r;
  }();
  return a;
}

void blasCheck(Status s, const char* what) {
  if (s != 0) NNA_FAIL("CUBLAS_ERROR", std::string(what) + " failed with cublasStatus " + std::to_string(s));
}

std::mutex poolMutex;
std::vector<Lane>& pool() {
  static auto* p = new std::vector<Lane>();  // never destroyed: lanes may outlive static teardown
  return *p;
}

}  // namespace

bool cublasAvailable() { return api().ok; }
const std::string& cublasStatus() { return api().status; }

namespace {
// A cuBLAS handle bound to stream s, in the lane's math mode.
Handle boundHandle(cudaStream_t s) {
  const Api& a = api();
  Handle h = nullptr;
  try {
    blasCheck(a.create(&h), "cublasCreate");
    blasCheck(a.setStream(h, s), "cublasSetStream");
    blasCheck(a.setMathMode(h, kDefaultMath), "cublasSetMathMode");
  } catch (...) {
    if (h) a.destroy(h);
    throw;
  }
  return h;
}
}  // namespace

Lane acquireLane() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  {
    std::lock_guard<std::mutex> lock(poolMutex);
    std::vector<Lane>& p = pool();
    for (size_t i = p.size(); i-- > 0;) {
      if (p[i].device != device) continue;
      Lane l = p[i];
      p.erase(p.begin() + long(i));
      return l;
    }
  }
  Lane l;
  l.device = device;
  try {
    CUDA_CHECK(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&l.sideStream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&l.order, cudaEventDisableTiming));
    if (cublasAvailable()) {
      l.blas = boundHandle(l.stream);
      l.sideBlas = boundHandle(l.sideStream);
    }
  } catch (...) {
    if (l.blas) api().destroy(l.blas);
    if (l.order) cudaEventDestroy(l.order);
    if (l.sideStream) cudaStreamDestroy(l.sideStream);
    if (l.stream) cudaStreamDestroy(l.stream);
    throw;
  }
  return l;
}

void releaseLane(const Lane& lane) {
  std::lock_guard<std::mutex> lock(poolMutex);
  pool().push_back(lane);
}

namespace {
// The scalars of one call: the host values, or (`dev`) device memory, with the handle in device
// pointer mode for the call only.
template <typename T> class Scalars {
 public:
  Scalars(const Lane& lane, const T& alpha, const T& beta, const void* dev)
      : lane_(lane), dev_(static_cast<const T*>(dev)), alpha_(dev_ ? dev_ : &alpha), beta_(dev_ ? dev_ + 1 : &beta) {
    if (dev_) blasCheck(api().setPointerMode(lane.blas, 1), "cublasSetPointerMode");
  }
  ~Scalars() {
    if (dev_) api().setPointerMode(lane_.blas, 0);
  }
  const T* alpha() const { return alpha_; }
  const T* beta() const { return beta_; }

 private:
  const Lane& lane_;
  const T* dev_;
  const T *alpha_, *beta_;
};
}  // namespace

void blasGemm(const Lane& lane, bool tA, bool tB, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc,
              const void* scalars) {
  const Scalars<float> s(lane, alpha, beta, scalars);
  blasCheck(api().sgemm(lane.blas, tA ? kOpT : kOpN, tB ? kOpT : kOpN, m, n, k, s.alpha(), A, lda, B, ldb, s.beta(), C, ldc), "cublasSgemm");
}
void blasGemmTf32(const Lane& lane, bool tA, bool tB, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc,
                  const void* scalars) {
  const Scalars<float> s(lane, alpha, beta, scalars);
  blasCheck(api().gemmEx(lane.blas, tA ? kOpT : kOpN, tB ? kOpT : kOpN, m, n, k, s.alpha(), A, kR32F, lda, B, kR32F, ldb, s.beta(), C, kR32F, ldc, kComputeFastTf32, kGemmDefault),
            "cublasGemmEx (TF32)");
}
namespace {
int halfType(bool fp16) { return fp16 ? kR16F : kR16BF; }
// One product of 16-bit operands (blasGemmHalfBatched's count 1).
void blasGemmHalf(const Lane& lane, bool fp16, bool tA, bool tB, int m, int n, int k, float alpha, const void* A, int lda, const void* B, int ldb, float beta, float* C, int ldc,
                  const void* scalars) {
  const Scalars<float> s(lane, alpha, beta, scalars);
  const int type = halfType(fp16);
  blasCheck(api().gemmEx(lane.blas, tA ? kOpT : kOpN, tB ? kOpT : kOpN, m, n, k, s.alpha(), A, type, lda, B, type, ldb, s.beta(), C, kR32F, ldc, kCompute32F, kGemmDefault),
            fp16 ? "cublasGemmEx (FP16)" : "cublasGemmEx (BF16)");
}
}  // namespace

void blasGemmHalfBatched(const Lane& lane, bool fp16, bool tA, bool tB, int m, int n, int k, float alpha, const void* A, int lda, long long sA, const void* B, int ldb,
                         long long sB, float beta, float* C, int ldc, long long sC, int count, const void* scalars) {
  const size_t bytes = 2;  // one element of an operand (bf16 or fp16)
  if (count == 1 || !api().gemmBatchedEx) {
    for (int i = 0; i < count; ++i)
      blasGemmHalf(lane, fp16, tA, tB, m, n, k, alpha, static_cast<const char*>(A) + i * sA * bytes, lda, static_cast<const char*>(B) + i * sB * bytes, ldb, beta, C + i * sC, ldc,
                   scalars);
    return;
  }
  const Scalars<float> s(lane, alpha, beta, scalars);
  const int type = halfType(fp16);
  blasCheck(api().gemmBatchedEx(lane.blas, tA ? kOpT : kOpN, tB ? kOpT : kOpN, m, n, k, s.alpha(), A, type, lda, sA, B, type, ldb, sB, s.beta(), C, kR32F, ldc, sC, count,
                                kCompute32F, kGemmDefault),
            fp16 ? "cublasGemmStridedBatchedEx (FP16)" : "cublasGemmStridedBatchedEx (BF16)");
}
void blasGemm(const Lane& lane, bool tA, bool tB, int m, int n, int k, double alpha, const double* A, int lda, const double* B, int ldb, double beta, double* C, int ldc,
              const void* scalars) {
  const Scalars<double> s(lane, alpha, beta, scalars);
  blasCheck(api().dgemm(lane.blas, tA ? kOpT : kOpN, tB ? kOpT : kOpN, m, n, k, s.alpha(), A, lda, B, ldb, s.beta(), C, ldc), "cublasDgemm");
}

namespace {
template <typename T, typename F, typename G>
void batched(const Lane& lane, F batchedFn, G single, bool tA, bool tB, int m, int n, int k, T alpha, const T* A, int lda, long long sA, const T* B, int ldb, long long sB, T beta,
             T* C, int ldc, long long sC, int count, const void* scalars, const char* what) {
  if (count == 1) return single(lane, tA, tB, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, scalars);
  if (batchedFn) {
    const Scalars<T> s(lane, alpha, beta, scalars);
    blasCheck(batchedFn(lane.blas, tA ? kOpT : kOpN, tB ? kOpT : kOpN, m, n, k, s.alpha(), A, lda, sA, B, ldb, sB, s.beta(), C, ldc, sC, count), what);
    return;
  }
  for (int i = 0; i < count; ++i) single(lane, tA, tB, m, n, k, alpha, A + i * sA, lda, B + i * sB, ldb, beta, C + i * sC, ldc, scalars);
}
}  // namespace

void blasGemmBatched(const Lane& lane, bool tA, bool tB, int m, int n, int k, float alpha, const float* A, int lda, long long sA, const float* B, int ldb, long long sB, float beta,
                     float* C, int ldc, long long sC, int count, const void* scalars) {
  batched<float>(
      lane, api().sgemmBatched, [](auto&&... a) { blasGemm(a...); }, tA, tB, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, count, scalars, "cublasSgemmStridedBatched");
}
void blasGemmBatched(const Lane& lane, bool tA, bool tB, int m, int n, int k, double alpha, const double* A, int lda, long long sA, const double* B, int ldb, long long sB,
                     double beta, double* C, int ldc, long long sC, int count, const void* scalars) {
  batched<double>(
      lane, api().dgemmBatched, [](auto&&... a) { blasGemm(a...); }, tA, tB, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, count, scalars, "cublasDgemmStridedBatched");
}

}  // namespace nna
