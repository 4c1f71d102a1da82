// cublaslt_loader.h: cuBLASLt found at run time (like cuBLAS: never needed by the build), for
// the per-layer path's products with fused epilogues: bias and ReLU in the forward product, ReLU's
// derivative and the bias gradient in the error product, the bias gradient in the weight-gradient
// product (llm.c does the same for GELU; cuBLASLt's GELU epilogues do not give PyTorch's
// gelu-tanh, docs/cuda.md, "Fused epilogues", so nn-arena keeps its own pass there).
// A product takes this path only where cuBLASLt's heuristics offer an algorithm for its shape,
// types and epilogue; the caller otherwise runs the plain product and its own passes.
// Read per run (LayerRun): by default the forward products only (bias and ReLU in their
// epilogue; K models: batched, each model's bias); NN_ARENA_CUBLASLT=1 (or a path picking the
// library) every product with its epilogues (not faster: docs/cuda.md, "Fused epilogues");
// 0 none.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "cublas_loader.h"

namespace nna {

// cublasLtEpilogue_t values (checked against cublasLt.h by bench/micro/lt_abi_check.cc).
enum class LtEpilogue : uint32_t {
  None = 1,           // D = alpha op(A) op(B) + beta C
  Bias = 4,           // + bias (one per row of D)
  ReluBias = 6,       // relu(... + bias)
  ReluAuxBias = 134,  // relu(... + bias), and the bitmask of where it passed into aux
  DReluBGrad = 152,   // D = product * relu'(aux bitmask), bias = row sums of D
  BGradB = 512,       // bias = sums of op(B) over the product's k (its rows), D as None
};

// The type A and B are stored in: fp32, or a bf16 / fp16 run's 16-bit copies (cudaDataType_t
// values, checked by bench/micro/lt_abi_check.cc). C, D and the bias are fp32 either way.
enum class LtInputs : int { Fp32 = 0, Fp16 = 2, Bf16 = 14 };

// One product, column-major like cuBLAS: D = C = epilogue(alpha op(A) op(B) + beta C). FP32
// storage but for A and B (`inputs`); `tf32`: CUBLAS_COMPUTE_32F_FAST_TF32, else CUBLAS_COMPUTE_32F.
struct LtProduct {
  bool transA = false, transB = false;
  int m = 0, n = 0, k = 0;
  bool tf32 = false;
  LtInputs inputs = LtInputs::Fp32;
  const void* A = nullptr;
  int lda = 0;
  const void* B = nullptr;
  int ldb = 0;
  float* C = nullptr;
  int ldc = 0;
  float alpha = 1, beta = 0;
  const void* scalars = nullptr;  // alpha and beta from device memory (two floats), as blasGemm's
  LtEpilogue epilogue = LtEpilogue::None;
  void* bias = nullptr;  // read (Bias*), written (*BGrad*)
  void* aux = nullptr;   // written (*Aux*), read (D*)
  int64_t auxLd = 0;     // elements (bits for the relu mask: a multiple of 128)
  // Batched (K models): `batch` products, each operand `stride*` elements after the one before
  // (0: the same operand for all), the bias too.
  int batch = 1;
  int64_t strideA = 0, strideB = 0, strideC = 0, strideBias = 0;
};

// Whether cuBLASLt was found ("" when it was; else why not).
bool ltAvailable();
const std::string& ltStatus();

// Whether cuBLASLt has an algorithm for this product (shape, types, epilogue, the alignments of
// A, B and C; remembered per process), and the workspace it needs in `workspace`. Never where
// the bias or aux vector is not 16-byte aligned.
bool ltSupports(const LtProduct& p, size_t* workspace);
// The product on lane.stream with the remembered algorithm (ltSupports first); `work` of at least
// the bytes ltSupports gave. Throws Failure CUBLAS_ERROR on a failed call.
void ltMatmul(const Lane& lane, const LtProduct& p, void* work, size_t workBytes);

// The most workspace any product is offered (cuBLASLt's heuristics are asked with this cap).
constexpr size_t kLtMaxWorkspace = size_t(32) << 20;

}  // namespace nna
