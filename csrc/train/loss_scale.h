// loss_scale.h: dynamic loss scaling (precision 'fp16', precisions.h), PyTorch's GradScaler
// rule in one place for every backend. The loss's gradient d[L] is multiplied by `scale` before
// the backward products, so small gradients survive fp16's range; the update divides by it
// again (Hyper::gs). A step whose scaled gradients are not all finite is skipped (no update,
// the optimizer state untouched) and the scale multiplied by `backoff`; after `interval` finite
// steps in a row it is multiplied by `growth` (unless that overflows).
#pragma once
#include <cmath>
#include <cstdint>

namespace nna {

struct LossScale {
  double scale = 0;  // the current scale; 0: the loss is not scaled
  double growth = 2, backoff = 0.5;
  uint64_t interval = 2000;
  uint64_t good = 0;     // finite steps since the scale last changed (GradScaler's growth tracker)
  uint64_t skipped = 0;  // steps skipped (a run counts its own)
  bool active() const { return scale > 0; }
  // After a step's gradients: whether they are applied (finite), the state moved on.
  bool afterStep(bool finite) {
    if (!finite) {
      scale *= backoff;
      good = 0;
      ++skipped;
      return false;
    }
    if (++good >= interval) {
      if (std::isfinite(scale * growth)) scale *= growth;
      good = 0;
    }
    return true;
  }
};

}  // namespace nna
