// run_copies.h: the host <-> device copies a run makes itself (RunParams::copies): a step or a
// forward pass of a caller's batch uploads its rows, runs and reads back its results with one
// wait at the end, instead of three calls that each wait.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace nna {

// Byte ranges of an arena, as offsets from both sides' bases.
struct RunCopies {
  struct Span {
    uint64_t offset = 0, bytes = 0;
  };
  uint8_t* host = nullptr;  // the host side's base (set by Block::runCopies)
  bool pinned = false;      // whether it is page-locked (a graph may hold its copies only then)
  std::vector<Span> in;     // host -> device, before the run's first kernel
  std::vector<Span> out;    // device -> host, after its last
};

// Forward runs of a caller's rows, batch after batch (predict() of many rows on plain CUDA device
// memory), as one run that waits once. The rows go in groups of batches: the host checks a group
// into one of two page-locked slots in one pass (one wake of the copy's threads for the group)
// while the device copies the group before in batch by batch, runs each and copies its outputs
// out. The last batch goes alone through the arena's own host rows of z[0] and z[L] (`last`), so
// that the arena's host side ends as one run with RunCopies leaves it.
struct RunFeed {
  struct Slot {
    uint8_t* in = nullptr;   // z[0]'s rows of `group` batches, back to back (host, page-locked)
    uint8_t* out = nullptr;  // their outputs (host, page-locked)
  };
  Slot slots[2];
  Slot last;  // the arena's own rows: one batch
  uint64_t batches = 0;
  uint64_t group = 1;              // batches a slot holds
  uint64_t batch = 0;              // rows of a batch (the plan's)
  uint64_t z0 = 0, zOut = 0;       // the regions' byte offsets (the same on both sides)
  uint64_t inRow = 0, outRow = 0;  // bytes of a row of each
  // Writes the rows of batches [k, k + n) at `in`, back to back; returns how many (0: stop
  // before batch k).
  std::function<uint64_t(uint64_t k, uint64_t n, uint8_t* in)> stage;
  // Batch k's outputs (`rows` rows) are at `out`: called in order, each once, after its batch ran.
  std::function<void(uint64_t k, uint64_t rows, const uint8_t* out)> take;
};

}  // namespace nna
