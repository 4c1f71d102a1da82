// decay.cu: the CUDA kernel of decay.h. One launch for the whole arena: every thread binds the
// layers from the device base pointer (nna_bind works in device code) and grid-strides over
// each layer's weights, so the host needs nothing of the layout but the dtype.
#include <cuda_runtime.h>

#include <vector>

#include "decay.h"

namespace {

template <typename T> __global__ void decayKernel(void* base, T keep) {
  const uint32_t layers = nna_header_of(base)->num_layers;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint32_t l = 1; l < layers; ++l) {
    const nna_bound_layer<T> L = nna_bind<T>(base, l);
    const uint64_t count = L.units * L.fan_in;
    for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) L.w[i] *= keep;
  }
}

}  // namespace

const char* decayDevice(void* deviceBase, double rate, uint64_t* weights) {
  // The header is at offset 0 of the device side too: the dtype and sizes come from there.
  nna_header h;
  cudaError_t e = cudaMemcpy(&h, deviceBase, sizeof h, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return cudaGetErrorString(e);
  std::vector<nna_layer> layers(h.num_layers);
  e = cudaMemcpy(layers.data(), static_cast<char*>(deviceBase) + h.layers_offset, sizeof(nna_layer) * h.num_layers, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return cudaGetErrorString(e);
  uint64_t n = 0;
  for (uint32_t l = 1; l < h.num_layers; ++l) n += layers[l].units * layers[l].fan_in;
  *weights = n;
  cudaStream_t s;
  if ((e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) != cudaSuccess) return cudaGetErrorString(e);
  if (h.dtype == NNA_FLOAT64)
    decayKernel<double><<<256, 256, 0, s>>>(deviceBase, 1.0 - rate);
  else
    decayKernel<float><<<256, 256, 0, s>>>(deviceBase, float(1.0 - rate));
  e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}
