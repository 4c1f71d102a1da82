// residency.h: which regions of an arena are on the device, and the plan that keeps them
// within a byte budget while a run goes through its phases (phases.h). Pure bookkeeping, no
// CUDA: the managed-memory scheduler (csrc/budget/um_scheduler.cu) turns the moves into
// prefetches and discards, the explicit stager (csrc/budget/staging.cu) into copies; the CPU
// tests replay it with a model of where each region's valid bytes are (residency_check.cc).
//
// The policy ("direct instruction" in the seed study: the program, not the driver, decides):
//   - before a phase, whatever it uses is made resident (a synchronous need: the GPU waits);
//   - after a phase, the following phases' needs are fetched ahead while they fit, so copies
//     overlap the kernels;
//   - room is made by evicting first what is dead (its next use overwrites it whole: dropped,
//     no copy), then what is needed latest (Belady); nothing needed sooner than the phase being
//     prepared is ever evicted for it.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../train/phases.h"

namespace nna {

// Managed memory migrates in pages of this size on the GPU: the unit a managed plan places.
constexpr uint64_t kManagedGranule = 64 * 1024;

enum class Placement : uint32_t {
  Managed = 0,  // one cudaMallocManaged arena, made resident by prefetch, evicted by prefetch to host / discard
  Staged = 1,   // the arena in pinned host memory, regions copied into slots of a device pool
};

struct Move {
  enum Kind : uint8_t {
    Fetch,      // to the device with its bytes
    Place,      // to the device, bytes dead (the phase it is for writes it whole): no copy in
    WriteBack,  // off the device, keeping its bytes (managed: prefetch to host; staged: copy out)
    Drop,       // off the device, no copy: bytes dead, or (staged) the host copy is current
  };
  Kind kind;
  uint32_t region;
  uint64_t slot;        // staged: offset of the region in the device pool
  int64_t lastUse;      // WriteBack, Drop: the run's phase whose kernels must end first (-1: none)
  uint64_t target = 0;  // Fetch, Place: the run's phase it is for
};

struct ResidencyCounters {
  uint64_t runs = 0, steps = 0;
  uint64_t fetches = 0, fetchedBytes = 0, placedBytes = 0;
  uint64_t writeBacks = 0, writtenBackBytes = 0, drops = 0, droppedBytes = 0;
  uint64_t compactions = 0;         // staged: pool too fragmented for a phase, emptied and refilled
  uint64_t peakScheduledBytes = 0;  // most bytes accounted on the device at once (granule-rounded)
  void add(const ResidencyCounters& o);
};

// First-fit allocator of slots in the staged device pool.
class SlotPool {
 public:
  void reset(uint64_t begin, uint64_t end);
  bool fits(uint64_t bytes) const;
  uint64_t take(uint64_t bytes);  // fits() first
  void give(uint64_t offset, uint64_t bytes);
  const std::vector<std::pair<uint64_t, uint64_t>>& holes() const { return free_; }

 private:
  std::vector<std::pair<uint64_t, uint64_t>> free_;  // [offset, end), sorted, coalesced
};

// One arena's residency, kept across runs (owned by its Block).
// NOT_SUPPORTED for a compact plan (NNA_FLAG_COMPACT): its regions share bytes, which the
// residency plan does not model.
void refuseCompact(const uint8_t* header);

class Residency {
 public:
  // Throws Failure BUDGET_TOO_SMALL when `budget` is below minBudget().
  Residency(const uint8_t* header, Placement placement, uint64_t budget);

  struct State {
    bool resident = false;
    bool dirty = false;    // staged: the device copy is newer than the host's
    uint64_t slot = 0;     // staged: offset in the pool
    int64_t lastUse = -1;  // the current run's last phase that used it
  };

  const StepModel& model() const { return model_; }
  Placement placement() const { return placement_; }
  uint64_t budget() const { return budget_; }
  // The unit regions are placed in: managed memory migrates in pages (64 KiB on the GPU),
  // the staged pool aligns slots like the arena does.
  uint64_t granule() const { return granule_; }
  // Bytes always on the device: the header (the kernels bind from it).
  uint64_t fixedBytes() const { return fixed_; }
  uint64_t cost(uint32_t region) const;
  // The unit of `placement` for this model (kManagedGranule, or the arena's alignment).
  static uint64_t granuleOf(const StepModel& m, Placement placement);
  // Smallest usable budget: the header and stats (resident for a whole run) + the largest
  // phase, in granules; `largest` receives that phase.
  static uint64_t minBudget(const StepModel& m, Placement placement, PhaseInfo* largest = nullptr);

