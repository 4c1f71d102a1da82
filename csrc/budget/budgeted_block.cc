#include "budgeted_block.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "../core/failure.h"

namespace nna {

std::unique_ptr<Residency> BudgetedBlock::check(const uint8_t* header, Memory memory, const Budget& budget) {
  const bool staged = memory == Memory::Staged;
  if (!budget.bytes) {
    if (staged) NNA_FAIL_FIELD("BUDGET_REQUIRED", "deviceBudget", "staged memory needs a device budget in bytes");
    return nullptr;
  }
  if (memory == Memory::Device) NNA_FAIL_FIELD("BUDGET_NEEDS_MANAGED", "deviceBudget", "applies to memory 'managed' or 'staged', not 'device'");
  refuseCompact(header);
  // Residency's constructor checks the budget against the plan (BUDGET_TOO_SMALL).
  return std::make_unique<Residency>(header, staged ? Placement::Staged : Placement::Managed, budget.bytes);
}

std::shared_ptr<Block> BudgetedBlock::create(std::vector<uint8_t> header, const BlockOptions& options, const Budget& budget) {
  std::unique_ptr<Residency> residency = check(header.data(), options.memory, budget);
  if (!residency) return std::make_shared<Block>(std::move(header), options);
  if (!options.cuda) NNA_FAIL("NOT_SUPPORTED", "a device budget needs the CUDA backend");
  BlockOptions o = options;
  o.initOnHost = true;  // a budgeted arena starts with all of it on the host: the device holds none until a run
  return std::make_shared<BudgetedBlock>(std::move(header), o, budget, std::move(residency));
}

BudgetedBlock::BudgetedBlock(std::vector<uint8_t> header, const BlockOptions& options, const Budget& budget, std::unique_ptr<Residency> residency)
    : Block(std::move(header), options), budget_(budget), residency_(std::move(residency)) {
  if (options.memory == Memory::Staged) {
    // The pool never needs more than the whole arena beside its header copy.
    poolBytes_ = std::min<uint64_t>(budget.bytes, total() + residency_->fixedBytes());
    pool_ = static_cast<uint8_t*>(backend().allocDevice(poolBytes_, Memory::Device));
  }
}

BudgetedBlock::~BudgetedBlock() {
  try {
    release();
  } catch (...) { /* a destructor cannot report */
  }
}

void BudgetedBlock::releaseExtra() {
  if (pool_) backend().freeDevice(pool_, poolBytes_, Memory::Device);
  pool_ = nullptr;
}

// Straight from the image, made current first: the host side is the JS thread's, and a queued
// run's worker must not write it (a view may be read there meanwhile).
void BudgetedBlock::readHeld(void* dst, uint64_t offset, uint64_t bytes) {
  std::memcpy(dst, currentImage(offset, bytes), bytes);
  if (options().memory == Memory::Managed) residency_->forget(offset, bytes);
  countTransfer(Dir::ToHost, bytes);
}

// Outside runs a budgeted arena lives on the host: managed pages come back first (so a transfer
// never leaves more of it on the device than the scheduler placed), then the CPU copies.
// Staged: the device side is the pinned image; pool copies of the range become stale when it is
// written.
void BudgetedBlock::copyRange(uint64_t offset, uint64_t bytes, Dir dir) {
  uint8_t* dev = currentImage(offset, bytes);
  uint8_t* hst = host() + offset;
  if (dir == Dir::ToDevice)
    std::memcpy(dev, hst, bytes);
  else
    std::memcpy(hst, dev, bytes);
  if (options().memory == Memory::Managed || dir == Dir::ToDevice) residency_->forget(offset, bytes);
}

// The device side of [offset, + bytes), readable by the CPU and holding the newest bytes:
// managed pages brought home, or the staged pool's newer regions copied to the image.
uint8_t* BudgetedBlock::currentImage(uint64_t offset, uint64_t bytes) {
  uint8_t* dev = device() + offset;
  if (options().memory == Memory::Managed)
    backend().prefetch(dev, bytes, Where::Host);
  else
    flushPool(offset, bytes);
  return dev;
}

// Staged: regions a run left newer in the pool than in the image go to the image first, so it
// can be read or partly rewritten (residency.h, dirtyIn).
void BudgetedBlock::flushPool(uint64_t offset, uint64_t bytes) {
  for (uint32_t r : residency_->dirtyIn(offset, bytes)) {
    const RegionInfo& ri = residency_->model().regions()[r];
    backend().copy(device() + ri.offset, pool_ + residency_->state()[r].slot, size_t(ri.bytes), Dir::ToHost);
    residency_->cleaned(r);
  }
}

}  // namespace nna
