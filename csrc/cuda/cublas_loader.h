// cublas_loader.h: cuBLAS found at run time, never needed by the build. The development and CI
// machines have only nvcc and the CUDA runtime; a normal toolkit install (and the GPU machine)
// has libcublas. When it loads, large products of the per-layer path go to cublasSgemm /
// cublasDgemm in FP32/FP64 (default math: no TF32), or to cublasGemmEx with TF32 compute for the
// TF32 precisions; otherwise the tiled kernels run them.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace nna {

// One stream and (when cuBLAS loaded) one cuBLAS handle bound to it, taken from a pool for the
// length of a run: cuBLAS handles must not be shared by concurrent runs.
struct Lane {
  cudaStream_t stream = nullptr;
  void* blas = nullptr;  // cublasHandle_t, or null without cuBLAS
  int device = 0;        // the device the stream and handle belong to
  // Beside the stream, for work of the same run that may overlap it (LayerRun: a layer's
  // weight-gradient product beside the error products below it): a second stream and a second
  // handle bound to it, with its own workspace (two products at once must not share one), and
  // an event that orders one stream after the other.
  cudaStream_t sideStream = nullptr;
  void* sideBlas = nullptr;
  cudaEvent_t order = nullptr;
  Lane side() const {
    Lane l;
    l.stream = sideStream;
    l.blas = sideBlas;
    l.device = device;
    return l;
  }
};

// A lane of the calling thread's current device (one pool per device).
Lane acquireLane();
void releaseLane(const Lane& lane);

// RAII holder of a lane for one run.
class LaneGuard {
 public:
  LaneGuard() : lane_(acquireLane()) {}
  // A run that failed part-way may have left work queued: drain it before the next run (unless
  // the run said it ended with its own wait, the side stream's work joined into it: settled()).
  ~LaneGuard() {
    cudaSetDevice(lane_.device);  // a lane goes back from its own device
    if (!settled_) {
      cudaStreamSynchronize(lane_.sideStream);
      cudaStreamSynchronize(lane_.stream);
    }
    releaseLane(lane_);
  }
  void settled() { settled_ = true; }
  LaneGuard(const LaneGuard&) = delete;
  LaneGuard& operator=(const LaneGuard&) = delete;
  const Lane& operator*() const { return lane_; }
  const Lane* operator->() const { return &lane_; }

 private:
  Lane lane_;
  bool settled_ = false;
};

// Whether cuBLAS was found ("" when it was; else why not). NN_ARENA_CUBLAS=0 turns it off,
// NN_ARENA_CUBLAS=/path/to/libcublas.so picks the library.
bool cublasAvailable();
const std::string& cublasStatus();

// Column-major C = alpha op(A) op(B) + beta C on lane.stream (cuBLAS conventions, host scalars;
// `scalars`, where given: alpha and beta read from device memory instead, scalars[0] and
// scalars[1] of the product's scalar type, so that a captured product takes a new alpha each
// replay). Throws Failure CUBLAS_ERROR on a failed call.
void blasGemm(const Lane& lane, bool transA, bool transB, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc,
              const void* scalars = nullptr);
// The same product with TF32 tensor cores (cublasGemmEx, CUBLAS_COMPUTE_32F_FAST_TF32): FP32
// storage and accumulation, the operands rounded to TF32 by cuBLAS.
void blasGemmTf32(const Lane& lane, bool transA, bool transB, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc,
                  const void* scalars = nullptr);
void blasGemm(const Lane& lane, bool transA, bool transB, int m, int n, int k, double alpha, const double* A, int lda, const double* B, int ldb, double beta, double* C, int ldc,
              const void* scalars = nullptr);
// `count` products of 16-bit operands (A and B as __half where `fp16`, else __nv_bfloat16; FP32
// accumulation and FP32 C, CUBLAS_COMPUTE_32F) at once (strides in elements; 0 = the same operand
// for all): bf16 / fp16 runs, K-model arenas in bf16. count 1, or no cublasGemmStridedBatchedEx:
// one cublasGemmEx per model.
void blasGemmHalfBatched(const Lane& lane, bool fp16, bool transA, bool transB, int m, int n, int k, float alpha, const void* A, int lda, long long strideA, const void* B, int ldb,
                         long long strideB, float beta, float* C, int ldc, long long strideC, int count, const void* scalars = nullptr);

// `count` products at once (strides in elements between one product's operands and the next;
// 0 = the same operand for all): K-model arenas, one call for every model. count 1 is blasGemm.
void blasGemmBatched(const Lane& lane, bool transA, bool transB, int m, int n, int k, float alpha, const float* A, int lda, long long strideA, const float* B, int ldb,
                     long long strideB, float beta, float* C, int ldc, long long strideC, int count, const void* scalars = nullptr);
void blasGemmBatched(const Lane& lane, bool transA, bool transB, int m, int n, int k, double alpha, const double* A, int lda, long long strideA, const double* B, int ldb,
                     long long strideB, double beta, double* C, int ldc, long long strideC, int count, const void* scalars = nullptr);

}  // namespace nna
