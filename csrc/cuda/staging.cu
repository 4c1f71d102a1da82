// staging.cu: explicit staging of a budgeted arena, the classic out-of-core method the managed
// scheduler is compared with. The arena lives in pinned host memory (the "image"); the device
// holds one pool of the budget's size. The kernels bind from the pool's base, where a shadow
// header says, phase by phase, where each region is: a slot of the pool when the plan
// (csrc/train/residency.h) has made it resident, else its place in the image, which the GPU
// reads in place (the gather's rows of the data set; nothing else a phase uses is ever there).
// Regions move by cudaMemcpyAsync on two copy streams (in, out), ordered with events:
//   fetch  : in waits for the evictions of whatever held its slot's bytes before, copies,
//            records ready[r];
//   evict  : out waits for the phase that last used the region and for its fetch, copies out
//            if the device copy is newer, records an event for the slot it frees;
//   phase t: the compute stream waits on ready[r] of what it uses, then copies its shadow
//            header into the pool (2 KiB, ordered after phase t-1's kernels on the same stream).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "../core/failure.h"
#include "check.cuh"
#include "device_meter.h"
#include "scheduled_run.h"

namespace nna {
namespace {

class Stager final : public LayerHooks {
 public:
  Stager(Block& block, const RunParams& p, bool blas)
      : block_(block), res_(*block.residency()), plan_(res_, p, blas), pool_(block.pool()), image_(block.device()),
        regions_(res_.model().regions()), headerBytes_(res_.model().header().header_bytes) {
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
    fetched_.assign(regions_.size(), false);
    lastEviction_.assign(regions_.size(), 0);
    unwaited_.assign(regions_.size(), false);
    table_.resize(res_.model().layers().size());
  }

  ~Stager() override {  // a destructor cannot report: the run already did
    if (in_) cudaStreamSynchronize(in_);
    if (out_) cudaStreamSynchronize(out_);
    for (cudaEvent_t e : phaseDone_) if (e) cudaEventDestroy(e);
    for (cudaEvent_t e : ready_) if (e) cudaEventDestroy(e);
    for (cudaEvent_t e : freedEvents_) if (e) cudaEventDestroy(e);
    if (in_) cudaStreamDestroy(in_);
    if (out_) cudaStreamDestroy(out_);
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
    issue(moves_);
    // The stats region is resident for the whole run: the reset kernel comes next, and binds
    // from this header.
    for (uint32_t r = 0; r < regions_.size(); ++r)
      if (unwaited_[r]) {
        CUDA_CHECK(cudaStreamWaitEvent(s, ready_[r], 0));
        unwaited_[r] = false;
      }
    upload(ring_, s);
  }

  void before(Phase phase, uint32_t layer, cudaStream_t s) override {
    const PhaseInfo& ph = expect(phase, layer);
    if (t_ >= ring_ / 2) {
      const uint64_t old = t_ - ring_ / 2;
      const auto t0 = std::chrono::steady_clock::now();
      CUDA_CHECK(cudaEventSynchronize(phaseDone_[old % ring_]));
      block_.meter().waitMicros += uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
      completed_ = int64_t(old);
    }
    moves_.clear();
    plan_.before(t_, moves_);
    issue(moves_);
    for (const Use& u : ph.uses)
      if (unwaited_[u.region]) {
        CUDA_CHECK(cudaStreamWaitEvent(s, ready_[u.region], 0));
        unwaited_[u.region] = false;
      }
    upload(t_ % ring_, s);
  }

  void after(Phase, uint32_t, cudaStream_t s) override {
    CUDA_CHECK(cudaEventRecord(phaseDone_[t_ % ring_], s));
    moves_.clear();
    plan_.after(t_, moves_);
    issue(moves_);
    ++t_;
  }

  void endRun(cudaStream_t) override {
    // The compute stream is synchronised; what the device holds newer than the image goes back.
    completed_ = int64_t(t_) - 1;
    moves_.clear();
    plan_.finish(moves_);
    issue(moves_);
    CUDA_CHECK(cudaStreamSynchronize(in_));
    CUDA_CHECK(cudaStreamSynchronize(out_));
    if (meter_) meter_->stop();
  }

  // cuBLAS takes pointers: where region (layer, kind) is for the phase being launched.
  void* address(uint32_t layer, uint32_t kind) override {
    return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(pool_) + table_[layer].region[kind].offset);
  }

