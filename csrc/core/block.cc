#include "block.h"

#include <cstring>
#include <string>

#include "failure.h"

namespace nna {

Block::Block(uint64_t total, const uint8_t* header, size_t headerBytes, const BlockOptions& options)
    : backend_(options.cuda ? makeCudaBackend() : makeCpuBackend()), options_(options), total_(total), header_(header, header + headerBytes) {
  if (total > SIZE_MAX) NNA_FAIL("HOST_OOM", "arena of " + std::to_string(total) + " bytes exceeds the address space");
  if (headerBytes > total) NNA_FAIL("BAD_HEADER", "header longer than the arena");
  host_ = static_cast<uint8_t*>(backend_->allocHost(total, options.pinned));
  stats_.hostAllocs++;
  try {
    device_ = static_cast<uint8_t*>(backend_->allocDevice(total, options.memory));
    stats_.deviceAllocs++;
    backend_->zeroDevice(device_, total);
    // The header goes to the device at creation (one counted transfer), so device code can
    // bind from the base pointer even before the first full toDevice().
    std::memcpy(host_, header, headerBytes);
    backend_->copy(device_, header, headerBytes, Dir::ToDevice);
    stats_.toDeviceTransfers++;
    stats_.toDeviceBytes += headerBytes;
  } catch (...) {
    // A failed device allocation must not leak the host one.
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
  host_ = device_ = nullptr;
  stats_.hostFrees++;
  if (d) stats_.deviceFrees++;
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
    if (dir == Dir::ToDevice) backend_->copy(device_ + r.offset, host_ + r.offset, r.bytes, dir);
    else backend_->copy(host_ + r.offset, device_ + r.offset, r.bytes, dir);
    // Counted here, at the real copy, and only after it succeeded.
    (dir == Dir::ToDevice ? stats_.toDeviceTransfers : stats_.toHostTransfers)++;
    (dir == Dir::ToDevice ? stats_.toDeviceBytes : stats_.toHostBytes) += r.bytes;
    moved += r.bytes;
  }
  return moved;
}

void Block::prefetch(const std::vector<Range>& ranges, Where where) {
  std::lock_guard<std::mutex> lock(mutex_);
  checkRanges(ranges);
  if (!options_.cuda) NNA_FAIL("NOT_SUPPORTED", "prefetch applies to managed memory on the CUDA backend; this arena is on the CPU backend");
  if (options_.memory != Memory::Managed)
    NNA_FAIL("NOT_SUPPORTED", "prefetch applies to managed memory; this arena uses plain device memory (memory: 'device')");
  for (const Range& r : ranges) if (r.bytes) backend_->prefetch(device_ + r.offset, r.bytes, where);
}

void Block::advise(const std::vector<Range>& ranges, Advice advice, Where where, bool unset) {
  std::lock_guard<std::mutex> lock(mutex_);
  checkRanges(ranges);
  if (!options_.cuda) NNA_FAIL("NOT_SUPPORTED", "advise applies to managed memory on the CUDA backend; this arena is on the CPU backend");
  if (options_.memory != Memory::Managed)
    NNA_FAIL("NOT_SUPPORTED", "advise applies to managed memory; this arena uses plain device memory (memory: 'device')");
  for (const Range& r : ranges) if (r.bytes) backend_->advise(device_ + r.offset, r.bytes, advice, where, unset);
}

Stats Block::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace nna
