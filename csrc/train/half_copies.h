// half_copies.h: where a bf16 / fp16 run keeps the 16-bit copies of its products' operands
// beside the arena (HalfCopies, csrc/cuda/run_buffers.cuh, allocates by it; the addon's
// halfCopyBytes reports it), in elements: z[0..L-1], then each layer's w and its own d (a layer's
// weight-gradient product may still read its d while the error products below it run), at the
// batch, each copy 128-byte aligned (64 elements). A region K models each keep has K copies.
#pragma once
#include <stdint.h>

#include <vector>

#include "../include/nn_arena.h"

namespace nna {

struct HalfCopyAt {
  uint64_t at = 0;      // first element
  uint64_t stride = 0;  // elements between the models' copies (0: one copy)
};

struct HalfCopiesLayout {
  std::vector<HalfCopyAt> z, w, d;  // z[0..L-1]; w[1..L], d[1..L] (index 0 unused)
  uint64_t total = 0;               // elements
};

// `copies(l, kind)`: how many copies region (l, kind) has (K, or 1 where the models share it).
template <typename Copies> HalfCopiesLayout halfCopiesLayout(const nna_header& h, const std::vector<nna_layer>& L, Copies copies) {
  HalfCopiesLayout out;
  const uint32_t last = h.num_layers - 1;
  auto take = [&](uint64_t n, unsigned k) {
    const uint64_t each = (n + 63) / 64 * 64;
    const HalfCopyAt c{out.total, k > 1 ? each : 0};
    out.total += each * k;
    return c;
  };
  out.z.assign(last, {});
  out.w.assign(last + 1, {});
  out.d.assign(last + 1, {});
  for (uint32_t l = 0; l < last; ++l) out.z[l] = take(h.batch * L[l].units, copies(l, NNA_Z));
  for (uint32_t l = 1; l <= last; ++l) {
    out.w[l] = take(L[l].op == NNA_OP_DENSE ? uint64_t(L[l].units) * L[l].fan_in : 0, copies(l, NNA_W));  // an op's gain is read in fp32
    out.d[l] = take(h.batch * L[l].units, copies(l, NNA_D));
  }
  return out;
}

// The layout of a header's copies: a region each model keeps (nna_kind_per_model) has K.
inline HalfCopiesLayout halfCopiesLayout(const nna_header& h, const std::vector<nna_layer>& L) {
  const uint32_t k = uint32_t(nna_models(&h));
  return halfCopiesLayout(h, L, [&](uint32_t l, uint32_t kind) { return k > 1 && nna_kind_per_model(&h, l, kind) ? k : 1u; });
}

}  // namespace nna
