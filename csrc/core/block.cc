#include "block.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "failure.h"

namespace nna {

Block::Block(uint64_t total, const uint8_t* header, size_t headerBytes, const BlockOptions& options)
    : backend_(options.cuda ? makeCudaBackend() : makeCpuBackend()), options_(options), total_(total), header_(header, header + headerBytes) {
  if (total > SIZE_MAX) NNA_FAIL("HOST_OOM", "arena of " + std::to_string(total) + " bytes exceeds the address space");
  if (headerBytes > total) NNA_FAIL("BAD_HEADER", "header longer than the arena");
  const bool staged = options.memory == Memory::Staged;
  if (options.budget && options.memory == Memory::Device) NNA_FAIL("BAD_OPTION", "a device budget applies to managed or staged memory, not plain device memory");
  if (staged && !options.budget) NNA_FAIL("BAD_OPTION", "staged memory needs a device budget");
  // The budget is checked against the plan before anything is allocated (BUDGET_TOO_SMALL).
  if (options.budget) residency_ = std::make_unique<Residency>(header, staged ? Placement::Staged : Placement::Managed, options.budget);
  host_ = static_cast<uint8_t*>(backend_->allocHost(total, options.pinned));
  stats_.hostAllocs++;
  try {
    device_ = static_cast<uint8_t*>(backend_->allocDevice(total, options.memory));
    if (staged) {
      // The pool never needs more than the whole arena beside its header copy.
      poolBytes_ = std::min<uint64_t>(options.budget, total + residency_->fixedBytes());
      pool_ = static_cast<uint8_t*>(backend_->allocDevice(poolBytes_, Memory::Device));
    }
    stats_.deviceAllocs++;
    // The header goes to the device side at creation (one counted transfer), so device code can
    // bind from the base pointer even before the first full toDevice(). A budgeted arena starts
    // with all of it on the host (CPU writes): the device then holds none of it until a run.
    if (staged || budgetedManaged()) {
      std::memset(device_, 0, total);
      std::memcpy(device_, header, headerBytes);
    } else {
      backend_->zeroDevice(device_, total);
      backend_->copy(device_, header, headerBytes, Dir::ToDevice);
    }
    std::memcpy(host_, header, headerBytes);
    stats_.toDeviceTransfers++;
    stats_.toDeviceBytes += headerBytes;
  } catch (...) {
    // A failed device allocation must not leak the host one.
    if (pool_) { backend_->freeDevice(pool_, Memory::Device); pool_ = nullptr; }
    if (device_) { backend_->freeDevice(device_, options.memory); device_ = nullptr; }
    backend_->freeHost(host_, options.pinned);
    host_ = nullptr;
    throw;
  }
  std::memset(host_ + headerBytes, 0, total - headerBytes);
}

Block::~Block() {
  try { release(); } catch (...) { /* a destructor cannot report; release() already cleared the pointers */ }
}

void Block::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!host_) return;
  uint8_t* h = host_;
  uint8_t* d = device_;
  uint8_t* pool = pool_;
  host_ = device_ = pool_ = nullptr;
  stats_.hostFrees++;
  if (d) stats_.deviceFrees++;
  if (pool) backend_->freeDevice(pool, Memory::Device);
  if (d) backend_->freeDevice(d, options_.memory);
  backend_->freeHost(h, options_.pinned);
}

void Block::checkRanges(const std::vector<Range>& ranges) const {
  if (!host_) NNA_FAIL("DISPOSED", "the arena was disposed");
  for (const Range& r : ranges)
    if (r.offset > total_ || r.bytes > total_ - r.offset)
      NNA_FAIL("OUT_OF_RANGE", "range [" + std::to_string(r.offset) + ", +" + std::to_string(r.bytes) + ") outside the arena of " + std::to_string(total_) + " bytes");
}

