// precisions.h: one descriptor per product precision of a float32 run (RunParams::precision).
// Storage stays float32 in the arena in every mode (the weights are the fp32 masters); a
// precision says how the products read their operands and what that needs. The checks of
// check.cc, cpu_train.cc, cuda_train.cu / layer_run*.cuh and budget_run.cu read this table; nothing else lists
// the modes. Adding one: its code in Precision (train.h), its row here (TypeScript gets it from
// this row: scripts/gen-tables.cjs writes PRECISION_TABLE), and how its products run in
// layer_run_backward.cuh (LayerRun's product paths) and, where `cpu`, in the CPU GEMM (gemm_driver.h).
#pragma once
#include <cstdint>

namespace nna {

// X(id, code, name, compute capability major its tensor cores need (0: any GPU and the CPU),
//   workspace (its operands are copied into a run workspace beside the arena), needsBlas (its
//   products exist only through cuBLAS: no tiled kernel of its own), cpu (the CPU backend runs
//   it: fp32 natively, bf16 and fp16 emulated), cuda (the CUDA backend runs it), scaled (it
//   scales the loss dynamically: RunParams::lossScale), models (arenas of K > 1 models run it:
//   the products of every model at once; fp16's loss scale is one model's), what it runs on).
// bf16: bf16 operands rounded from the fp32 values (weights, activations, errors), fp32
// accumulation and fp32 results, as PyTorch's autocast runs a float32 model's products. The
// CPU's GEMM rounds its packed operands to bf16 the same way (round to nearest even): a product
// of two bf16 values is exact in fp32, so only the order of the sums differs from the GPU's.
// fp16: the same with fp16 roundings (5 exponent bits: beyond 65504 an operand is infinite), so
// the loss is scaled (d[L] times S) and a step whose gradients overflow is skipped, as PyTorch's
// GradScaler does (loss_scale.h; cpu_train.cc, layer_run_step.cuh). On CUDA its products read fp16
// copies, as bf16's read bf16 ones (run_buffers.cuh HalfCopies).
// TF32 is not emulated: how the tensor cores round an fp32 operand to TF32 is cuBLAS's choice.
// scripts/gen-tables.cjs reads this table into src/native/tables.generated.ts.
#define NNA_PRECISIONS(X)                                          \
  X(Fp32, 0, "fp32", 0, 0, 0, 1, 1, 0, 1, "FP32 units")            \
  X(Tf32, 1, "tf32", 8, 0, 0, 0, 1, 0, 0, "TF32 tensor cores")     \
  X(Tf32x3, 2, "tf32x3", 8, 1, 0, 0, 1, 0, 0, "TF32 tensor cores") \
  X(Bf16, 3, "bf16", 8, 1, 1, 1, 1, 0, 1, "BF16 tensor cores")     \
  X(Fp16, 4, "fp16", 7, 1, 1, 1, 1, 1, 0, "FP16 tensor cores")

#define NNA_PRECISION_ENUM(id, code, ...) id = code,
enum class Precision : uint32_t { NNA_PRECISIONS(NNA_PRECISION_ENUM) };
#undef NNA_PRECISION_ENUM

struct PrecisionInfo {
  Precision code;
  const char* name;
  int minMajor;
  bool workspace;
  bool needsBlas;
  bool cpu;
  bool cuda;
  bool scaled;
  bool models;
  const char* cores;
};

#define NNA_PRECISION_ROW(id, code, name, major, work, blas, cpu, cuda, scaled, models, cores) \
  {Precision::id, name, major, work != 0, blas != 0, cpu != 0, cuda != 0, scaled != 0, models != 0, cores},
inline constexpr PrecisionInfo kPrecisions[] = {NNA_PRECISIONS(NNA_PRECISION_ROW)};
#undef NNA_PRECISION_ROW

// The row of p, or null for a code no row has.
inline const PrecisionInfo* precisionInfo(Precision p) {
  for (const PrecisionInfo& r : kPrecisions)
    if (r.code == p) return &r;
  return nullptr;
}

}  // namespace nna
