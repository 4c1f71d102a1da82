// nccl_sync.cuh: the gradient sync of a run of one rank of a data-parallel group (NcclSync,
// csrc/cuda/grad_sync.h). What one step reduces: every db and dw region, merged into as few ranges
// as the layout allows: two gradient regions are one range when nothing but alignment padding lies
// between them (padding is zero on every replica, so summing it changes nothing). Kind-major arenas
// keep every db and dw adjacent: one all-reduce per step, issued once the backward of layer 1 is
// queued. Layer-major arenas keep each layer's db and dw adjacent: one all-reduce per layer, issued
// as soon as that layer's weight gradient is queued (the run queues it before the layer's error
// product: GradSync::early), on the communicator's stream, so it overlaps the backward of the
// layers below; the layer's optimizer step follows its all-reduce on a stream of its own, so that
// the next all-reduce does not queue behind it. The first layer's weight gradient, the one
// reduction nothing is left to hide, can be reduced in slices as its product writes them
// (NN_ARENA_SYNC_SLICE). NN_ARENA_SYNC_OVERLAP=0: the earlier schedule (each layer after its whole
// backward, steps on the communicator's stream), to measure against.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../core/env.h"
#include "../core/failure.h"
#include "../cuda/check.cuh"
#include "../cuda/grad_sync.h"
#include "../include/nn_arena.h"
#include "comm_group.h"
#include "communicator.h"
#include "nccl_loader.h"
#include "sync_trace.h"

namespace nna {

namespace {

constexpr double kNoBadStep = 1e30;  // BAD_STEP -1 ("none") while the group takes the minimum

// Stats slots LOSS, CORRECT and ROWS become the group's sums of what this run added (the slots
// may hold earlier runs' group totals: those are saved first and added back once); BAD_STEP
// becomes the group's first bad step.
template <typename T> __global__ void statsKernel(T* stats, double* saved, int phase) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  if (phase == 0) {
    for (int i = 0; i < NNA_STAT_BAD_STEP; ++i) saved[i] = double(stats[i]);
  } else if (phase == 1) {
    for (int i = 0; i < NNA_STAT_BAD_STEP; ++i) stats[i] -= T(saved[i]);
    if (stats[NNA_STAT_BAD_STEP] < T(0)) stats[NNA_STAT_BAD_STEP] = T(kNoBadStep);
  } else {
    for (int i = 0; i < NNA_STAT_BAD_STEP; ++i) stats[i] += T(saved[i]);
    if (stats[NNA_STAT_BAD_STEP] >= T(kNoBadStep)) stats[NNA_STAT_BAD_STEP] = T(-1);
  }
}

// The bf16 wire: a range rounded to bfloat16 (to nearest even) into the scratch, and the
// group's sums widened back into the arena's float32 gradients.
__global__ void toWireKernel(const float* x, __nv_bfloat16* w, uint64_t n) {
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) w[i] = __float2bfloat16_rn(x[i]);
}
__global__ void fromWireKernel(const __nv_bfloat16* w, float* x, uint64_t n) {
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) x[i] = __bfloat162float(w[i]);
}
constexpr unsigned kWireThreads = 256, kWireBlocks = 1024;  // a grid-stride pass: a few blocks a multiprocessor

struct Piece {
  uint64_t offset, bytes;
  std::vector<uint32_t> layers;           // hidden layers with a gradient region in the range
  uint32_t waiting = 0;                   // of those, layers whose backward is not queued yet this step
  uint64_t slicedFrom = 0, slicedTo = 0;  // this step: the bytes already reduced in slices (sliceReady)
};

// NN_ARENA_SYNC_SLICE=N: a first layer's weight gradient of at least two slices is reduced in
// slices of about N MiB as its product writes them. Off by default: on two NVLink H200s the
// link is the bottleneck (the reductions queue behind each other), and five all-reduces of a
// range take longer than one (docs/data-parallel.md).
constexpr long kSliceMiB = 0;
constexpr uint32_t kMaxSlices = 8;

}  // namespace

