// dropout.h: the dropout op (inverted dropout, nn.Dropout in training mode): a kept unit is
// scaled by 1 / (1 - p), a dropped one is 0; runs that do not train pass x through. Which units
// are kept: nna_dropout_keep (nn_arena.h), counter-based on (seed, step, layer, row, column), so
// every backend drops the same units. Compiled for the host and the device.
#pragma once
#include <stdint.h>

#include "../descriptors/host_device.h"
#include "../include/nn_arena.h"
#include "element_layer.h"

namespace nna::ops {

// Which units of an element op's layer are kept (the ops that drop: dropout, alpha-dropout).
// `rowBase`: the group's row of the batch's row 0, so replicas draw distinct masks and a group
// drops what one GPU drops on the group's batch.
struct DropoutMask {
  uint64_t seed = 0, step = 0;
  uint32_t layer = 0, threshold = 0;
  uint64_t units = 0, rowBase = 0;
  template <typename T> NNA_FN static DropoutMask of(const ElementLayer<T>& e) { return DropoutMask{e.seed, e.step, e.layer, nna_dropout_threshold(e.value), e.units, e.rowBase}; }
  NNA_FN bool keep(uint64_t row, uint64_t col) const { return nna_dropout_keep(seed, step, layer, rowBase + row, col, units, threshold); }
};

// torch scales the Bernoulli noise by 1 / (1 - p) in the tensor's type.
template <typename T> NNA_FN T dropoutScale(double p) { return T(1) / T(1.0 - p); }

// The op element by element (element.h): forward y = x * scale where the unit is kept, else 0
// (the identity in a run that does not train); backward the same mask on the error.
template <typename T> struct Dropout {
  DropoutMask mask;
  T scale;
  bool train;
  NNA_FN explicit Dropout(const ElementLayer<T>& e) : mask(DropoutMask::of(e)), scale(dropoutScale<T>(e.value)), train(e.train) {}
  NNA_FN T forward(uint64_t row, uint64_t col, uint64_t, T x) const { return !train ? x : mask.keep(row, col) ? x * scale : T(0); }
  NNA_FN T backward(uint64_t row, uint64_t col, uint64_t, T dy) const { return mask.keep(row, col) ? dy * scale : T(0); }
};

}  // namespace nna::ops
