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

namespace nna {
NNA_FN float nsqrt(float x) { return sqrtf(x); }
NNA_FN double nsqrt(double x) { return sqrt(x); }
}  // namespace nna
