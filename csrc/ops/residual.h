// residual.h: the residual op's rule for the backward: dL/dz[k] takes the error d[r] of every
// residual layer r whose `from` is k (it added z[k] to its input), in layer order, before layer
// k's own f'. One rule for the CPU backend (cpu_ops.h) and the CUDA per-layer path.
#pragma once
#include <stdint.h>

#include <vector>

#include "../include/nn_arena.h"

namespace nna::ops {

// The residual layers r of layers [0, count) that add z[k], in layer order: opOf(r) and fromOf(r)
// read layer r's op and its `from` (a residual layer adds an output at least two layers below).
template <typename OpOf, typename FromOf> std::vector<uint32_t> residualAdders(uint32_t count, uint32_t k, OpOf opOf, FromOf fromOf) {
  std::vector<uint32_t> adders;
  for (uint32_t r = k + 2; r < count; ++r)
    if (opOf(r) == NNA_OP_RESIDUAL && fromOf(r) == k) adders.push_back(r);
  return adders;
}

}  // namespace nna::ops
