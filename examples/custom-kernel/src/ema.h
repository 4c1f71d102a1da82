// ema.h: an exponential moving average of the weights, ema <- decay * ema + (1 - decay) * w, kept
// in a user region of the arena (planLayout({ ..., extra: [{ name: 'ema', like: 'w' }] })). The
// region is found BY NAME through nn-arena's public header (nna_extra_find), and each layer's
// part of it through nna_extra_ptr / nna_extra_elems: nothing but the base address is passed.
#pragma once
#include <nn_arena.h>

#include <cstdint>

// The user region `name` if it is shaped like the weights: its index, else -1 (absent) or -2
// (there, but not like: 'w'). `base` is host memory holding at least the header's tables.
inline int32_t emaRegion(const void* base, const char* name) {
  const int32_t i = nna_extra_find(base, name);
  if (i < 0) return -1;
  const nna_extra* e = nna_extra_at(base, uint32_t(i));
  return e->rule == NNA_EXTRA_PER_LAYER && e->like == NNA_W ? i : -2;
}

// One element; the two products and the sum are rounded as written (no fused multiply-add), so
// the CPU function and the CUDA kernel give the same bits.
template <typename T> inline T emaStep(T e, T w, T keep, T rest) { return keep * e + rest * w; }

// The CPU function on host memory holding the arena (its host side, or the CPU backend's device
// side). Returns the elements updated, or -1 / -2 as emaRegion.
template <typename T> int64_t emaUpdateOn(void* base, const char* name, double decay) {
  const int32_t i = emaRegion(base, name);
  if (i < 0) return i;
  const T keep = T(decay), rest = T(1) - keep;
  int64_t n = 0;
  for (uint32_t l = 0; l < nna_header_of(base)->num_layers; ++l) {
    T* e = static_cast<T*>(nna_extra_ptr(base, uint32_t(i), l));
    if (!e) continue;  // a layer without weights (the input layer), or left out by `layers`
    const T* w = static_cast<const T*>(nna_region_ptr(base, l, NNA_W));
    const uint64_t count = nna_extra_elems(base, uint32_t(i), l);  // == units * fan_in
    for (uint64_t k = 0; k < count; ++k) e[k] = emaStep(e[k], w[k], keep, rest);
    n += int64_t(count);
  }
  return n;
}

inline int64_t emaUpdateHost(void* base, const char* name, double decay) {
  return nna_header_of(base)->dtype == NNA_FLOAT64 ? emaUpdateOn<double>(base, name, decay) : emaUpdateOn<float>(base, name, decay);
}

#if defined(WITH_CUDA)
// The same on the device side of a CUDA arena (ema.cu): the host reads the header's tables back
// to find the region by name, the kernel binds it by index in device code. Complete when it
// returns. Returns "" or what failed; *updated as emaUpdateOn.
const char* emaUpdateDevice(void* deviceBase, const char* name, double decay, int64_t* updated);
#endif
