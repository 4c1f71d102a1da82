// staging.cu: explicit staging of a budgeted arena, the classic out-of-core method the managed
// scheduler is compared with. The arena lives in pinned host memory (the "image"); the device
// holds one pool of the budget's size. The kernels bind from the pool's base, where a shadow
// header says, phase by phase, where each region is: a slot of the pool when the plan
// (csrc/budget/residency.h) has made it resident, else its place in the image, which the GPU
// reads in place (the gather's rows of the data set; nothing else a phase uses is ever there).
// Regions move by cudaMemcpyAsync on two copy streams (in, out), ordered with events:
//   fetch  : in waits for the evictions of whatever held its slot's bytes before, copies,
//            records ready[r];
//   place  : (a region the phase writes whole: no copy) the compute stream itself waits for
//            those evictions, so a placement never queues behind a fetch for a later phase;
//   evict  : out waits for the phase that last used the region and for its fetch, copies out
//            if the device copy is newer, records an event for the slot it frees. A drop (no
//            copy) frees its slot with the event of the phase that last used it (one fetched
//            and not used yet waits for its fetch on a stream of its own);
//   phase t: the compute stream waits on ready[r] of what it uses, then a one-block kernel
//            copies its shadow header into the pool (ordered after phase t-1's kernels).
// Keeping each stream free of waits that do not concern what follows on it is what lets the
// copies overlap the kernels (bench/micro/stage_sim.cc replays the plan with these rules).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "../core/failure.h"
#include "../cuda/check.cuh"
#include "device_meter.h"
#include "scheduled_run.h"
#include "../core/env.h"

