// tf32_kernels.cuh: the TF32 modes of the per-layer path's products (RunParams::precision).
//   - tf32Round / splitKernel: x = big + small with big = x rounded to TF32 (10 mantissa bits,
//     nearest, ties away: what cvt.rna.tf32.f32 gives) and small = (x - big) rounded to TF32. With
//     cuBLAS, tf32x3 runs A.B as As.Bb + Ab.Bs + Ab.Bb, three TF32 products of split copies (the
//     dropped As.Bs is below 2^-22 of |A||B|: FP32-level, as CUTLASS's 3xTF32).
//   - tcGemmKernel: nn-arena's own tensor-core product (mma.sync m16n8k8 TF32), for the TF32
//     modes where cuBLAS is absent or NN_ARENA_GEMM=tiled: the tiles and epilogue of gemmKernel,
//     the split done in registers (no workspace). Compute capability 8.0+ (the host checks).
#pragma once
#include <cstdint>
#include <cstring>

#include "layer_kernels.cuh"

namespace nna {

// x rounded to TF32, in FP32 format (low 13 bits zero): round to nearest on the magnitude, ties
// away from zero, as cvt.rna.tf32.f32 (a carry into the exponent is the correct next binade).
// Inf and NaN pass unchanged. Plain bit arithmetic: the same result on every architecture.
__host__ __device__ inline float tf32Round(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  float r;
  memcpy(&r, &u, 4);
  return r;
}

// big[i] = tf32Round(x[i]), small[i] = tf32Round(x[i] - big[i]), i < n (as the mma kernel splits in registers).
static __global__ void splitKernel(const float* x, float* big, float* small, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const float v = x[i], b = tf32Round(v);
    big[i] = b;
    small[i] = tf32Round(v - b);  // rounded here: the tensor cores would truncate it (a bias that training accumulates)
  }
}

// D += A.B for one m16n8k8 TF32 tile; a and b hold TF32 values (FP32 bits, low 13 bits zero).
__device__ __forceinline__ void mmaTf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();  // never launched below sm_80 (runCuda refuses the TF32 modes there)
#endif
}

// The big and small TF32 parts of x, as mma operands.
__device__ __forceinline__ void splitBits(float x, uint32_t& big, uint32_t& small) {
  const float b = tf32Round(x);
  big = __float_as_uint(b);
  small = __float_as_uint(tf32Round(x - b));
}

// The tiled product of MODE on tensor cores: a 64 x 64 tile of C per block of 8 warps, warp w
// owning rows 16 * (w / 2) .. +16 and columns 32 * (w % 2) .. +32 (four m16n8 tiles). X3: each
// operand split into big + small in registers and As.Bb + Ab.Bs + Ab.Bb accumulated (small
// terms first); else one TF32 product. The accumulators go through shared memory into
// gemmKernel's thread layout, so that storeTile (the same epilogue, SGD fold included) writes them.
constexpr int kTcTile = 64;

// `fold` (SGD training, kWeightGrad): w -= lr * sum in the epilogue and no dw written, as
// gemmKernel (a compact SGD arena has no dw). One model only (check.cc refuses TF32 for K > 1).
template <int MODE, bool X3> __global__ void __launch_bounds__(256) tcGemmKernel(void* base, uint32_t l, uint64_t rows, bool fold, Hyper<float> hp) {
  constexpr int T = kTcTile, LD = T + 8;  // +8: the fragment loads hit 32 different banks
  constexpr int TM = T / 16;
  const LayerProduct<float, MODE> g(base, l, rows);
  __shared__ float As[BK][LD];
  __shared__ float Bs[BK][LD];
  __shared__ float Cs[T][T + 1];
  const uint64_t bm = uint64_t(blockIdx.y) * T, bn = uint64_t(blockIdx.x) * T;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const int r0 = 16 * (warp / 2), c0 = 32 * (warp % 2);
  float acc[4][4] = {};
  for (uint64_t k0 = 0; k0 < g.K; k0 += BK) {
    g.template loadSlices<T, T, LD>(As, Bs, bm, bn, k0);
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < BK; ks += 8) {
      const float av[4] = {As[ks + tig][r0 + gid], As[ks + tig][r0 + gid + 8], As[ks + tig + 4][r0 + gid], As[ks + tig + 4][r0 + gid + 8]};
      uint32_t ab[4], as[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (X3)
          splitBits(av[i], ab[i], as[i]);
        else
          ab[i] = __float_as_uint(tf32Round(av[i]));
      }
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const int c = c0 + 8 * t + gid;
        const float bv[2] = {Bs[ks + tig][c], Bs[ks + tig + 4][c]};
        uint32_t bb[2], bs[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          if (X3)
            splitBits(bv[i], bb[i], bs[i]);
          else
            bb[i] = __float_as_uint(tf32Round(bv[i]));
        }
        if (X3) {
          mmaTf32(acc[t], as, bb);
          mmaTf32(acc[t], ab, bs);
        }
        mmaTf32(acc[t], ab, bb);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int t = 0; t < 4; ++t)
#pragma unroll
    for (int q = 0; q < 4; ++q) Cs[r0 + gid + 8 * (q / 2)][c0 + 8 * t + 2 * tig + q % 2] = acc[t][q];
  __syncthreads();
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float out[TM][TM];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TM; ++j) out[i][j] = Cs[ty * TM + i][tx * TM + j];
  storeTile<MODE>(out, g.C, g.P, bm, bn, g.M, g.N, tx, ty, !fold, [&](uint64_t e, float v) {
    if (fold) updateParam<float>(NNA_SGD, g.C.w + e, v, nullptr, nullptr, hp);
  });
}

}  // namespace nna
