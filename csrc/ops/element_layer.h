// element_layer.h: what an op that acts element by element (element.h) is built from, read once
// per launch or per CPU call from the bound layer: its parameter, the run's dropout counters,
// and z[from] where the op adds an earlier layer. Compiled for the host and the device.
#pragma once
#include <stdint.h>

#include "../descriptors/host_device.h"

namespace nna::ops {

template <typename T> struct ElementLayer {
  uint32_t layer = 0;
  uint64_t units = 0;
  double value = 0;         // the op parameter table's value (dropout's p)
  const T* from = nullptr;  // z[from] (a residual's forward), else null
  bool train = false;       // a training run (dropout drops)
  uint64_t seed = 0, step = 0;
  uint64_t rowBase = 0;  // the batch's first row in the step's rows (a data-parallel replica's share)
};

}  // namespace nna::ops
