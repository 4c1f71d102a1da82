// layer_hooks.h: where the per-layer path of a CUDA run lets a memory scheduler act. Each hook
// is called on the host, between launches, in the order the work is queued on `stream` (the
// run's compute stream); a scheduler may queue prefetches on a side stream and make the
// compute stream wait on them (events), or copy ranges in and out. Hooks must not change
// anything the kernels compute: a run with hooks gives bit-identical results.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../train/stage.h"

namespace nna {

struct LayerHooks {
  virtual ~LayerHooks() = default;
  virtual void beginRun(cudaStream_t stream, uint64_t steps) {}
  virtual void before(Stage phase, uint32_t layer, cudaStream_t stream) {}
  virtual void after(Stage phase, uint32_t layer, cudaStream_t stream) {}
  virtual void endStep(uint64_t step, cudaStream_t stream) {}
  // Called once the run's work is complete (stream synchronised), also after a failure.
  virtual void endRun(cudaStream_t stream) {}
  // Where region (layer, kind) is for the phase being launched, for launches that take
  // pointers (cuBLAS); null: at its offset from the run's base. A stager that moves regions
  // into a pool (staging.cu) rewrites the device header the kernels bind from, and says so here.
  virtual void* address(uint32_t layer, uint32_t kind) { return nullptr; }
};

}  // namespace nna
