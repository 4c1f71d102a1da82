#include "block.h"

#include <cstring>
#include <string>

#include "../include/nn_arena.h"
#include "failure.h"
#include "host_memory.h"

namespace nna {

namespace {
uint64_t totalOf(const std::vector<uint8_t>& header) {
  nna_header h;
  if (header.size() < sizeof h) NNA_FAIL("BAD_HEADER", "header shorter than its struct");
  std::memcpy(&h, header.data(), sizeof h);
  if (h.total_bytes > SIZE_MAX) NNA_FAIL("HOST_OOM", "arena of " + std::to_string(h.total_bytes) + " bytes exceeds the address space");
  if (header.size() > h.total_bytes) NNA_FAIL("BAD_HEADER", "header longer than the arena");
  return h.total_bytes;
}
}  // namespace

Block::Block(std::vector<uint8_t> header, const BlockOptions& options)
    : backend_(options.cuda ? makeCudaBackend(options.device) : makeCpuBackend()), options_(options), header_(std::move(header)), total_(totalOf(header_)) {
  const size_t headerBytes = header_.size();
  host_ = static_cast<uint8_t*>(backend_->allocHost(total_, options.pinned));
  try {
    device_ = static_cast<uint8_t*>(backend_->allocDevice(total_, options.memory));
    // The header goes to the device side at creation (one counted transfer), so device code can
    // bind from the base pointer even before the first full toDevice().
    if (options.initOnHost || options.memory == Memory::Staged) {
      std::memset(device_, 0, total_);
      std::memcpy(device_, header_.data(), headerBytes);
    } else {
      backend_->zeroDevice(device_, total_);
      backend_->copy(device_, header_.data(), headerBytes, Dir::ToDevice);
    }
  } catch (...) {
    // A failed device allocation must not leak the host one.
    if (device_) backend_->freeDevice(device_, total_, options.memory);
    backend_->freeHost(host_, total_, options.pinned);
    host_ = device_ = nullptr;
    throw;
  }
  std::memcpy(host_, header_.data(), headerBytes);
  if (options.pinned || !hostAllocZeroed(total_)) std::memset(host_ + headerBytes, 0, total_ - headerBytes);
  stats_.hostAllocs++;
  stats_.deviceAllocs++;
  stats_.toDeviceTransfers++;
  stats_.toDeviceBytes += headerBytes;
}

Block::~Block() {
  try {
    release();
  } catch (...) { /* a destructor cannot report; releaseLocked() already cleared the pointers */
  }
}

void Block::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  releaseLocked();
}

void Block::releaseSoon() {
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (lock.owns_lock())
    releaseLocked();
  else
    releaseAsked_ = true;  // the run holding the block frees it as it ends (releaseIfAsked)
}

void Block::releaseIfAsked() {
  if (releaseAsked_) releaseLocked();
}

void Block::releaseLocked() {
  if (!host_) return;
  uint8_t* h = host_;
  uint8_t* d = device_;
  host_ = device_ = nullptr;
  {
    std::lock_guard<std::mutex> s(statsMutex_);
    stats_.hostFrees++;
    stats_.deviceFrees++;
  }
  releaseExtra();
  runCache_.reset();  // a captured graph names the memory about to go
  freeStaging();
  backend_->freeDevice(d, total_, options_.memory);
  backend_->freeHost(h, total_, options_.pinned);
}

uint8_t* Block::staging(uint64_t bytes) {
  if (!host_) NNA_FAIL("DISPOSED", "the arena was disposed");
  if (bytes <= stagingBytes_) return staging_;
  freeStaging();
  staging_ = static_cast<uint8_t*>(backend_->allocHost(bytes, options_.pinned));
  stagingBytes_ = bytes;
  return staging_;
}

void Block::freeStaging() {
  if (staging_) backend_->freeHost(staging_, stagingBytes_, options_.pinned);
  staging_ = nullptr;
  stagingBytes_ = 0;
}

