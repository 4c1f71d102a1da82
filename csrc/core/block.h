// block.h: one arena's memory: exactly one host allocation and one device allocation, and the
// counters of every real transfer between them. Views and the JS wrapper share ownership
// through shared_ptr, so a forgotten arena is freed only once nothing can reach its memory;
// dispose() frees at once (or, while a run holds the block, as soon as it ends).
// A block knows nothing of training or budgets: csrc/budget/budgeted_block.h derives from it
// for arenas whose device side is scheduled within a byte budget.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backend.h"
#include "run_copies.h"

namespace nna {

struct Stats {
  uint64_t hostAllocs = 0, deviceAllocs = 0, hostFrees = 0, deviceFrees = 0;
  uint64_t toDeviceTransfers = 0, toDeviceBytes = 0, toHostTransfers = 0, toHostBytes = 0;
};

struct Range {
  uint64_t offset, bytes;
};

struct BlockOptions {
  bool cuda = false;
  bool pinned = true;  // CUDA only: cudaMallocHost for the host side
  Memory memory = Memory::Device;
  // The device side is initialised by the CPU (managed pages then start on the host); always so
  // for staged memory, whose device side is a pinned host image.
  bool initOnHost = false;
  int device = 0;  // CUDA only: the device index both allocations and every run use
};

class Block {
 public:
  // `header`: the validated copy (launch geometry comes from it, never from memory a user can
  // write). Allocates header's total_bytes on both sides, zeroed, with the header at offset 0
  // of both (the device copy is one counted transfer).
  Block(std::vector<uint8_t> header, const BlockOptions& options);
  virtual ~Block();
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  // Each range is one real transfer; returns bytes moved. Ranges are checked against total.
  uint64_t transfer(const std::vector<Range>& ranges, Dir dir);
  // A run's own copies (RunParams::copies) of `in` and `out`, checked as transfer() checks its
  // ranges; the header is never among them (the device holds the copy validated at creation).
  RunCopies runCopies(const std::vector<Range>& in, const std::vector<Range>& out) const;
  // Counts each non-empty range of `c` as one transfer, as transfer() would have (once the run
  // made them).
  void countRunCopies(const RunCopies& c);
  void prefetch(const std::vector<Range>& ranges, Where where);
  void advise(const std::vector<Range>& ranges, Advice advice, Where where, bool unset);
  // Frees both allocations once; later calls do nothing. Waits for a run that holds the block.
  void release();
  // Frees now if nothing holds the block, else as soon as the holder lets go (releaseIfAsked).
  void releaseSoon();
  // Called by whoever holds mutex(): completes a releaseSoon() that found the block busy.
  void releaseIfAsked();

  bool released() const { return host_ == nullptr; }
  uint8_t* host() const { return host_; }
  // The device side: device or managed memory, or (staged) the pinned image the pool mirrors.
  uint8_t* device() const { return device_; }
  uint64_t total() const { return total_; }
  const uint8_t* header() const { return header_.data(); }
  size_t headerBytes() const { return header_.size(); }
  Backend& backend() { return *backend_; }
  const BlockOptions& options() const { return options_; }
  // Never waits for a run: the counters have a lock of their own.
  Stats stats() const;
  // Counts one real transfer made outside transfer() (a streaming window's upload, which goes
  // to a buffer of its own while a run holds the block).
  void countTransfer(Dir dir, uint64_t bytes);
  // Work that holds mutex() (a queued run's worker): device bytes [offset, + bytes) into dst, one
  // counted transfer. A budgeted block reads them its own way (its host side then holds them too).
  virtual void readHeld(void* dst, uint64_t offset, uint64_t bytes);
  // Serialises users of the memory (transfers, runs) against release().
  std::mutex& mutex() { return mutex_; }
  // What the last run left for its caller to read (train/run_outputs.h: runOutputsOf), written
  // by the run with mutex() held.
  std::shared_ptr<void>& runOutputs() { return runOutputs_; }
  // What a backend keeps from one run of this arena to the next (RunParams::runCache; CUDA: the
  // per-layer path's captured step), with mutex() held; dropped with the memory.
  std::shared_ptr<void>& runCache() { return runCache_; }
  // Host bytes beside the arena (page-locked where its host side is) for staging a caller's
  // rows (RunFeed's slots), kept from one call to the next and grown when a call needs
  // more; with mutex() held. Freed with the arena's memory.
  uint8_t* staging(uint64_t bytes);

 protected:
  // One range of a transfer, with mutex() held. A budgeted block moves its memory its own way.
  virtual void copyRange(uint64_t offset, uint64_t bytes, Dir dir);
  // An explicit prefetch moved pages behind the back of whoever tracks them.
  virtual void placementChanged() {}
  // Frees what a derived block allocated, with mutex() held, before the two allocations go.
  virtual void releaseExtra() {}
  void releaseLocked();

 private:
  void checkRanges(const std::vector<Range>& ranges) const;
  void freeStaging();
  std::unique_ptr<Backend> backend_;
  BlockOptions options_;
  std::vector<uint8_t> header_;
  uint64_t total_;
  uint8_t* host_ = nullptr;
  uint8_t* device_ = nullptr;
  std::atomic<bool> releaseAsked_{false};
  Stats stats_;
  std::shared_ptr<void> runOutputs_;
  std::shared_ptr<void> runCache_;
  uint8_t* staging_ = nullptr;
  uint64_t stagingBytes_ = 0;
  mutable std::mutex statsMutex_;
  mutable std::mutex mutex_;
};

}  // namespace nna
