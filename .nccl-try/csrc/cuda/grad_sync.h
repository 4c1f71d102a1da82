// grad_sync.h: how the per-layer path of a CUDA run hands its gradients to a data-parallel
// group (csrc/nccl/ implements it over NCCL). The run calls it on the host, between launches:
// after the backward of each layer, whose db and dw are then queued on `compute`; the sync
// reduces them over the group (on a stream of its own, after an event, so that the reduction
// overlaps the backward of the layers below) and then queues that layer's optimizer step
// through `update` on the stream that reduced them. With a sync the run never folds the SGD
// step into the weight-gradient product: the step must see the group's gradient.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

namespace nna {

struct GradSync {
  using Update = std::function<void(uint32_t layer, cudaStream_t stream)>;
  virtual ~GradSync() = default;
  virtual void beginRun(cudaStream_t compute, bool resetStats) {}
  // Layer `layer`'s gradients are queued on `compute`; `update` (empty for a grad run) queues
  // its optimizer step once the group's gradients are in place.
  virtual void gradientsReady(uint32_t layer, cudaStream_t compute, const Update& update) = 0;
  // End of a step: `compute` waits for everything the sync queued elsewhere (the next step's
  // forward reads the updated weights).
  virtual void endStep(cudaStream_t compute) = 0;
  // End of the run's launches: the stats region becomes the group's (sums; the first bad step).
  virtual void endRun(cudaStream_t compute) = 0;
  // A launch failed part-way: the peers must not wait forever for this replica.
  virtual void abort() {}
};

}  // namespace nna
