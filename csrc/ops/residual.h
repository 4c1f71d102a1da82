// residual.h: the residual op: y = z[l-1] + z[from] element by element (element.h), its error
// passed to z[l-1] as it is; and the backward's rule for z[from]: dL/dz[k] takes the error d[r]
// of every residual layer r whose `from` is k (it added z[k] to its input), in layer order,
// before layer k's own f'. One rule for the CPU backend (cpu_ops.h) and the CUDA per-layer path.
#pragma once
#include <stdint.h>

#include <vector>

#include "../descriptors/host_device.h"
#include "../include/nn_arena.h"
#include "element_layer.h"

namespace nna::ops {

template <typename T> struct Residual {
  const T* from;  // z[from] of the rows (forward)
  NNA_FN explicit Residual(const ElementLayer<T>& e) : from(e.from) {}
  NNA_FN T forward(uint64_t, uint64_t, uint64_t i, T x) const { return x + from[i]; }
  NNA_FN T backward(uint64_t, uint64_t, uint64_t, T dy) const { return dy; }  // z[from]'s share: residualAdders
};

// The residual layers r of layers [0, count) that add z[k], in layer order: opOf(r) and fromOf(r)
// read layer r's op and its `from` (a residual layer adds an output at least two layers below).
template <typename OpOf, typename FromOf> std::vector<uint32_t> residualAdders(uint32_t count, uint32_t k, OpOf opOf, FromOf fromOf) {
  std::vector<uint32_t> adders;
  for (uint32_t r = k + 2; r < count; ++r)
    if (opOf(r) == NNA_OP_RESIDUAL && fromOf(r) == k) adders.push_back(r);
  return adders;
}

}  // namespace nna::ops
