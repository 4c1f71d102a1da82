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
using Status = int;  // cublasStatus_t: 0 = CUBLAS_STATUS_SUCCESS
constexpr int kOpN = 0, kOpT = 1;          // cublasOperation_t
constexpr int kDefaultMath = 0;            // cublasMath_t CUBLAS_DEFAULT_MATH: no TF32 for SGEMM

struct Api {
  Status (*create)(Handle*) = nullptr;
  Status (*destroy)(Handle) = nullptr;
  Status (*setStream)(Handle, cudaStream_t) = nullptr;
  Status (*setMathMode)(Handle, int) = nullptr;
  Status (*sgemm)(Handle, int, int, int, int, int, const float*, const float*, int, const float*, int, const float*, float*, int) = nullptr;
  Status (*dgemm)(Handle, int, int, int, int, int, const double*, const double*, int, const double*, int, const double*, double*, int) = nullptr;
  std::string status = "not loaded";
  bool ok = false;
};

const Api& api() {
  static const Api a = [] {
    Api r;
    const std::string env = knob(Knob::Cublas);
    if (env == "0") { r.status = "disabled (NN_ARENA_CUBLAS=0)"; return r; }
    std::string tried;
    void* lib = openCudaLibrary(env == "1" ? "" : env, {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}, "libcublas.so", &tried);
    if (!lib) { r.status = "libcublas not found (tried " + tried + ")"; return r; }
    auto sym = [&](const char* name) { return dlsym(lib, name); };
    r.create = reinterpret_cast<decltype(r.create)>(sym("cublasCreate_v2"));
    r.destroy = reinterpret_cast<decltype(r.destroy)>(sym("cublasDestroy_v2"));
    r.setStream = reinterpret_cast<decltype(r.setStream)>(sym("cublasSetStream_v2"));
    r.setMathMode = reinterpret_cast<decltype(r.setMathMode)>(sym("cublasSetMathMode"));
    r.sgemm = reinterpret_cast<decltype(r.sgemm)>(sym("cublasSgemm_v2"));
    r.dgemm = reinterpret_cast<decltype(r.dgemm)>(sym("cublasDgemm_v2"));
    if (!r.create || !r.destroy || !r.setStream || !r.setMathMode || !r.sgemm || !r.dgemm) {
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
  CUDA_CHECK(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
  if (cublasAvailable()) {
    const Api& a = api();
    Handle h = nullptr;
    try {
      blasCheck(a.create(&h), "cublasCreate");
      blasCheck(a.setStream(h, l.stream), "cublasSetStream");
      blasCheck(a.setMathMode(h, kDefaultMath), "cublasSetMathMode");
    } catch (...) {
      if (h) a.destroy(h);
      cudaStreamDestroy(l.stream);
      throw;
    }
    l.blas = h;
  }
  return l;
}

void releaseLane(const Lane& lane) {
  std::lock_guard<std::mutex> lock(poolMutex);
  pool().push_back(lane);
}

void blasGemm(const Lane& lane, bool tA, bool tB, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
              float beta, float* C, int ldc) {
  blasCheck(api().sgemm(lane.blas, tA ? kOpT : kOpN, tB ? kOpT : kOpN, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc), "cublasSgemm");
}
void blasGemm(const Lane& lane, bool tA, bool tB, int m, int n, int k, double alpha, const double* A, int lda, const double* B, int ldb,
              double beta, double* C, int ldc) {
  blasCheck(api().dgemm(lane.blas, tA ? kOpT : kOpN, tB ? kOpT : kOpN, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc), "cublasDgemm");
}

}  // namespace nna