 private:
  const PhaseInfo& expect(Phase phase, uint32_t layer) {
    if (t_ >= plan_.phases()) NNA_FAIL("INTERNAL", "stager: more phases than the plan of this run");
    const PhaseInfo& ph = plan_.phase(t_);
    if (uint32_t(ph.stage) != uint32_t(phase) || ph.layer != layer)
      NNA_FAIL("INTERNAL", std::string("stager: the launches reached phase ") + stageName(Stage(uint32_t(phase))) + " of layer " +
                               std::to_string(layer) + " where its plan (csrc/train/phases.cc) has " + stageName(ph.stage) + " of layer " +
                               std::to_string(ph.layer));
    return ph;
  }

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
      table_[ri.layer].region[ri.kind].offset =
          st[r].resident ? st[r].slot : uint64_t(reinterpret_cast<uintptr_t>(image_) + ri.offset - reinterpret_cast<uintptr_t>(pool_));
    }
    std::memcpy(shadow + h.layers_offset, table_.data(), table_.size() * sizeof(nna_layer));
    CUDA_CHECK(cudaMemcpyAsync(pool_, shadow, size_t(headerBytes_), cudaMemcpyHostToDevice, s));
  }

  void issue(const std::vector<Move>& moves) {
    for (const Move& m : moves) {
      const uint32_t r = m.region;
      const RegionInfo& ri = regions_[r];
      uint8_t* slot = pool_ + m.slot;
      uint8_t* home = image_ + ri.offset;
      if (m.kind == Move::Fetch || m.kind == Move::Place) {
        // The slot's bytes must have left (and their kernels ended) before new ones land.
        const uint64_t end = m.slot + res_.cost(r);
        for (const Freed& f : freed_)
          if (f.begin < end && m.slot < f.end) CUDA_CHECK(cudaStreamWaitEvent(in_, freedEvents_[f.event], 0));
        // And its own last write-back to the image must have ended before the image is read.
        if (lastEviction_[r] && evictions_ - lastEviction_[r] < kFreed)
          CUDA_CHECK(cudaStreamWaitEvent(in_, freedEvents_[(lastEviction_[r] - 1) % kFreed], 0));
        if (m.kind == Move::Fetch) CUDA_CHECK(cudaMemcpyAsync(slot, home, size_t(ri.bytes), cudaMemcpyHostToDevice, in_));
        CUDA_CHECK(cudaEventRecord(ready_[r], in_));
        fetched_[r] = unwaited_[r] = true;
        continue;
      }
      // Phases up to completed_ are known to have ended; a later one is still in the ring.
      if (m.lastUse > completed_) CUDA_CHECK(cudaStreamWaitEvent(out_, phaseDone_[uint64_t(m.lastUse) % ring_], 0));
      if (fetched_[r]) CUDA_CHECK(cudaStreamWaitEvent(out_, ready_[r], 0));
      if (m.kind != Move::Drop) CUDA_CHECK(cudaMemcpyAsync(home, slot, size_t(ri.bytes), cudaMemcpyDeviceToHost, out_));
      if (m.kind == Move::Flush) continue;
      fetched_[r] = unwaited_[r] = false;
      // Remember the freed slot with an event of its own. The oldest entry makes way: the in
      // stream waits on it first, so no later fetch can overtake it once it is forgotten.
      if (freed_.size() == kFreed) {
        CUDA_CHECK(cudaStreamWaitEvent(in_, freedEvents_[freed_.front().event], 0));
        freed_.pop_front();
      }
      const uint32_t e = uint32_t(evictions_++ % kFreed);
      CUDA_CHECK(cudaEventRecord(freedEvents_[e], out_));
      freed_.push_back({m.slot, m.slot + res_.cost(r), e});
      lastEviction_[r] = evictions_;  // its number + 1 (0: none this run)
    }
  }

  Block& block_;
  Residency& res_;
  Planner plan_;
  uint8_t* pool_;
  uint8_t* image_;
  const std::vector<RegionInfo>& regions_;
  uint64_t headerBytes_;
  uint64_t ring_ = 0;
  uint8_t* shadows_ = nullptr;  // pinned: ring_ entries + one for the start of the run
  std::vector<nna_layer> table_;  // the layer table of the last shadow header (for address())
  std::vector<cudaEvent_t> phaseDone_, ready_;
  struct Freed { uint64_t begin, end; uint32_t event; };
  static constexpr size_t kFreed = 256;
  std::deque<Freed> freed_;            // the last kFreed slots evictions freed
  std::vector<cudaEvent_t> freedEvents_;
  uint64_t evictions_ = 0;
  std::vector<uint64_t> lastEviction_;
  cudaStream_t in_ = nullptr, out_ = nullptr;
  std::vector<bool> fetched_, unwaited_;
  int64_t completed_ = -1;
  uint64_t t_ = 0;
  std::vector<Move> moves_;
  std::unique_ptr<MeterThread> meter_;
};

}  // namespace

std::unique_ptr<LayerHooks> makeStager(Block& block, const RunParams& p, bool blas) { return std::make_unique<Stager>(block, p, blas); }

}  // namespace nna
