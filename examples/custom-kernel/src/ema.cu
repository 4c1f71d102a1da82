// ema.cu: the CUDA kernel of ema.h. The host copies the header's tables (header_bytes) back and
// finds the region by name there; every thread then binds it by index from the device base
// (nna_extra_ptr, nna_extra_elems and nna_region_ptr work in device code) and grid-strides over
// each layer's part.
#include <cuda_runtime.h>

#include <vector>

#include "ema.h"

namespace {

// Rounded as written on the device too (nvcc would otherwise fuse a multiply-add).
__device__ inline float emaStepDevice(float e, float w, float keep, float rest) { return __fadd_rn(__fmul_rn(keep, e), __fmul_rn(rest, w)); }
__device__ inline double emaStepDevice(double e, double w, double keep, double rest) { return __dadd_rn(__dmul_rn(keep, e), __dmul_rn(rest, w)); }

template <typename T> __global__ void emaKernel(void* base, uint32_t index, T keep, T rest) {
  const uint32_t layers = nna_header_of(base)->num_layers;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint32_t l = 0; l < layers; ++l) {
    T* e = static_cast<T*>(nna_extra_ptr(base, index, l));
    if (!e) continue;
    const T* w = static_cast<const T*>(nna_region_ptr(base, l, NNA_W));
    const uint64_t count = nna_extra_elems(base, index, l);
    for (uint64_t k = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < count; k += stride) e[k] = emaStepDevice(e[k], w[k], keep, rest);
  }
}

}  // namespace

const char* emaUpdateDevice(void* deviceBase, const char* name, double decay, int64_t* updated) {
  nna_header h;
  cudaError_t err = cudaMemcpy(&h, deviceBase, sizeof h, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  std::vector<char> tables(h.header_bytes);  // header, layer table, kind table
  err = cudaMemcpy(tables.data(), deviceBase, tables.size(), cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  const int32_t i = emaRegion(tables.data(), name);
  if (i < 0) {
    *updated = i;
    return "";
  }
  int64_t n = 0;
  for (uint32_t l = 0; l < h.num_layers; ++l) n += int64_t(nna_extra_elems(tables.data(), uint32_t(i), l));
  *updated = n;
  cudaStream_t s;
  if ((err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) != cudaSuccess) return cudaGetErrorString(err);
  if (h.dtype == NNA_FLOAT64)
    emaKernel<double><<<256, 256, 0, s>>>(deviceBase, uint32_t(i), decay, 1.0 - decay);
  else
    emaKernel<float><<<256, 256, 0, s>>>(deviceBase, uint32_t(i), float(decay), 1.0f - float(decay));
  err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  return err == cudaSuccess ? "" : cudaGetErrorString(err);
}
