// device_probe.cu: see device_probe.h.
#include <cuda_runtime.h>

#include "../../csrc/cuda/check.cuh"
#include "../../csrc/include/nn_arena.h"
#include "device_probe.h"

namespace nna {

namespace {

__global__ void probeBindKernel(void* base, uint32_t numLayers, uint64_t* out) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  for (uint32_t l = 0; l < numLayers; ++l) {
    const nna_bound_layer<float> b = nna_bind<float>(base, l);
    float* p[NNA_KIND_COUNT] = {b.z, b.b, b.w, b.d, b.db, b.dw, b.mw, b.mb, b.vw, b.vb, b.y, b.xdata, b.ydata, b.stats};
    for (uint32_t k = 0; k < NNA_KIND_COUNT; ++k) out[l * NNA_KIND_COUNT + k] = p[k] ? (uint64_t)((char*)p[k] - (char*)base) : ~0ull;
  }
}

// The device that owns `p` (this addon's CUDA runtime shares the primary contexts with the library's).
void useOwner(const void* p) {
  cudaPointerAttributes a;
  CUDA_CHECK(cudaPointerGetAttributes(&a, p));
  if (a.device >= 0) CUDA_CHECK(cudaSetDevice(a.device));
}

}  // namespace

void probeBindOnDevice(void* base, uint32_t numLayers, uint64_t* out) {
  useOwner(base);
  const size_t n = size_t(numLayers) * NNA_KIND_COUNT * sizeof(uint64_t);
  uint64_t* dOut = nullptr;
  CUDA_CHECK(cudaMalloc(&dOut, n));
  try {
    probeBindKernel<<<1, 1>>>(base, numLayers, dOut);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(out, dOut, n, cudaMemcpyDeviceToHost));
  } catch (...) {
    cudaFree(dOut);
    throw;
  }
  CUDA_CHECK(cudaFree(dOut));
}

void copyFromDevice(void* dst, const void* src, size_t bytes) {
  useOwner(src);
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}

}  // namespace nna
