// jit-extras.ts: a JIT kernel that finds user regions BY NAME in device code through the public
// header (nna_extra_find / _ptr / _elems / _count / _name): it reads 'scale' (like b) and w and
// writes 'scaled' (like w, only in the layers planned with it), and marks in the global 'flags'
// (raw bytes) which layers it wrote. Compiled without a device by test/jit.test.ts, launched by
// test/gpu/jit.gpu.test.ts.
export const EXTRA_SRC = `#include <nn_arena.h>
extern "C" __global__ void scaleRows(void* base, unsigned int flagsIndex) {
  const int s = nna_extra_find(base, "scale"), d = nna_extra_find(base, "scaled");
  unsigned char* flags = (unsigned char*)nna_extra_ptr(base, flagsIndex, 0);
  const bool first = blockIdx.x == 0 && threadIdx.x == 0;
  if (s < 0 || d < 0 || !flags) return;
  const unsigned int layers = nna_header_of(base)->num_layers;
  for (unsigned int l = 0; l < layers; ++l) {
    const float* sc = (const float*)nna_extra_ptr(base, (unsigned int)s, l);
    float* out = (float*)nna_extra_ptr(base, (unsigned int)d, l);
    if (!sc || !out) continue;
    const float* w = (const float*)nna_region_ptr(base, l, NNA_W);
    const unsigned long long fanIn = nna_layer_of(base, l)->fan_in, n = nna_extra_elems(base, (unsigned int)d, l);
    for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
      out[i] = sc[i / fanIn] * w[i];
    if (first) flags[l] = 1;
  }
  if (first) {
    flags[14] = (unsigned char)nna_extra_name(base, (unsigned int)s)[0];
    flags[15] = (unsigned char)nna_extra_count(base);
  }
}
`;

/** The plan it runs on: 'scaled' only in layers 1 and 3; 'flags' global (16 bytes). */
export const EXTRA_SPEC = {
  layers: [40, 300, 10, 7],
  batch: 8,
  optimizer: 'momentum',
  extra: [
    { name: 'scale', like: 'b' },
    { name: 'flags', bytes: 16 },
    { name: 'scaled', like: 'w', layers: [1, 3] },
  ],
} as const;