  std::vector<State>& state() { return state_; }
  const std::vector<State>& state() const { return state_; }
  uint64_t used() const { return used_; }
  SlotPool& pool() { return pool_; }
  // Managed: false until a run has put the arena in a known state (everything on the host).
  bool known() const { return known_; }
  void setKnown() { known_ = true; }

  // The device side of [offset, offset + bytes) was rewritten or moved to the host outside a
  // run (transfers, explicit prefetch): regions overlapping it are no longer resident.
  void forget(uint64_t offset, uint64_t bytes);
  // Where regions are is no longer known (managed: an explicit prefetch or advice).
  void forgetAll();
  // Staged: the regions overlapping [offset, offset + bytes) whose pool copy is newer than the
  // image. A run leaves them so (copying every updated weight out at the end of each run would
  // add that copy to every run, read or not); whoever reads or rewrites the image between runs
  // copies them out first (Block::transfer) and calls cleaned().
  std::vector<uint32_t> dirtyIn(uint64_t offset, uint64_t bytes) const;
  void cleaned(uint32_t r);

  ResidencyCounters total, lastRun;

 private:
  friend class Planner;
  void release(uint32_t r);
  StepModel model_;
  Placement placement_;
  uint64_t budget_, granule_, fixed_;
  std::vector<State> state_;
  uint64_t used_ = 0;
  SlotPool pool_;
  bool known_ = false;
};

// The plan of one run over a Residency. Phases are numbered over the run:
// t = step * phasesPerStep() + k. Calls: start, then before(t) / after(t) for each phase in
// order, then finish. Each appends the moves to issue at that point, in order. The stats
// region is made resident by start() and stays for the whole run: kernels outside any phase
// (the reset before the first, the fold of the loss after the last) write it.
class Planner {
 public:
  Planner(Residency& res, const RunParams& p);
  uint64_t phasesPerStep() const { return perStep_; }
  uint64_t phases() const { return total_; }
  const PhaseInfo& phase(uint64_t t) const;
  // Phase t as the launches reached it (stage, layer): the plan's, or Failure INTERNAL naming
  // `who` when the launches and the plan (phases.cc) differ.
  const PhaseInfo& launched(uint64_t t, Stage stage, uint32_t layer, const char* who) const;

  void start(std::vector<Move>& out);
  void before(uint64_t t, std::vector<Move>& out);
  void after(uint64_t t, std::vector<Move>& out);
  void finish(std::vector<Move>& out);
  // Whether the run leaves region r's bytes for the host (else they are scratch, dead at its end).
  bool keptAfterRun(uint32_t r) const;
  // Regions resident from start() to the end of the run (the stats region).
  bool pinned(uint32_t r) const;

 private:
  struct NextUse {
    uint64_t t;
    uint8_t access;
  };
  // `now`: the last phase already planned (-1 before the first). t = UINT64_MAX: no further use.
  NextUse nextUse(uint32_t r, int64_t now) const;
  bool dead(uint32_t r, int64_t now) const;
  int32_t victim(int64_t now, uint64_t limit, const std::vector<uint32_t>& pinned) const;
  bool makeRoom(uint32_t r, int64_t now, uint64_t limit, const std::vector<uint32_t>& pinned, std::vector<Move>& out);
  bool makeHole(uint64_t bytes, int64_t now, uint64_t limit, const std::vector<uint32_t>& pinned, std::vector<Move>& out);
  void evict(uint32_t r, int64_t now, std::vector<Move>& out);
  void fetch(uint32_t r, uint8_t access, uint64_t target, std::vector<Move>& out);
  void compact(uint64_t t, std::vector<Move>& out);
  void note();

  Residency& res_;
  RunParams p_;
  uint64_t perStep_ = 0, total_ = 0;
  std::vector<PhaseInfo> step_;  // the phases of each step
};

}  // namespace nna