uint64_t Block::transfer(const std::vector<Range>& ranges, Dir dir) {
  std::lock_guard<std::mutex> lock(mutex_);
  checkRanges(ranges);
  // Device code trusts the device copy of the header: it may only ever receive the one
  // validated at creation.
  if (dir == Dir::ToDevice)
    for (const Range& r : ranges)
      if (r.bytes && r.offset < header_.size() && std::memcmp(host_, header_.data(), header_.size()) != 0)
        NNA_FAIL("BAD_HEADER", "the header bytes on the host were modified; refusing to send them to the device");
  uint64_t moved = 0;
  for (const Range& r : ranges) {
    if (!r.bytes) continue;
    uint8_t* dev = device_ + r.offset;
    uint8_t* hst = host_ + r.offset;
    if (options_.memory == Memory::Staged || budgetedManaged()) {
      // Outside runs a budgeted arena lives on the host: managed pages come back first (so a
      // transfer never leaves more of it on the device than the scheduler placed), then the
      // CPU copies. Staged: the device side is the pinned image; the pool copies of the range
      // become stale when it is written.
      if (budgetedManaged()) backend_->prefetch(dev, r.bytes, Where::Host);
      else flushPool(r.offset, r.bytes);
      if (dir == Dir::ToDevice) std::memcpy(dev, hst, r.bytes);
      else std::memcpy(hst, dev, r.bytes);
      if (budgetedManaged() || dir == Dir::ToDevice) residency_->forget(r.offset, r.bytes);
    } else if (dir == Dir::ToDevice) {
      backend_->copy(dev, hst, r.bytes, dir);
    } else {
      backend_->copy(hst, dev, r.bytes, dir);
    }
    // Counted here, at the real copy, and only after it succeeded.
    (dir == Dir::ToDevice ? stats_.toDeviceTransfers : stats_.toHostTransfers)++;
    (dir == Dir::ToDevice ? stats_.toDeviceBytes : stats_.toHostBytes) += r.bytes;
    moved += r.bytes;
  }
  return moved;
}

// Staged: regions a run left newer in the pool than in the image go to the image first, so it
// can be read or partly rewritten (residency.h, dirtyIn).
void Block::flushPool(uint64_t offset, uint64_t bytes) {
  for (uint32_t r : residency_->dirtyIn(offset, bytes)) {
    const RegionInfo& ri = residency_->model().regions()[r];
    backend_->copy(device_ + ri.offset, pool_ + residency_->state()[r].slot, size_t(ri.bytes), Dir::ToHost);
    residency_->cleaned(r);
  }
}

void Block::prefetch(const std::vector<Range>& ranges, Where where) {
  std::lock_guard<std::mutex> lock(mutex_);
  checkRanges(ranges);
  if (!options_.cuda) NNA_FAIL("NOT_SUPPORTED", "prefetch applies to managed memory on the CUDA backend; this arena is on the CPU backend");
  if (options_.memory != Memory::Managed)
    NNA_FAIL("NOT_SUPPORTED", std::string("prefetch applies to managed memory; this arena uses ") +
                                  (options_.memory == Memory::Staged ? "staged memory (memory: 'staged')" : "plain device memory (memory: 'device')"));
  for (const Range& r : ranges) if (r.bytes) backend_->prefetch(device_ + r.offset, r.bytes, where);
  // The scheduler no longer knows what is resident: its next run starts from the host.
  if (residency_) residency_->forgetAll();
}

void Block::advise(const std::vector<Range>& ranges, Advice advice, Where where, bool unset) {
  std::lock_guard<std::mutex> lock(mutex_);
  checkRanges(ranges);
  if (!options_.cuda) NNA_FAIL("NOT_SUPPORTED", "advise applies to managed memory on the CUDA backend; this arena is on the CPU backend");
  if (options_.memory != Memory::Managed)
    NNA_FAIL("NOT_SUPPORTED", std::string("advise applies to managed memory; this arena uses ") +
                                  (options_.memory == Memory::Staged ? "staged memory (memory: 'staged')" : "plain device memory (memory: 'device')"));
  for (const Range& r : ranges) if (r.bytes) backend_->advise(device_ + r.offset, r.bytes, advice, where, unset);
}

Stats Block::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace nna
