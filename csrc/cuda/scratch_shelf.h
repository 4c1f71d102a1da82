// scratch_shelf.h: the device buffers a CUDA run keeps beside the arena (run_buffers.cuh's, the
// fused kernel's clipping scratch, a fed predict's device slots: run_feed.cuh), by slot.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "check.cuh"

namespace nna {

// Where a CUDA run's buffers beside the arena get their bytes. An arena's shelf lives in its run
// cache (run_cache.cuh, beside the step graph): the next run takes the same bytes back, so a run
// allocates nothing, and a kept graph's addresses still hold. Allocating per run left the GPU
// idle at every run (the stream-ordered pool gave its memory back to the driver at every sync).
// The cache frees them (dispose(), or a run on another lane). A run without the cache (a memory
// scheduler's, whose budget counts the arena alone) has a shelf of its own that goes with it.
class ScratchShelf {
 public:
  enum Slot : unsigned { kTf32, kHalf, kLt, kLossScale, kFold, kScaledD, kClip, kFusedClip, kOps, kFeed, kBiasSums, kSlots };
  ScratchShelf() = default;
  ScratchShelf(const ScratchShelf&) = delete;
  ScratchShelf& operator=(const ScratchShelf&) = delete;
  // cudaFree waits for the device: nothing in flight still reads the bytes.
  ~ScratchShelf() {
    for (Held& h : held_) {
      if (!h.p) continue;
      DeviceScope scope(h.device, std::nothrow);
      cudaFree(h.p);
    }
  }
  // At least `bytes` for `slot` on the current device: the bytes kept there if they are enough.
  // `fresh`: set where the bytes are new (their contents undefined), cleared where kept.
  void* take(Slot slot, size_t bytes, bool* fresh = nullptr) {
    Held& h = held_[slot];
    if (fresh) *fresh = !(h.p && h.bytes >= bytes);
    if (h.p && h.bytes >= bytes) return h.p;
    if (h.p) CUDA_CHECK(cudaFree(h.p));
    h.p = nullptr;
    CUDA_CHECK(cudaGetDevice(&h.device));
    CUDA_CHECK(cudaMalloc(&h.p, bytes ? bytes : 1));
    h.bytes = bytes;
    return h.p;
  }

 private:
  struct Held {
    void* p = nullptr;
    size_t bytes = 0;
    int device = 0;
  };
  Held held_[kSlots];
};

}  // namespace nna
