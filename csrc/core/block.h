// block.h: one arena's memory: exactly one host allocation and one device allocation, and the
// counters of every real transfer between them. Views and the JS wrapper share ownership
// through shared_ptr, so a forgotten arena is freed only once nothing can reach its memory;
// dispose() frees at once and the addon detaches every view first.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "../budget/residency.h"
#include "backend.h"

namespace nna {

struct Stats {
  uint64_t hostAllocs = 0, deviceAllocs = 0, hostFrees = 0, deviceFrees = 0;
  uint64_t toDeviceTransfers = 0, toDeviceBytes = 0, toHostTransfers = 0, toHostBytes = 0;
};

struct Range { uint64_t offset, bytes; };

struct BlockOptions {
  bool cuda = false;
  bool pinned = true;  // CUDA only: cudaMallocHost for the host side
  Memory memory = Memory::Device;
  // Managed or staged: bytes of the arena the device may hold (0: no budget). Managed memory
  // with a budget is scheduled (um_scheduler.cu) unless `scheduled` is false (faults only).
  uint64_t budget = 0;
  bool scheduled = true;
};

// What the device held during a budgeted arena's last run (filled by the CUDA side).
struct DeviceMeter {
  uint64_t baseline = 0;       // device bytes in use with nothing of the arena resident
  bool hasBaseline = false;
  uint64_t peakInUse = 0;      // device-wide bytes in use at the last run's peak
  uint64_t samples = 0;        // cudaMemGetInfo samples taken in the last run
  // Where the last run's time went, to explain a slow run: the launching thread waiting for
  // fetches (managed) or for the GPU to catch up (staged), and the movers' calls (managed:
  // prefetches and discards in, and out with their synchronisation).
  uint64_t waitMicros = 0, fetchMicros = 0, evictMicros = 0;
};

class Block {
 public:
  // Allocates total bytes on both sides (zeroed), copies `header` to offset 0 of the host side.
  Block(uint64_t total, const uint8_t* header, size_t headerBytes, const BlockOptions& options);
  ~Block();
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  // Each range is one real transfer; returns bytes moved. Ranges are checked against total.
  uint64_t transfer(const std::vector<Range>& ranges, Dir dir);
  void prefetch(const std::vector<Range>& ranges, Where where);
  void advise(const std::vector<Range>& ranges, Advice advice, Where where, bool unset);
  void release();  // frees both allocations once; later calls do nothing

  bool released() const { return host_ == nullptr; }
  uint8_t* host() const { return host_; }
  // The device side: device or managed memory, or (staged) the pinned image the pool mirrors.
  uint8_t* device() const { return device_; }
  // Staged: the device pool (budget bytes) regions are copied into.
  uint8_t* pool() const { return pool_; }
  uint64_t poolBytes() const { return poolBytes_; }
  // Budgeted arenas: where regions are, kept across runs; null without a budget.
  Residency* residency() const { return residency_.get(); }
  DeviceMeter& meter() { return meter_; }
  uint64_t total() const { return total_; }
  // The header as validated at creation: launch geometry comes from here, never from memory
  // a user can write.
  const uint8_t* header() const { return header_.data(); }
  Backend& backend() { return *backend_; }
  const BlockOptions& options() const { return options_; }
  Stats stats() const;
  // Serialises users of the memory (transfers, kernels) against release().
  std::mutex& mutex() { return mutex_; }

 private:
  void checkRanges(const std::vector<Range>& ranges) const;
  bool budgetedManaged() const { return options_.memory == Memory::Managed && options_.budget > 0; }
  void flushPool(uint64_t offset, uint64_t bytes);  // staged: dirty pool regions to the image
  std::unique_ptr<Backend> backend_;
  BlockOptions options_;
  uint64_t total_;
  std::vector<uint8_t> header_;
  uint8_t* host_ = nullptr;
  uint8_t* device_ = nullptr;
  uint8_t* pool_ = nullptr;
  uint64_t poolBytes_ = 0;
  std::unique_ptr<Residency> residency_;
  DeviceMeter meter_;
  Stats stats_;
  mutable std::mutex mutex_;
};

}  // namespace nna
