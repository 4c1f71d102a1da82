// host_device.h: NNA_FN (a function compiled for the host and, under nvcc, the device) and the
// float/double math wrappers that the descriptors and the activations share, defined once.
#pragma once
#include <math.h>

#ifndef NNA_FN
#if defined(__CUDACC__)
#define NNA_FN __host__ __device__ __forceinline__
#else
#define NNA_FN inline
#endif
#endif

// A loop the device compiler unrolls (a small array indexed by its counter stays in registers);
// nothing on the host.
#if defined(__CUDA_ARCH__)
#define NNA_UNROLL _Pragma("unroll")
#else
#define NNA_UNROLL
#endif

namespace nna {
NNA_FN float nsqrt(float x) { return sqrtf(x); }
NNA_FN double nsqrt(double x) { return sqrt(x); }
}  // namespace nna
