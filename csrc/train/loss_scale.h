// loss_scale.h: dynamic loss scaling (precision 'fp16', precisions.h), PyTorch's GradScaler
// rule in one place for every backend. The loss's gradient d[L] is multiplied by `scale` before
// the backward products, so small gradients survive fp16's range; the update divides by it
// again (Hyper::gs). A step whose scaled gradients are not all finite is skipped (no update,
// the optimizer state untouched) and the scale multiplied by `backoff`; after `interval` finite
// steps in a row it is multiplied by `growth` (unless that overflows). The CUDA backend moves
// the same state on the device, step by step (clip_kernels.cuh lossScaleKernel).
#pragma once
#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define NNA_LOSS_SCALE_HD __host__ __device__
#else
#define NNA_LOSS_SCALE_HD
#endif

namespace nna {

struct LossScale {
  double scale = 0;  // the current scale; 0: the loss is not scaled
  double growth = 2, backoff = 0.5;
  uint64_t interval = 2000;
  uint64_t good = 0;     // finite steps since the scale last changed (GradScaler's growth tracker)
  uint64_t skipped = 0;  // steps skipped (a run counts its own)
  NNA_LOSS_SCALE_HD bool active() const { return scale > 0; }
  // After a step's gradients: whether they are applied (finite), the state moved on.
  NNA_LOSS_SCALE_HD bool afterStep(bool finite) {
    // The scale lives in float32, as GradScaler's tensor does: each move rounds the double
    // product to float, and growth happens only where that float is finite.
    if (!finite) {
      scale = double(float(scale * backoff));
      good = 0;
      ++skipped;
      return false;
    }
    if (++good >= interval) {
      const float next = float(scale * growth);
#ifdef __CUDA_ARCH__
      if (isfinite(next)) scale = next;
#else
      if (std::isfinite(next)) scale = next;
#endif
      good = 0;
    }
    return true;
  }
};

}  // namespace nna
