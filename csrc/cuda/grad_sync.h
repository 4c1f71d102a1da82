// grad_sync.h: how the per-layer path of a CUDA run hands its gradients to a data-parallel
// group (csrc/nccl/ implements it over NCCL). The run calls it on the host, between launches:
// after the backward of each layer, whose db and dw are then queued on `compute`; the sync
// reduces them over the group (on a stream of its own, after an event, so that the reduction
// overlaps the backward of the layers below) and then queues the optimizer steps of the layers
// that reduction completed through `update`, in one launch, on the stream that reduced them.
// With a sync the run never folds the SGD step into the weight-gradient product: the step must
// see the group's gradient.
// The run hands a layer over as soon as its gradients are queued: where the sync overlaps
// (NcclSync), the weight-gradient product of a layer above the first runs before its error
// product, and where it asks (NN_ARENA_SYNC_SLICE) a large first layer's product is cut into
// slices (by units), each handed over as it is queued.
// A sync that allows graphs (graphs()) takes part in the run's step graph (step_graph.cuh): in
// a direct or captured step its calls queue their work (a capture takes the all-reduces and the
// other streams' waits into the graph); in a replayed step (launching(Launch::Replay)) they only
// keep count, the graph launch doing the work. After each step's launch, whichever way, the run calls
// stepLaunched.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>

namespace nna {

struct GradSync {
  // The optimizer steps of `count` layers (one launch for all, where they fit one).
  using Update = std::function<void(const uint32_t* layers, size_t count, cudaStream_t stream)>;
  virtual ~GradSync() = default;
  virtual void beginRun(cudaStream_t compute, bool resetStats) {}
  // Whether the run queues a layer's weight-gradient product before its error product and hands
  // the layer over between them (one rule for the sync and the run: NN_ARENA_SYNC_OVERLAP).
  virtual bool early() const { return false; }
  // How many slices the run may cut layer `layer`'s weight-gradient product into (sliceUnits),
  // calling sliceReady after each; 1: whole. A run that cannot slice a product (other paths)
  // queues it whole: gradientsReady then reduces whatever no slice did.
  virtual uint32_t slices(uint32_t layer) const { return 1; }
  virtual void sliceReady(uint32_t layer, uint32_t slice, cudaStream_t compute) {}
  // Layer `layer`'s gradients are queued on `compute`; `update` (empty for a grad run) queues
  // its optimizer step once the group's gradients are in place. Handed over early, the layer's
  // weights are still to be read by its error product: the run passes no update here and
  // calls weightsFree once that product is queued.
  virtual void gradientsReady(uint32_t layer, cudaStream_t compute, const Update& update) = 0;
  virtual void weightsFree(uint32_t layer, cudaStream_t compute, const Update& update) {}
  // End of a step's launches: `compute` waits for everything the sync queued elsewhere (the next
  // step's forward reads the updated weights).
  virtual void endStep(cudaStream_t compute) = 0;
  // Whether the run may capture its steps with the sync's work in them, and replay them.
  virtual bool graphs() const { return false; }
  // Whether the run may capture its next step: NCCL sets up an algorithm's connections on the
  // first collective that uses it, which faults when that collective is captured, so a step
  // is captured only once a step with the same collectives ran directly on the communicator.
  virtual bool capturable() const { return true; }
  // How the step now launched goes (step_graph.cuh): directly, captured, or replayed (the sync's
  // calls then queue nothing, the graph launch doing the work).
  enum class Launch { Direct, Capture, Replay };
  virtual void launching(Launch how) {}
  // The step's work is queued on `compute` (launched directly, or as a graph).
  virtual void stepLaunched(cudaStream_t compute) {}
  // The graph that holds the sync's collectives, and how to destroy it: NCCL's abort and
  // destroy wait until no graph names the communicator, so a failed group destroys it first.
  virtual void graphOwner(std::function<void()> release) {}
  // End of the run's launches: the stats region becomes the group's (sums; the first bad step).
  virtual void endRun(cudaStream_t compute) = 0;
  // A launch failed part-way: the peers must not wait forever for this replica.
  virtual void abort() {}
  // This replica's rank in the group: its rows of a step are the group's rows [rank x batch,
  // (rank + 1) x batch) (dropout draws its masks by the group's row, not the replica's).
  virtual uint64_t rank() const { return 0; }
};

// The first unit of slice `j` of `slices` of a layer of `units` units (slice j: [start(j), start(j+1))).
inline uint64_t sliceUnits(uint64_t units, uint32_t slices, uint32_t j) { return units * j / slices; }

}  // namespace nna
