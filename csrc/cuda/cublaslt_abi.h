// cublaslt_abi.h: the numbers and structs of cuBLASLt's C ABI that cublaslt_loader.cc uses,
// declared here because the build machines have no cublasLt.h. bench/micro/lt_abi_check.cc
// compares each with the header on a machine that has it (the GPU machine).
#pragma once
#include <cstddef>
#include <cstdint>

namespace nna {
namespace lt_abi {

using Status = int;  // cublasStatus_t: 0 = CUBLAS_STATUS_SUCCESS

constexpr int kR32F = 0;              // cudaDataType_t CUDA_R_32F
constexpr int kCompute32F = 68;       // cublasComputeType_t CUBLAS_COMPUTE_32F
constexpr int kComputeFastTf32 = 77;  // CUBLAS_COMPUTE_32F_FAST_TF32
// cublasLtMatmulDescAttributes_t
constexpr int kDescPointerMode = 2, kDescTransA = 3, kDescTransB = 4, kDescEpilogue = 7, kDescBias = 8, kDescBiasBatchStride = 10, kDescAux = 11, kDescAuxLd = 12;
// cublasLtMatrixLayoutAttribute_t: CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, STRIDED_BATCH_OFFSET
constexpr int kLayoutBatchCount = 5, kLayoutBatchStride = 6;
// cublasLtMatmulPreferenceAttributes_t: CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, MIN_ALIGNMENT_A_BYTES (B, C, D follow)
constexpr int kPrefMaxWorkspace = 1, kPrefMinAlignA = 5;
constexpr int kPointerDevice = 1;  // cublasLtPointerMode_t CUBLASLT_POINTER_MODE_DEVICE

struct Algo {
  uint64_t data[8];
};                  // cublasLtMatmulAlgo_t
struct Heuristic {  // cublasLtMatmulHeuristicResult_t
  Algo algo;
  size_t workspaceSize;
  Status state;
  float wavesCount;
  int reserved[4];
};
static_assert(sizeof(Heuristic) == 96, "cublasLtMatmulHeuristicResult_t is 96 bytes");

}  // namespace lt_abi
}  // namespace nna
