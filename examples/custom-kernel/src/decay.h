// decay.h: decoupled weight decay (as in AdamW), w <- (1 - rate) * w, over every weight region
// of an arena, found from its base address alone through nn-arena's public header. Biases are
// not decayed, as is usual.
#pragma once
#include <nn_arena.h>

#include <cstdint>

// The CPU function: `base` is host memory holding the arena (the host side, or the CPU
// backend's device side, which is host memory too). Returns the weights it scaled.
template <typename T> uint64_t decayWeightsOn(void* base, double rate) {
  const T keep = T(1.0 - rate);
  uint64_t n = 0;
  for (uint32_t l = 1; l < nna_header_of(base)->num_layers; ++l) {
    const nna_bound_layer<T> L = nna_bind<T>(base, l);
    const uint64_t count = L.units * L.fan_in;
    for (uint64_t i = 0; i < count; ++i) L.w[i] *= keep;
    n += count;
  }
  return n;
}

inline uint64_t decayHost(void* base, double rate) { return nna_header_of(base)->dtype == NNA_FLOAT64 ? decayWeightsOn<double>(base, rate) : decayWeightsOn<float>(base, rate); }

#if defined(WITH_CUDA)
// The same on the device side of a CUDA arena (decay.cu). Complete when it returns: the kernel
// runs on a stream of this module's own and is waited for. Returns "" or the CUDA error.
const char* decayDevice(void* deviceBase, double rate, uint64_t* weights);
#endif