class NcclSync final : public GradSync {
 public:
  NcclSync(Communicator& c, void* base, const void* header) : c_(c), base_(static_cast<char*>(base)) {
    std::memcpy(&h_, header, sizeof h_);
    std::vector<nna_layer> L(h_.num_layers);
    std::memcpy(L.data(), static_cast<const char*>(header) + h_.layers_offset, L.size() * sizeof(nna_layer));
    elem_ = h_.dtype == NNA_FLOAT64 ? 8 : 4;
    stats_ = base_ + L.back().region[NNA_STATS].offset;
    struct Span {
      uint64_t offset, end;
      uint32_t layer;
      bool grad;
    };
    std::vector<Span> spans;
    for (uint32_t l = 0; l < h_.num_layers; ++l)
      for (uint32_t k = 0; k < NNA_KIND_COUNT; ++k) {
        const nna_region r = L[l].region[k];
        if (r.count) spans.push_back({r.offset, r.offset + r.count * elem_, l, k == NNA_DB || k == NNA_DW});
      }
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.offset < b.offset; });
    // Adjacent gradient regions in offset order (with only padding between) are one range.
    bool open = false;
    for (const Span& s : spans) {
      if (!s.grad) {
        open = false;
        continue;
      }
      if (!open) pieces_.push_back({s.offset, 0, {}, 0});
      Piece& p = pieces_.back();
      p.bytes = s.end - p.offset;
      if (std::find(p.layers.begin(), p.layers.end(), s.layer) == p.layers.end()) p.layers.push_back(s.layer);
      open = true;
    }
    piecesOfLayer_.assign(h_.num_layers, 0);
    for (const Piece& p : pieces_)
      for (uint32_t l : p.layers) piecesOfLayer_[l]++;
    overlap_ = knob(Knob::SyncOverlap, "1") != "0";
    graphs_ = knob(Knob::SyncGraphs, "1") != "0";
    const uint64_t sliceBytes = uint64_t(knobInt(Knob::SyncSlice, kSliceMiB, 0, 1 << 20)) << 20;
    // Slices: the lowest layer with a gradient (the last one handed over), a dense layer of one
    // model whose range holds no other layer's gradient.
    for (uint32_t l = 0; l < h_.num_layers && overlap_ && sliceBytes; ++l) {
      if (!piecesOfLayer_[l]) continue;
      const nna_region dw = L[l].region[NNA_DW];
      const auto only = std::find_if(pieces_.begin(), pieces_.end(), [&](const Piece& p) { return p.layers.size() == 1 && p.layers[0] == l; });
      const uint64_t bytes = dw.count * elem_;
      if (L[l].op == NNA_OP_DENSE && only != pieces_.end() && dw.count == uint64_t(L[l].units) * L[l].fan_in && bytes >= 2 * sliceBytes) {
        sliceLayer_ = l;
        slices_ = uint32_t(std::min<uint64_t>(kMaxSlices, bytes / sliceBytes));
        sliceUnits_ = L[l].units;
        unitBytes_ = uint64_t(L[l].fan_in) * elem_;
        dwOffset_ = dw.offset;
      }
      break;
    }
    std::vector<uint64_t> bytes;
    for (const Piece& p : pieces_) bytes.push_back(p.bytes);
    if (c_.wire_ == Wire::Bf16) {
      if (elem_ != 4) NNA_FAIL_FIELD("BAD_OPTION", "gradients", "'bf16' on the wire needs a float32 arena");
      wire_ = static_cast<__nv_bfloat16*>(c_.wireScratch(std::max<uint64_t>(2, *std::max_element(bytes.begin(), bytes.end()) / 2)));
    }
    // What a step's collectives are: their ranges, slices and wire (GradSync::capturable).
    collectives_ = {elem_, uint64_t(c_.wire_), sliceLayer_, slices_};
    collectives_.insert(collectives_.end(), bytes.begin(), bytes.end());
    connected_ = std::find(c_.connected_.begin(), c_.connected_.end(), collectives_) != c_.connected_.end();
    trace_ = std::make_unique<SyncTrace>(c_.device(), std::move(bytes));
    resetStep();
  }

  void beginRun(cudaStream_t compute, bool) override {
    live();
    handOver(compute);
    launchStats(0);
    trace_->stepStart(compute);
  }

  bool early() const override { return overlap_; }
  uint32_t slices(uint32_t layer) const override { return layer == sliceLayer_ ? slices_ : 1; }

  void sliceReady(uint32_t layer, uint32_t slice, cudaStream_t compute) override {
    Piece& p = pieceOf(layer);
    const uint64_t from = dwOffset_ + sliceUnits(sliceUnits_, slices_, slice) * unitBytes_;
    const uint64_t to = dwOffset_ + sliceUnits(sliceUnits_, slices_, slice + 1) * unitBytes_;
    handOver(compute);
    if (p.slicedTo == p.slicedFrom) {
      trace_->ready(uint32_t(&p - pieces_.data()), compute);
      p.slicedFrom = from;
    }
    reduce(from, to - from);
    p.slicedTo = to;
  }

  void gradientsReady(uint32_t layer, cudaStream_t compute, const Update& update) override {
    bool waited = false;
    for (Piece& p : pieces_) {
      if (std::find(p.layers.begin(), p.layers.end(), layer) == p.layers.end() || --p.waiting) continue;
      const uint32_t index = uint32_t(&p - pieces_.data());
      if (!waited) {
        handOver(compute);
        waited = true;
      }
      if (p.slicedTo == p.slicedFrom) {
        trace_->ready(index, compute);
        reduce(p.offset, p.bytes);
      } else {  // what the slices left: the bias gradient and padding on either side
        reduce(p.offset, p.slicedFrom - p.offset);
        reduce(p.slicedTo, p.offset + p.bytes - p.slicedTo);
      }
      trace_->reduced(index, stream());
      const cudaStream_t steps = afterReductions();
      // The layers this reduction completed step in one launch (kind-major: every layer; a
      // launch each queued them one after another behind the reduction).
      ready_.clear();
      for (uint32_t l : p.layers)
        if (--layerWaiting_[l] == 0) ready_.push_back(l);
      if (update && !ready_.empty()) update(ready_.data(), ready_.size(), steps);
      if (update) trace_->updated(index, steps);
    }
  }

  // After an early hand-over: the layer's step waits for its reduction (the steps' stream waited
  // for it in gradientsReady) and for the run's stream to pass the layer's error product. A
  // layer whose range is not reduced yet (kind-major) steps with that reduction instead.
  void weightsFree(uint32_t layer, cudaStream_t compute, const Update& update) override {
    if (!update || layerWaiting_[layer]) return;
    follow(updates(), compute, free());
    update(&layer, 1, updates());
    trace_->updated(uint32_t(&pieceOf(layer) - pieces_.data()), updates());
  }

  void endStep(cudaStream_t compute) override {
    // The next step's forward reads the updated weights; its backward rewrites the gradients
    // the reductions read.
    follow(compute, afterReductions(), done(step_ & 1));
    trace_->stepEnd(compute);
    trace_->stepStart(compute);
    resetStep();
  }

  // On unless NN_ARENA_SYNC_GRAPHS=0 (docs/data-parallel.md, "Graphed group steps"). Not with
  // the trace (its events mark each step from the host).
  bool graphs() const override { return graphs_ && !trace_->on(); }
  bool capturable() const override { return connected_; }
  void launching(Launch how) override { launch_ = how; }
  uint64_t rank() const override { return uint64_t(c_.rank()); }
  void graphOwner(std::function<void()> release) override {
    std::lock_guard<std::mutex> lock(c_.group_->mutex);
    c_.releaseGraph_ = std::move(release);
  }

  void stepLaunched(cudaStream_t compute) override {
    if (launch_ == Launch::Direct && !connected_) {
      c_.connected_.push_back(collectives_);
      connected_ = true;
    }
    launch_ = Launch::Direct;
    CUDA_CHECK(cudaEventRecord(done(step_ & 1), compute));
    // The host runs at most one step ahead of the device (a dead peer would otherwise fill the
    // launch queue and block a launch, out of reach of the checks in wait()).
    if (step_) wait(done((step_ - 1) & 1));
    ++step_;
  }

  void endRun(cudaStream_t compute) override {
    handOver(compute);
    launchStats(1);
    reduceStats(stats_, NNA_STAT_BAD_STEP, nccl::kSum, "ncclAllReduce (stats)");
    reduceStats(stats_ + NNA_STAT_BAD_STEP * elem_, 1, nccl::kMin, "ncclAllReduce (first bad step)");
    launchStats(2);
    follow(compute, stream(), done(0));
    wait(done(0));
    trace_->report();
  }

  // Before the run's stream is drained: its NCCL work completes only once the group is aborted.
  void abort() override {
    c_.fail("replica " + std::to_string(c_.rank()) + " of the group failed during a run");
    c_.park();
  }

 private:
  cudaStream_t stream() const { return static_cast<cudaStream_t>(c_.stream_); }
  cudaStream_t updates() const { return static_cast<cudaStream_t>(c_.updates_); }
  cudaEvent_t reduced() const { return static_cast<cudaEvent_t>(c_.reduced_); }
  cudaEvent_t free() const { return static_cast<cudaEvent_t>(c_.free_); }
  Piece& pieceOf(uint32_t layer) {
    return *std::find_if(pieces_.begin(), pieces_.end(), [&](const Piece& p) { return std::find(p.layers.begin(), p.layers.end(), layer) != p.layers.end(); });
  }

  // All-reduces `bytes` of gradients at `offset` on the communicator's stream (none: nothing).
  void reduce(uint64_t offset, uint64_t bytes) {
    if (!bytes || launch_ == Launch::Replay) return;
    if (wire_) {
      const uint64_t n = bytes / elem_;
      float* g = reinterpret_cast<float*>(base_ + offset);
      const unsigned blocks = unsigned(std::min<uint64_t>(kWireBlocks, (n + kWireThreads - 1) / kWireThreads));
      toWireKernel<<<blocks, kWireThreads, 0, stream()>>>(g, wire_, n);
      CUDA_CHECK(cudaGetLastError());
      nccl::check(nccl::api().allReduce(wire_, wire_, n, nccl::kBfloat16, nccl::kSum, comm(), stream()), "ncclAllReduce (gradients, bf16)");
      fromWireKernel<<<blocks, kWireThreads, 0, stream()>>>(wire_, g, n);
      CUDA_CHECK(cudaGetLastError());
      return;
    }
    nccl::check(nccl::api().allReduce(base_ + offset, base_ + offset, bytes / elem_, elem_ == 8 ? nccl::kFloat64 : nccl::kFloat32, nccl::kSum, comm(), stream()),
                "ncclAllReduce (gradients)");
  }
  cudaEvent_t done(uint64_t i) const { return static_cast<cudaEvent_t>(c_.done_[i]); }
  nccl::Comm comm() const { return static_cast<nccl::Comm>(c_.comm_); }

  void live() const {
    const std::string why = c_.brokenWhy();
    if (!why.empty()) NNA_FAIL("NCCL_ERROR", "the data-parallel group can no longer run (" + why + "); create it again");
  }

  void resetStep() {
    for (Piece& p : pieces_) {
      p.waiting = uint32_t(p.layers.size());
      p.slicedFrom = p.slicedTo = 0;
    }
    layerWaiting_ = piecesOfLayer_;
  }

  // The communicator's stream waits for what is queued on `compute` so far.
  void handOver(cudaStream_t compute) { follow(stream(), compute, static_cast<cudaEvent_t>(c_.ready_)); }

  // The stream the layers' steps go on, behind every reduction queued so far: overlapped, the
  // steps' own (it waits for the reductions' stream); else the reductions' stream itself.
  cudaStream_t afterReductions() {
    if (!overlap_) return stream();
    follow(updates(), stream(), reduced());
    return updates();
  }

  // `waiter` waits for what is queued on `on` so far, through `event` (recorded on `on` now).
  void follow(cudaStream_t waiter, cudaStream_t on, cudaEvent_t event) const {
    if (launch_ == Launch::Replay) return;
    CUDA_CHECK(cudaEventRecord(event, on));
    CUDA_CHECK(cudaStreamWaitEvent(waiter, event, 0));
  }

  void launchStats(int phase) {
    if (elem_ == 8)
      statsKernel<double><<<1, 1, 0, stream()>>>(reinterpret_cast<double*>(stats_), c_.saved_, phase);
    else
      statsKernel<float><<<1, 1, 0, stream()>>>(reinterpret_cast<float*>(stats_), c_.saved_, phase);
    CUDA_CHECK(cudaGetLastError());
  }

  void reduceStats(char* p, size_t count, int op, const char* what) {
    nccl::check(nccl::api().allReduce(p, p, count, elem_ == 8 ? nccl::kFloat64 : nccl::kFloat32, op, comm(), stream()), what);
  }

  // Waits for `event`, polling: a peer in this process that failed marks the group, a peer in
  // another process shows as the communicator's asynchronous error; either parks this rank
  // until the group is aborted, then fails the run.
  void wait(cudaEvent_t event) {
    for (uint32_t spin = 0;; ++spin) {
      const cudaError_t e = cudaEventQuery(event);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) CUDA_CHECK(e);
      if (!c_.brokenWhy().empty()) c_.parkAndThrow();
      if (spin % 64 == 63) {
        nccl::Result async = nccl::kSuccess;
        nccl::check(nccl::api().commGetAsyncError(comm(), &async), "ncclCommGetAsyncError");
        if (async != nccl::kSuccess && async != nccl::kInProgress) {
          c_.fail(std::string("NCCL reported an asynchronous error: ") + nccl::api().getErrorString(async) + " (a peer was lost?)");
          c_.parkAndThrow();
        }
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      } else {
        std::this_thread::yield();
      }
    }
  }

  Communicator& c_;
  char* base_;
  nna_header h_;
  uint64_t elem_ = 4;
  char* stats_ = nullptr;
  std::vector<Piece> pieces_;
  std::vector<uint32_t> piecesOfLayer_, layerWaiting_;
  std::vector<uint32_t> ready_;  // gradientsReady's layers that step together (kept: no allocation a step)
  uint64_t step_ = 0;
  Launch launch_ = Launch::Direct;     // how the run's step goes (a replay: queue nothing); between steps, direct
  std::vector<uint64_t> collectives_;  // what a step's collectives are (Communicator::connected_)
  bool connected_ = false;             // a step with them ran directly on the communicator
  bool overlap_ = true;                // NN_ARENA_SYNC_OVERLAP (read per run)
  bool graphs_ = true;                 // NN_ARENA_SYNC_GRAPHS (read per run)
  __nv_bfloat16* wire_ = nullptr;      // Wire::Bf16: the communicator's scratch (the largest range, in bf16)
  // The layer whose weight gradient is reduced in slices (none: 0, never a hidden layer's index
  // with a gradient), their count, the layer's units, a unit's bytes of dw, dw's offset.
  uint32_t sliceLayer_ = 0, slices_ = 1;
  uint64_t sliceUnits_ = 0, unitBytes_ = 0, dwOffset_ = 0;
  std::unique_ptr<SyncTrace> trace_;  // NN_ARENA_SYNC_TRACE
};

}  // namespace nna
