// run_feed.cuh: a fed run (RunParams::feed, core/run_copies.h): many batches of a caller's rows
// forward on one stream, with one wait at the end instead of one a batch. The host checks a group
// of batches into one page-locked slot while the device runs the group before from the other; an
// event a slot says when the slot may be staged again. Where the arena keeps a run cache, a
// group goes up in one copy on the lane's side stream into a device slot beside the arena
// (ScratchShelf::kFeed), and the run's stream copies each batch from there into z[0] (device to
// device): the upload of the next group overlaps the runs of this one, where each batch's upload
// into z[0] had to wait for the batch before to finish with z[0].
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "../train/train.h"
#include "../core/env.h"
#include "check.cuh"
#include "cublas_loader.h"
#include "run_cache.cuh"

namespace nna {

// `runBatch(q)`: one batch's run with its work left queued (q.queued), returning its path. A
// short batch of at least half the plan's runs as a full one (q.rows = the batch; the rows past
// its own hold an earlier batch's, checked, and their outputs are not copied out): every batch
// then replays the forward graph, where a shorter one launches each kernel itself. Rows of a
// forward pass do not mix, so a row's outputs are what they would be alone.
template <typename RunBatch> const char* runFeed(void* devBase, const RunParams& p, const Lane& lane, RunBatch runBatch) {
  const RunFeed& f = *p.feed;
  const cudaStream_t stream = lane.stream;
  // Whatever happens, nothing stays queued on the slots when this returns.
  struct Events {
    cudaStream_t stream, side;
    cudaEvent_t ran[2] = {nullptr, nullptr}, up[2] = {nullptr, nullptr};
    ~Events() {
      cudaStreamSynchronize(stream);
      if (side) cudaStreamSynchronize(side);
      for (cudaEvent_t e : {ran[0], ran[1], up[0], up[1]})
        if (e) cudaEventDestroy(e);
    }
  } events{stream, lane.sideStream};
  for (cudaEvent_t* e : {&events.ran[0], &events.ran[1], &events.up[0], &events.up[1]}) CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  uint8_t* dev = static_cast<uint8_t*>(devBase);
  const uint64_t slotIn = f.group * f.batch * f.inRow;
  // NN_ARENA_SIDE_STREAM=0 (read per run): every copy on the run's stream, each batch's upload
  // straight into z[0].
  const bool side = lane.sideStream && knob(Knob::SideStream, "1") != "0";
  const std::shared_ptr<RunCache> held = runCacheOf(p, lane);
  const std::shared_ptr<RunCache> cache = side && f.batches > 1 ? held : nullptr;
  uint8_t* devSlots = cache ? static_cast<uint8_t*>(cache->shelf.take(ScratchShelf::kFeed, 2 * slotIn)) : nullptr;
  const char* path = "";
  // A full batch's run, once it ran as one launch of the arena's forward graph, is the same
  // launches with the same arguments for every full batch after it (the same rows, the same
  // addresses; z[0] and the outputs are copied around it): those batches launch the graph
  // again without building the run on the host and comparing each launch (a run's host work
  // was most of a batch's time). Anything else goes through runBatch.
  uint64_t graphed = 0, launches = 0;  // launches: batches that ran as a graph launch
  bool again = false;
  // One batch of `rows` rows from `in` (host, or device where `onDevice`), its outputs to `out`.
  auto issue = [&](const uint8_t* in, bool onDevice, uint8_t* out, uint64_t rows) {
    RunParams q = p;
    q.feed = nullptr;
    q.queued = true;
    q.rows = 2 * rows >= f.batch ? f.batch : rows;
    q.graphSteps = &graphed;
    CUDA_CHECK(cudaMemcpyAsync(dev + f.z0, in, rows * f.inRow, onDevice ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice, stream));
    const bool full = q.rows == f.batch;
    if (again && full && held->fed.relaunch(stream)) {
      ++launches;
    } else {
      graphed = 0;
      path = runBatch(q);
      launches += graphed;
      again = full && held && graphed == 1;
    }
    CUDA_CHECK(cudaMemcpyAsync(out, dev + f.zOut, rows * f.outRow, cudaMemcpyDeviceToHost, stream));
  };
  struct Pending {
    int64_t first = -1;  // the first batch whose outputs the slot waits for
    uint64_t rows = 0;
  } pending[2];
  // The slot's group ran (so its host and device slots are free): its outputs to the caller.
  auto take = [&](int slot) {
    Pending& g = pending[slot];
    if (g.first < 0) return;
    CUDA_CHECK(cudaEventSynchronize(events.ran[slot]));
    for (uint64_t i = 0; i * f.batch < g.rows; ++i) f.take(uint64_t(g.first) + i, std::min(f.batch, g.rows - i * f.batch), f.slots[slot].out + i * f.batch * f.outRow);
    g.first = -1;
  };
  const uint64_t body = f.batches - 1;  // the batches before the last, in groups
  bool stopped = false;
  int slot = 0;
  for (uint64_t k = 0; k < body && !stopped; k += f.group, slot ^= 1) {
    const uint64_t n = std::min(f.group, body - k);
    take(slot);  // the group two before
    const uint64_t rows = f.stage(k, n, f.slots[slot].in);
    if (!rows) {
      stopped = true;
      break;
    }
    const uint8_t* from = f.slots[slot].in;
    if (devSlots) {
      uint8_t* to = devSlots + slot * slotIn;
      CUDA_CHECK(cudaMemcpyAsync(to, from, rows * f.inRow, cudaMemcpyHostToDevice, lane.sideStream));
      CUDA_CHECK(cudaEventRecord(events.up[slot], lane.sideStream));
      CUDA_CHECK(cudaStreamWaitEvent(stream, events.up[slot], 0));
      from = to;
    }
    for (uint64_t i = 0; i * f.batch < rows; ++i)
      issue(from + i * f.batch * f.inRow, devSlots != nullptr, f.slots[slot].out + i * f.batch * f.outRow, std::min(f.batch, rows - i * f.batch));
    CUDA_CHECK(cudaEventRecord(events.ran[slot], stream));
    pending[slot] = {int64_t(k), rows};
  }
  uint64_t lastRows = 0;
  if (!stopped && f.batches) {
    lastRows = f.stage(body, 1, f.last.in);
    if (lastRows) issue(f.last.in, false, f.last.out, lastRows);
  }
  const int older = pending[1].first >= 0 && (pending[0].first < 0 || pending[1].first < pending[0].first) ? 1 : 0;
  take(older);
  take(1 - older);
  if (lastRows) {
    CUDA_CHECK(cudaStreamSynchronize(stream));
    f.take(body, lastRows, f.last.out);
  }
  if (p.graphSteps) *p.graphSteps = launches;
  return path;
}

}  // namespace nna
