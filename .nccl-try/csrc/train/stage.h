// stage.h: the kinds of phase a training step goes through, in launch order. The phase table
// (phases.h) plans from them and the CUDA per-layer path's hooks (csrc/cuda/layer_hooks.h) name
// them: one enum for both. No CUDA here, so the plan builds everywhere.
#pragma once
#include <cstdint>

namespace nna {

enum class Stage : uint32_t {
  Gather = 0,    // z[0] and y of the output layer from xdata / ydata (layer 0 and the last)
  Forward = 1,   // layer l: reads z[l-1], w[l], b[l]; writes z[l]
  Output = 2,    // last layer: reads z, y; writes z (softmax), d, stats
  Backward = 3,  // layer l: reads d[l], z[l-1], w[l]; writes dw, db, d[l-1]; then the update of
                 // layer l (w, b and its optimizer state)
};

const char* stageName(Stage s);  // phases.cc

}  // namespace nna