namespace nna {
namespace {

// The shadow header goes to the pool by a kernel reading the pinned ring in place, not by a copy:
// a 2 KiB cudaMemcpyAsync queues on the same copy engine as the fetches, so each phase's header
// waited behind a large fetch.
__global__ void headerCopyKernel(uint8_t* __restrict__ dst, const uint8_t* __restrict__ src, uint64_t bytes) {
  for (uint64_t i = threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
}

// NN_ARENA_STAGE_TRACE=1: timed events around every copy and phase of a run, printed (ms from
// the run's start, per stream) when it ends. How the copies really overlap the kernels; compare
// with what bench/micro/stage_sim.cc predicts from the same plan.
class StageTrace {
 public:
  StageTrace() : on_(knobOn(Knob::StageTrace)), born_(std::chrono::steady_clock::now()) {}
  bool on() const { return on_; }
  // Starts an item on `s`; end() closes the last one started.
  void begin(cudaStream_t s, std::string what) {
    Item it{std::move(what), s, nullptr, nullptr};
    CUDA_CHECK(cudaEventCreate(&it.a));
    CUDA_CHECK(cudaEventCreate(&it.b));
    CUDA_CHECK(cudaEventRecord(it.a, s));
    items_.push_back(std::move(it));
  }
  void end() { CUDA_CHECK(cudaEventRecord(items_.back().b, items_.back().s)); }
  void print(cudaStream_t compute, cudaStream_t in, cudaStream_t out) {
    if (items_.empty()) return;
    float span = 0;
    CUDA_CHECK(cudaEventElapsedTime(&span, items_.front().a, items_.back().b));
    std::fprintf(stderr, "[stage] run: %.3f ms on the host from the stager's construction to the end of the run; %.3f ms from the first item to the last\n",
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - born_).count(), span);
    for (const Item& it : items_) {
      float a = 0, b = 0;
      CUDA_CHECK(cudaEventElapsedTime(&a, items_.front().a, it.a));
      CUDA_CHECK(cudaEventElapsedTime(&b, items_.front().a, it.b));
      std::fprintf(stderr, "[stage] %-7s %9.3f %9.3f  %s\n", it.s == compute ? "compute" : it.s == in ? "in" : it.s == out ? "out" : "drop", a, b, it.what.c_str());
    }
    for (const Item& it : items_) {  // after the loop: every time is taken from the first item's start
      cudaEventDestroy(it.a);
      cudaEventDestroy(it.b);
    }
    items_.clear();
  }

 private:
  struct Item {
    std::string what;
    cudaStream_t s;
    cudaEvent_t a, b;
  };
  bool on_;
  std::chrono::steady_clock::time_point born_;
  std::vector<Item> items_;
};

class Stager final : public LayerHooks {
 public:
  Stager(BudgetedBlock& block, const RunParams& p)
      : block_(block),
        res_(block.residency()),
        plan_(res_, p),
        pool_(block.pool()),
        image_(block.device()),
        regions_(res_.model().regions()),
        headerBytes_(res_.model().header().header_bytes) {
    // A ring of phase events and shadow headers: the host runs at most half of it ahead of
    // the GPU, so an entry is never reused while a copy or a wait may still refer to it.
    ring_ = std::max<uint64_t>(8, std::min<uint64_t>(64, (uint64_t(16) << 20) / headerBytes_));
    CUDA_CHECK(cudaMallocHost(&shadows_, size_t((ring_ + 1) * headerBytes_)));
    phaseDone_.assign(ring_, nullptr);
    for (cudaEvent_t& e : phaseDone_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    ready_.assign(regions_.size(), nullptr);
    for (cudaEvent_t& e : ready_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    freedEvents_.assign(kFreed, nullptr);
    for (cudaEvent_t& e : freedEvents_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CUDA_CHECK(cudaStreamCreateWithFlags(&in_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&out_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&drop_, cudaStreamNonBlocking));
    fetched_.assign(regions_.size(), false);
    fetchedFor_.assign(regions_.size(), 0);
    lastEviction_.assign(regions_.size(), 0);
    unwaited_.assign(regions_.size(), false);
    table_.resize(res_.model().layers().size());
  }

  ~Stager() override {  // a destructor cannot report: the run already did
    if (in_) cudaStreamSynchronize(in_);
    if (out_) cudaStreamSynchronize(out_);
    if (drop_) cudaStreamSynchronize(drop_);
    for (cudaEvent_t e : phaseDone_)
      if (e) cudaEventDestroy(e);
    for (cudaEvent_t e : ready_)
      if (e) cudaEventDestroy(e);
    for (cudaEvent_t e : freedEvents_)
      if (e) cudaEventDestroy(e);
    if (in_) cudaStreamDestroy(in_);
    if (out_) cudaStreamDestroy(out_);
    if (drop_) cudaStreamDestroy(drop_);
    if (shadows_) cudaFreeHost(shadows_);
  }

  void beginRun(cudaStream_t s, uint64_t) override {
    DeviceMeter& m = block_.meter();
    if (!m.hasBaseline) {  // the pool was allocated with the arena: the baseline leaves it out
      const uint64_t now = deviceBytesInUse();
      m.baseline = now > block_.poolBytes() ? now - block_.poolBytes() : 0;
      m.hasBaseline = true;
    }
    meter_ = std::make_unique<MeterThread>(m);
    moves_.clear();
    plan_.start(moves_);
    issue(moves_, s);
    // The stats region is resident for the whole run: the reset kernel comes next, and binds
    // from this header.
    for (uint32_t r = 0; r < regions_.size(); ++r)
      if (unwaited_[r]) {
        CUDA_CHECK(cudaStreamWaitEvent(s, ready_[r], 0));
        unwaited_[r] = false;
      }
    upload(ring_, s);
  }

  void before(Stage phase, uint32_t layer, cudaStream_t s) override {
    const PhaseInfo& ph = plan_.launched(t_, phase, layer, "stager");
    if (t_ >= ring_ / 2) {
      const uint64_t old = t_ - ring_ / 2;
      const auto t0 = std::chrono::steady_clock::now();
      CUDA_CHECK(cudaEventSynchronize(phaseDone_[old % ring_]));
      block_.meter().waitMicros += uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
      completed_ = int64_t(old);
    }
    moves_.clear();
    plan_.before(t_, moves_);
    issue(moves_, s);
    for (const Use& u : ph.uses)
      if (unwaited_[u.region]) {
        CUDA_CHECK(cudaStreamWaitEvent(s, ready_[u.region], 0));
        unwaited_[u.region] = false;
      }
    upload(t_ % ring_, s);
    if (trace_.on()) trace_.begin(s, std::string(stageName(ph.stage)) + " " + std::to_string(layer) + " (phase " + std::to_string(t_) + ")");
  }

  void after(Stage, uint32_t, cudaStream_t s) override {
    if (trace_.on()) trace_.end();
    CUDA_CHECK(cudaEventRecord(phaseDone_[t_ % ring_], s));
    moves_.clear();
    plan_.after(t_, moves_);
    issue(moves_, s);
    ++t_;
  }

  void endRun(cudaStream_t s) override {
    // The compute stream is synchronised. What the pool holds newer than the image stays there
    // for the next run; a transfer copies it out first (Block::flushPool).
    completed_ = int64_t(t_) - 1;
    moves_.clear();
    plan_.finish(moves_);
    issue(moves_, s);
    CUDA_CHECK(cudaStreamSynchronize(in_));
    CUDA_CHECK(cudaStreamSynchronize(out_));
    CUDA_CHECK(cudaStreamSynchronize(drop_));
    if (trace_.on()) trace_.print(s, in_, out_);
    if (meter_) meter_->stop();
  }

  // cuBLAS takes pointers: where region (layer, kind) is for the phase being launched.
  void* address(uint32_t layer, uint32_t kind) override { return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(pool_) + table_[layer].region[kind].offset); }

 private:
  // The shadow header as residency stands now, written into ring entry `slot` and copied to
  // the pool's base on the compute stream. Offsets are relative to the pool: a slot's offset,
  // or the distance (mod 2^64) from the pool to the region's place in the image.
  void upload(uint64_t slot, cudaStream_t s) {
    uint8_t* shadow = shadows_ + slot * headerBytes_;
    std::memcpy(shadow, block_.header(), headerBytes_);
    const nna_header& h = res_.model().header();
    std::memcpy(table_.data(), res_.model().layers().data(), table_.size() * sizeof(nna_layer));
    const auto& st = res_.state();
    for (uint32_t r = 0; r < regions_.size(); ++r) {
      const RegionInfo& ri = regions_[r];
      table_[ri.layer].region[ri.kind].offset = st[r].resident ? st[r].slot : uint64_t(reinterpret_cast<uintptr_t>(image_) + ri.offset - reinterpret_cast<uintptr_t>(pool_));
    }
    std::memcpy(shadow + h.layers_offset, table_.data(), table_.size() * sizeof(nna_layer));
    // Pinned memory from cudaMallocHost is device-accessible at its host address (UVA).
    headerCopyKernel<<<1, 256, 0, s>>>(pool_, shadow, headerBytes_);
    CUDA_CHECK(cudaGetLastError());
  }

  // `compute`: the stream the run's kernels go to (a placement makes it wait).
  void issue(const std::vector<Move>& moves, cudaStream_t compute) {
    compute_ = compute;
    for (const Move& m : moves) {
      const uint32_t r = m.region;
      const RegionInfo& ri = regions_[r];
      uint8_t* slot = pool_ + m.slot;
      uint8_t* home = image_ + ri.offset;
      if (m.kind == Move::Fetch || m.kind == Move::Place) {
        // The slot's bytes must have left (and their kernels ended) before new ones land.
        cudaStream_t waits = m.kind == Move::Fetch ? in_ : compute;
        const uint64_t end = m.slot + res_.cost(r);
        for (const Freed& f : freed_)
          if (f.begin < end && m.slot < f.end) waitFreed(waits, f);
        if (m.kind == Move::Place) {  // only before its phase (residency.cc): the compute stream is next
          fetched_[r] = unwaited_[r] = false;
          continue;
        }
        // And its own last write-back to the image must have ended before the image is read.
        if (lastEviction_[r] && evictions_ - lastEviction_[r] < kFreed) CUDA_CHECK(cudaStreamWaitEvent(in_, freedEvents_[(lastEviction_[r] - 1) % kFreed], 0));
        if (trace_.on()) trace_.begin(in_, "fetch " + describe(r));
        CUDA_CHECK(cudaMemcpyAsync(slot, home, size_t(ri.bytes), cudaMemcpyHostToDevice, in_));
        if (trace_.on()) trace_.end();
        CUDA_CHECK(cudaEventRecord(ready_[r], in_));
        fetched_[r] = unwaited_[r] = true;
        fetchedFor_[r] = int64_t(m.target);
        continue;
      }
      // A drop of a region used since it came (the usual case) frees its slot when the phase
      // that last used it ends: that phase's own event says so, with no stream to queue on.
      if (m.kind == Move::Drop && (!fetched_[r] || m.lastUse >= fetchedFor_[r])) {
        fetched_[r] = unwaited_[r] = false;
        remember({m.slot, m.slot + res_.cost(r), m.lastUse, 0});
        continue;
      }
      // Phases up to completed_ are known to have ended; a later one is still in the ring.
      cudaStream_t out = m.kind == Move::Drop ? drop_ : out_;
      if (m.lastUse > completed_) CUDA_CHECK(cudaStreamWaitEvent(out, phaseDone_[uint64_t(m.lastUse) % ring_], 0));
      if (fetched_[r]) CUDA_CHECK(cudaStreamWaitEvent(out, ready_[r], 0));
      if (trace_.on()) trace_.begin(out, std::string(m.kind == Move::Drop ? "drop " : "write-back ") + describe(r));
      if (m.kind != Move::Drop) CUDA_CHECK(cudaMemcpyAsync(home, slot, size_t(ri.bytes), cudaMemcpyDeviceToHost, out));
      if (trace_.on()) trace_.end();
      fetched_[r] = unwaited_[r] = false;
      // Remember the freed slot with an event of its own.
      const uint32_t e = uint32_t(evictions_++ % kFreed);
      CUDA_CHECK(cudaEventRecord(freedEvents_[e], out));
      remember({m.slot, m.slot + res_.cost(r), kByEvent, e});
      lastEviction_[r] = evictions_;  // its number + 1 (0: none this run)
    }
  }

  // A slot is free when an eviction's event fires, or (phase >= 0) when that phase ends.
  struct Freed {
    uint64_t begin, end;
    int64_t phase;
    uint32_t event;
  };
  static constexpr int64_t kByEvent = INT64_MIN;

  void waitFreed(cudaStream_t s, const Freed& f) {
    if (f.phase == kByEvent)
      CUDA_CHECK(cudaStreamWaitEvent(s, freedEvents_[f.event], 0));
    else if (f.phase > completed_)
      CUDA_CHECK(cudaStreamWaitEvent(s, phaseDone_[uint64_t(f.phase) % ring_], 0));
  }

  // The oldest entry makes way: the in and compute streams wait on it first, so nothing later
  // can overtake it once forgotten.
  void remember(const Freed& f) {
    if (freed_.size() == kFreed) {
      waitFreed(in_, freed_.front());
      waitFreed(compute_, freed_.front());
      freed_.pop_front();
    }
    freed_.push_back(f);
  }

  std::string describe(uint32_t r) const { return regionLabel(regions_[r], true); }

  StageTrace trace_;
  BudgetedBlock& block_;
  Residency& res_;
  Planner plan_;
  uint8_t* pool_;
  uint8_t* image_;
  const std::vector<RegionInfo>& regions_;
  uint64_t headerBytes_;
  uint64_t ring_ = 0;
  uint8_t* shadows_ = nullptr;    // pinned: ring_ entries + one for the start of the run
  std::vector<nna_layer> table_;  // the layer table of the last shadow header (for address())
  std::vector<cudaEvent_t> phaseDone_, ready_;
  static constexpr size_t kFreed = 256;
  std::deque<Freed> freed_;  // the last kFreed slots evictions freed
  std::vector<cudaEvent_t> freedEvents_;
  uint64_t evictions_ = 0;
  std::vector<uint64_t> lastEviction_;
  cudaStream_t in_ = nullptr, out_ = nullptr, drop_ = nullptr, compute_ = nullptr;
  std::vector<bool> fetched_, unwaited_;
  std::vector<int64_t> fetchedFor_;  // the phase a region's fetch this run was for
  int64_t completed_ = -1;
  uint64_t t_ = 0;
  std::vector<Move> moves_;
  std::unique_ptr<MeterThread> meter_;
};

}  // namespace

std::unique_ptr<LayerHooks> makeStager(BudgetedBlock& block, const RunParams& p) { return std::make_unique<Stager>(block, p); }

}  // namespace nna
