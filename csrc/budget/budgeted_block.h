// budgeted_block.h: an arena whose device side is kept within a byte budget while it trains.
// Managed memory: one cudaMallocManaged allocation that lives on the host outside runs, its
// pages placed by the prefetch scheduler (um_scheduler.cu). Staged memory: the device side is a
// pinned host image and the device holds one pool of the budget's size (staging.cu). Both plan
// from the same Residency (residency.h). The plain Block below knows none of this: this class
// wraps its transfers (outside runs the bytes are on the host) and owns pool, plan and meter.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "../core/block.h"
#include "../train/train.h"
#include "residency.h"

namespace nna {

// What the device held during the last run (filled by the schedulers).
struct DeviceMeter {
  uint64_t baseline = 0;  // device bytes in use with nothing of the arena resident
  bool hasBaseline = false;
  uint64_t peakInUse = 0;  // device-wide bytes in use at the last run's peak
  uint64_t samples = 0;    // cudaMemGetInfo samples taken in the last run
  // Where the last run's time went, to explain a slow run: the launching thread waiting for
  // fetches (managed) or for the GPU to catch up (staged), and the movers' calls (managed:
  // prefetches and discards in, and out with their synchronisation).
  uint64_t waitMicros = 0, fetchMicros = 0, evictMicros = 0;
};

struct Budget {
  uint64_t bytes = 0;     // 0: none
  bool scheduled = true;  // managed: run the prefetch scheduler (else pages fault in on demand)
};

class BudgetedBlock final : public Block {
 public:
  // The one check of a device budget (budget.bytes 0: none): it applies to managed or staged
  // memory, staged memory needs one, and it must hold the largest phase (Failures with field
  // deviceBudget). Returns the plan it validated, null without a budget.
  static std::unique_ptr<Residency> check(const uint8_t* header, Memory memory, const Budget& budget);
  // check(), then the block: a plain Block where there is no budget. Nothing is allocated
  // before the budget passed.
  static std::shared_ptr<Block> create(std::vector<uint8_t> header, const BlockOptions& options, const Budget& budget);

  BudgetedBlock(std::vector<uint8_t> header, const BlockOptions& options, const Budget& budget, std::unique_ptr<Residency> residency);
  ~BudgetedBlock() override;

  const Budget& budget() const { return budget_; }
  // Staged: the device pool (budget bytes) regions are copied into.
  uint8_t* pool() const { return pool_; }
  uint64_t poolBytes() const { return poolBytes_; }
  // Where regions are, kept across runs.
  Residency& residency() { return *residency_; }
  const Residency& residency() const { return *residency_; }
  DeviceMeter& meter() { return meter_; }
  const DeviceMeter& meter() const { return meter_; }

  void readHeld(void* dst, uint64_t offset, uint64_t bytes) override;

 protected:
  void copyRange(uint64_t offset, uint64_t bytes, Dir dir) override;
  void placementChanged() override { residency_->forgetAll(); }
  void releaseExtra() override;

 private:
  void flushPool(uint64_t offset, uint64_t bytes);  // staged: dirty pool regions to the image
  uint8_t* currentImage(uint64_t offset, uint64_t bytes);
  Budget budget_;
  std::unique_ptr<Residency> residency_;
  uint8_t* pool_ = nullptr;
  uint64_t poolBytes_ = 0;
  DeviceMeter meter_;
};

// Where [p, p + bytes) of a managed allocation was last prefetched (cudaMemRangeGetAttribute):
// 'device', 'host', or 'none' (never prefetched, or not all of it to the same place).
const char* managedLastPrefetch(const void* p, size_t bytes);

// A run on a budgeted arena: its memory scheduler (managed) or stager (staged) as the per-layer
// CUDA path's hooks (budget_run.cu, or absent.cc without CUDA). Hold block.mutex().
const char* runBudgeted(BudgetedBlock& block, const RunParams& p);

}  // namespace nna
