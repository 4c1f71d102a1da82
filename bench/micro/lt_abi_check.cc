// lt_abi_check.cc: cublaslt_abi.h and LtEpilogue (cublaslt_loader.h) against cublasLt.h, on a
// machine that has the header (the GPU machine):
//   g++ -std=c++17 -I/usr/local/cuda/include bench/micro/lt_abi_check.cc -o /tmp/lt_abi && /tmp/lt_abi
// It compiles only where every number and struct matches.
#include <cublasLt.h>

#include <cstdio>

#include "../../csrc/cuda/cublaslt_abi.h"
#include "../../csrc/cuda/cublaslt_loader.h"

using namespace nna;
using namespace nna::lt_abi;
static_assert(int(LtInputs::Fp32) == CUDA_R_32F && int(LtInputs::Fp16) == CUDA_R_16F && int(LtInputs::Bf16) == CUDA_R_16BF, "LtInputs");
static_assert(kR32F == CUDA_R_32F && kCompute32F == CUBLAS_COMPUTE_32F && kComputeFastTf32 == CUBLAS_COMPUTE_32F_FAST_TF32, "types");
static_assert(kDescPointerMode == CUBLASLT_MATMUL_DESC_POINTER_MODE && kDescTransA == CUBLASLT_MATMUL_DESC_TRANSA && kDescTransB == CUBLASLT_MATMUL_DESC_TRANSB &&
                  kDescEpilogue == CUBLASLT_MATMUL_DESC_EPILOGUE && kDescBias == CUBLASLT_MATMUL_DESC_BIAS_POINTER && kDescAux == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER &&
                  kDescAuxLd == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
              "matmul descriptor attributes");
static_assert(kDescBiasBatchStride == CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE && kLayoutBatchCount == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT &&
                  kLayoutBatchStride == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
              "batched products");
static_assert(kPrefMinAlignA == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES && kPrefMinAlignA + 1 == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES &&
                  kPrefMinAlignA + 2 == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES && kPrefMinAlignA + 3 == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
              "alignment preferences");
static_assert(kPrefMaxWorkspace == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && kPointerDevice == CUBLASLT_POINTER_MODE_DEVICE, "preference, pointer mode");
static_assert(sizeof(Algo) == sizeof(cublasLtMatmulAlgo_t) && sizeof(Heuristic) == sizeof(cublasLtMatmulHeuristicResult_t) &&
                  offsetof(Heuristic, workspaceSize) == offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize) &&
                  offsetof(Heuristic, state) == offsetof(cublasLtMatmulHeuristicResult_t, state),
              "structs");
static_assert(uint32_t(LtEpilogue::None) == CUBLASLT_EPILOGUE_DEFAULT && uint32_t(LtEpilogue::Bias) == CUBLASLT_EPILOGUE_BIAS &&
                  uint32_t(LtEpilogue::ReluBias) == CUBLASLT_EPILOGUE_RELU_BIAS && uint32_t(LtEpilogue::ReluAuxBias) == CUBLASLT_EPILOGUE_RELU_AUX_BIAS &&
                  uint32_t(LtEpilogue::DReluBGrad) == CUBLASLT_EPILOGUE_DRELU_BGRAD && uint32_t(LtEpilogue::BGradB) == CUBLASLT_EPILOGUE_BGRADB,
              "epilogues");

int main() {
  std::printf("cublasLt ABI: every number and struct of nn-arena's declarations matches cublasLt.h\n");
  return 0;
}
