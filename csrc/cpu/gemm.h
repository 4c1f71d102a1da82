// gemm.h: C = alpha * op(A) op(B) + beta * C for the CPU backend (row-major, float and double),
// packed and cache-blocked with register-blocked micro-kernels picked at run time by CPU
// features. Independent of Node, so bench/cpu and the tests link it alone.
#pragma once
#include <cstddef>
#include <cstdint>

#include "../descriptors/optimizers.h"

namespace nna {
namespace cpu {

enum class Isa : uint32_t { Portable = 0, Avx2 = 1, Avx512 = 2, Neon = 3 };

// What happens to a tile of C once its last K block is in (the tile is then in L1):
//   BiasAct:  c = act(c + bias[j]), and pre = c + bias[j] where pre is set
//             (forward: z = act(x W^T + b); activations.h says which keep their pre-activation)
//   ActGrad:  c *= act'(z[i * ldz + j])                 (backward: d_{l-1} = (d W) * act'(z_{l-1});
//             z: the pre-activations where the activation keeps them, else the outputs)
//   Update:   optimizer step of w, m, v at c's index from the gradient c (any optimizer)
//   Squares:  c unchanged; the tile's sum of squares (in double) into its slot of `squares`
//             (a clipping step's global norm, taken while the gradient tile is in L1)
enum class Epi : uint32_t { None = 0, BiasAct = 1, ActGrad = 2, Update = 3, Squares = 4 };

// The precisions 'bf16' and 'fp16' (precisions.h): the operands a product reads, rounded to
// nearest (ties to even) from float.
enum class Round : uint32_t { None = 0, Bf16 = 1, Fp16 = 2 };

template <typename T> struct Epilogue {
  Epi kind = Epi::None;
  uint32_t act = 0;         // nna_activation (BiasAct, ActGrad)
  T param = 0;              // BiasAct, ActGrad: the header's act_param
  const T* bias = nullptr;  // BiasAct
  T* pre = nullptr;         // BiasAct: where the pre-activations go (same leading dimension as C), or null
  const T* z = nullptr;     // ActGrad
  size_t ldz = 0;
  uint32_t optimizer = 0;  // Update: nna_optimizer
  T* w = nullptr;          // Update: parameters, same shape and leading dimension as C
  T* m = nullptr;
  T* v = nullptr;
  Hyper<T> h{};               // Update: the step's hyperparameters (optimizers.h)
  double* squares = nullptr;  // Squares: squareSlots(m, n) slots, zeroed by the caller; the tile at
                              // (i0, j0) writes slot (i0 / MR) * ceil(n / NR) + j0 / NR
};

// Slots a Squares epilogue may write for an m x n C on any ISA (every micro-tile is >= 4 x 4).
inline size_t squareSlots(size_t m, size_t n) { return ((m + 3) / 4) * ((n + 3) / 4); }

// The total of a Squares epilogue's slots, added in slot order (unwritten slots add 0 exactly).
inline double squaresTotal(const double* slots, size_t n) {
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += slots[i];
  return total;
}

template <typename T> struct Gemm {
  bool transA = false, transB = false;  // op(A) is m x k: A[i*lda+p], or A[p*lda+i] when transA
  size_t m = 0, n = 0, k = 0;           // op(B) is k x n: B[p*ldb+j], or B[j*ldb+p] when transB
  T alpha = 1;
  const T* a = nullptr;
  size_t lda = 0;
  const T* b = nullptr;
  size_t ldb = 0;
  T beta = 0;  // 0: C is not read (may hold anything)
  T* c = nullptr;
  size_t ldc = 0;
  Epilogue<T> ep;
  Round round = Round::None;  // float only: op(A) and op(B) read as their roundings
};

// The best ISA this CPU runs, and the one in use: NN_ARENA_CPU_ISA=portable|avx2|avx512|neon
// lowers it (never above what the CPU has). Levels: portable 0; avx2 and neon 1; avx512 2 (so
// a cap of avx2 on AArch64 means neon, and neon on x86-64 means avx2).
Isa detectedIsa();
Isa activeIsa();
const char* isaName(Isa isa);
// Whether gemm(g, isa) runs isa itself here (not a lower one).
bool isaRuns(Isa isa);
// The best ISA this CPU runs at or below want's level.
Isa capIsa(Isa want);

// Runs g on up to `threads` threads of the shared pool (0: all of it). The K dimension is never
// split and every element sums its K blocks in one fixed order, so the result does not depend
// on the thread count or timing; it does depend on the ISA (FMA vs separate multiply and add).
void gemm(const Gemm<float>& g, Isa isa, unsigned threads = 0);
void gemm(const Gemm<double>& g, Isa isa, unsigned threads = 0);
template <typename T> void gemm(const Gemm<T>& g) { gemm(g, activeIsa(), 0); }

// The optimizer step of a rows x cols parameter matrix (row-major, leading dimension cols) from
// its gradient g, with e.w / e.m / e.v and the hyper-parameters of e (kind Update): the code and
// column tiling of the Update epilogue of the active ISA, so that it gives the bits a training
// product's epilogue gives from the same gradient. Rows are split over the pool.
void update(const Epilogue<float>& e, const float* g, size_t rows, size_t cols);
void update(const Epilogue<double>& e, const double* g, size_t rows, size_t cols);

// The sum of squares of a rows x cols matrix (leading dimension cols) as the active ISA's Squares
// epilogue takes it, tile by tile, totalled in slot order: the bits of squaresTotal over the
// slots a product's Squares epilogue writes for the same matrix.
double squares(const float* c, size_t rows, size_t cols);
double squares(const double* c, size_t rows, size_t cols);

}  // namespace cpu
}  // namespace nna