void Block::checkRanges(const std::vector<Range>& ranges) const {
  if (!host_) NNA_FAIL("DISPOSED", "the arena was disposed");
  for (const Range& r : ranges)
    if (r.offset > total_ || r.bytes > total_ - r.offset)
      NNA_FAIL("OUT_OF_RANGE", "range [" + std::to_string(r.offset) + ", +" + std::to_string(r.bytes) + ") outside the arena of " + std::to_string(total_) + " bytes");
}

void Block::copyRange(uint64_t offset, uint64_t bytes, Dir dir) {
  if (dir == Dir::ToDevice)
    backend_->copy(device_ + offset, host_ + offset, bytes, dir);
  else
    backend_->copy(host_ + offset, device_ + offset, bytes, dir);
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
    copyRange(r.offset, r.bytes, dir);
    // Counted here, at the real copy, and only after it succeeded.
    std::lock_guard<std::mutex> s(statsMutex_);
    (dir == Dir::ToDevice ? stats_.toDeviceTransfers : stats_.toHostTransfers)++;
    (dir == Dir::ToDevice ? stats_.toDeviceBytes : stats_.toHostBytes) += r.bytes;
    moved += r.bytes;
  }
  return moved;
}

RunCopies Block::runCopies(const std::vector<Range>& in, const std::vector<Range>& out) const {
  checkRanges(in);
  checkRanges(out);
  RunCopies c;
  c.host = host_;
  c.pinned = options_.pinned;
  for (const auto* list : {&in, &out})
    for (const Range& r : *list) {
      if (r.bytes && r.offset < header_.size()) NNA_FAIL("OUT_OF_RANGE", "a run's copies never include the header (range at offset " + std::to_string(r.offset) + ")");
      (list == &in ? c.in : c.out).push_back({r.offset, r.bytes});
    }
  return c;
}

void Block::countRunCopies(const RunCopies& c) {
  for (const RunCopies::Span& s : c.in)
    if (s.bytes) countTransfer(Dir::ToDevice, s.bytes);
  for (const RunCopies::Span& s : c.out)
    if (s.bytes) countTransfer(Dir::ToHost, s.bytes);
}

void Block::readHeld(void* dst, uint64_t offset, uint64_t bytes) {
  checkRanges({{offset, bytes}});
  backend().copy(dst, device_ + offset, bytes, Dir::ToHost);
  countTransfer(Dir::ToHost, bytes);
}

void Block::countTransfer(Dir dir, uint64_t bytes) {
  std::lock_guard<std::mutex> s(statsMutex_);
  (dir == Dir::ToDevice ? stats_.toDeviceTransfers : stats_.toHostTransfers)++;
  (dir == Dir::ToDevice ? stats_.toDeviceBytes : stats_.toHostBytes) += bytes;
}

namespace {
void requireManaged(const BlockOptions& o, const char* what) {
  if (!o.cuda) NNA_FAIL("NOT_SUPPORTED", std::string(what) + " applies to managed memory on the CUDA backend; this arena is on the CPU backend");
  if (o.memory != Memory::Managed)
    NNA_FAIL("NOT_SUPPORTED", std::string(what) + " applies to managed memory; this arena uses " +
                                  (o.memory == Memory::Staged ? "staged memory (memory: 'staged')" : "plain device memory (memory: 'device')"));
}
}  // namespace

void Block::prefetch(const std::vector<Range>& ranges, Where where) {
  std::lock_guard<std::mutex> lock(mutex_);
  checkRanges(ranges);
  requireManaged(options_, "prefetch");
  for (const Range& r : ranges)
    if (r.bytes) backend_->prefetch(device_ + r.offset, r.bytes, where);
  placementChanged();
}

void Block::advise(const std::vector<Range>& ranges, Advice advice, Where where, bool unset) {
  std::lock_guard<std::mutex> lock(mutex_);
  checkRanges(ranges);
  requireManaged(options_, "advise");
  for (const Range& r : ranges)
    if (r.bytes) backend_->advise(device_ + r.offset, r.bytes, advice, where, unset);
}

Stats Block::stats() const {
  std::lock_guard<std::mutex> lock(statsMutex_);
  return stats_;
}

}  // namespace nna
