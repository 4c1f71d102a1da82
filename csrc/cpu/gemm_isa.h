// gemm_isa.h: the per-ISA entry points behind gemm() (gemm.cc dispatches between them).
#pragma once
#include "gemm.h"

namespace nna {
namespace cpu {

void gemmPortable(const Gemm<float>& g, unsigned threads);
void gemmPortable(const Gemm<double>& g, unsigned threads);
void updatePortable(const Epilogue<float>& e, const float* g, size_t rows, size_t cols);
void updatePortable(const Epilogue<double>& e, const double* g, size_t rows, size_t cols);
double squaresPortable(const float* c, size_t rows, size_t cols);
double squaresPortable(const double* c, size_t rows, size_t cols);
#if defined(__x86_64__) && defined(__GNUC__)
#define NNA_X86_KERNELS 1
void gemmAvx2(const Gemm<float>& g, unsigned threads);
void gemmAvx2(const Gemm<double>& g, unsigned threads);
void gemmAvx512(const Gemm<float>& g, unsigned threads);
void gemmAvx512(const Gemm<double>& g, unsigned threads);
void updateAvx2(const Epilogue<float>& e, const float* g, size_t rows, size_t cols);
void updateAvx2(const Epilogue<double>& e, const double* g, size_t rows, size_t cols);
void updateAvx512(const Epilogue<float>& e, const float* g, size_t rows, size_t cols);
void updateAvx512(const Epilogue<double>& e, const double* g, size_t rows, size_t cols);
double squaresAvx2(const float* c, size_t rows, size_t cols);
double squaresAvx2(const double* c, size_t rows, size_t cols);
double squaresAvx512(const float* c, size_t rows, size_t cols);
double squaresAvx512(const double* c, size_t rows, size_t cols);
#endif
#if defined(__aarch64__) && defined(__GNUC__)
#define NNA_ARM_KERNELS 1
void gemmNeon(const Gemm<float>& g, unsigned threads);
void gemmNeon(const Gemm<double>& g, unsigned threads);
void updateNeon(const Epilogue<float>& e, const float* g, size_t rows, size_t cols);
void updateNeon(const Epilogue<double>& e, const double* g, size_t rows, size_t cols);
double squaresNeon(const float* c, size_t rows, size_t cols);
double squaresNeon(const double* c, size_t rows, size_t cols);
#endif

}  // namespace cpu
}  // namespace nna
