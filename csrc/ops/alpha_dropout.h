// alpha_dropout.h: the alpha-dropout op (nn.AlphaDropout in training mode, for self-normalizing
// networks): a kept unit becomes x a + alpha a p, a dropped one alpha a (p - 1), so that the mean
// and variance of SELU activations are kept, with a = 1 / sqrt((alpha^2 p + 1)(1 - p)) and ATen's
// alpha; the mask is dropout's (dropout.h: nna_dropout_keep). The arithmetic is ATen's
// (_dropout_impl): x (keep a) + ((keep - 1) alpha a + alpha a p), so a dropped unit of a
// non-finite x stays non-finite; the backward is dy (keep a). Runs that do not train pass x
// through. Compiled for the host and the device.
#pragma once
#include <stdint.h>

#include "../descriptors/host_device.h"
#include "../include/nn_arena.h"
#include "dropout.h"
#include "element_layer.h"

namespace nna::ops {

template <typename T> struct AlphaDropout {
  static constexpr double kAlpha = 1.7580993408473766;  // ATen's: SELU's scale times its alpha
  DropoutMask mask;
  T a, kept, dropped;  // a; keep's shift alpha a p; a dropped unit's shift (0 - 1) alpha a + alpha a p
  bool train;
  NNA_FN explicit AlphaDropout(const ElementLayer<T>& e) : mask(DropoutMask::of(e)), train(e.train) {
    const double p = e.value, ad = 1.0 / nsqrt((kAlpha * kAlpha * p + 1) * (1 - p));
    a = T(ad);
    kept = T(0) * T(kAlpha * ad) + T(kAlpha * ad * p);
    dropped = T(-1) * T(kAlpha * ad) + T(kAlpha * ad * p);
  }
  NNA_FN T forward(uint64_t row, uint64_t col, uint64_t, T x) const {
    if (!train) return x;
    const bool k = mask.keep(row, col);
    return x * (k ? a : T(0)) + (k ? kept : dropped);
  }
  NNA_FN T backward(uint64_t row, uint64_t col, uint64_t, T dy) const { return dy * (mask.keep(row, col) ? a : T(0)); }
};

}  // namespace nna::ops
