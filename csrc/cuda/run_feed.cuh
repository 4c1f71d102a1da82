// run_feed.cuh: a fed run (RunParams::feed, core/run_copies.h): many batches of a caller's rows
// forward on one stream, with one wait at the end instead of one a batch. The host stages batch
// k + 1 in one page-locked slot while the device copies batch k in, runs it and copies its
// outputs out of the other; an event a slot says when the slot may be staged again.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../train/train.h"
#include "check.cuh"

namespace nna {

// `runBatch(q)`: one batch's run with its work left queued (q.queued), returning its path.
template <typename RunBatch> const char* runFeed(void* devBase, const RunParams& p, cudaStream_t stream, RunBatch runBatch) {
  const RunFeed& f = *p.feed;
  // Whatever happens, nothing stays queued on the slots when this returns.
  struct Events {
    cudaStream_t stream;
    cudaEvent_t at[2] = {nullptr, nullptr};
    ~Events() {
      cudaStreamSynchronize(stream);
      for (cudaEvent_t e : at)
        if (e) cudaEventDestroy(e);
    }
  } events{stream};
  for (cudaEvent_t& e : events.at) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  uint8_t* dev = static_cast<uint8_t*>(devBase);
  int64_t pending[2] = {-1, -1};  // the batch whose outputs a slot waits for
  uint64_t pendingRows[2] = {0, 0};
  auto take = [&](int slot) {
    if (pending[slot] < 0) return;
    CUDA_CHECK(cudaEventSynchronize(events.at[slot]));
    f.take(uint64_t(pending[slot]), pendingRows[slot], f.slots[slot].out);
    pending[slot] = -1;
  };
  const char* path = "";
  for (uint64_t k = 0; k < f.batches; ++k) {
    const int slot = f.slotOf(k);
    take(slot);  // batch k - 2's outputs: then its slot is free
    const uint64_t rows = f.stage(k, f.slots[slot].in);
    if (!rows) break;
    RunParams q = p;
    q.feed = nullptr;
    q.queued = true;
    q.rows = rows;
    CUDA_CHECK(cudaMemcpyAsync(dev + f.z0, f.slots[slot].in, rows * f.inRow, cudaMemcpyHostToDevice, stream));
    path = runBatch(q);
    CUDA_CHECK(cudaMemcpyAsync(f.slots[slot].out, dev + f.zOut, rows * f.outRow, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaEventRecord(events.at[slot], stream));
    pending[slot] = int64_t(k);
    pendingRows[slot] = rows;
  }
  const int older = pending[1] >= 0 && (pending[0] < 0 || pending[1] < pending[0]) ? 1 : 0;
  take(older);
  take(1 - older);
  return path;
}

}  // namespace nna
