// inline_run.h: runs on the JS thread (ArenaHandle::runInline, predictRows): too short for a
// worker's round trip, so the caller waits for them where it stands. Each carries its own copies:
// the rows it uploads before it and what it reads back after it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../core/block.h"
#include "../train/train.h"
#include "checked_copy.h"

namespace nna::addon {

// One run of `b` (not budgeted, not in a group: the caller checks) with `into` uploaded before it
// and `back` read back after it, each range one counted transfer. On plain CUDA device memory the
// copies are queued on the run's stream (one wait for all); else transfers of their own around it.
std::string runWithCopies(Block& b, RunParams p, const std::vector<Range>& into, const std::vector<Range>& back);

// Where predictRows finds z[0]'s and z[L]'s rows in the arena, and the net's widths.
struct PredictShape {
  uint64_t z0 = 0, zOut = 0;  // byte offsets of the regions
  uint64_t inputs = 0, outputs = 0, batch = 0;
};

struct PredictRows {
  std::string path;
  uint64_t batches = 0;  // runs made (each one range up and one back)
  int64_t bad = -1;      // the first element of x that is not finite (nothing after it ran), or -1
  double value = 0;
};

// predict()'s batches in one call: each batch of x's `count` rows is read (converted and checked,
// core/checked_copy.h) straight into z[0]'s host rows, run forward (`p`, rows set per batch) with
// its upload and the read-back of its outputs, which are then copied into `out` (count x outputs
// values of the arena's dtype). A non-finite element stops it before its batch runs.
PredictRows predictRows(Block& b, const RunParams& p, const TypedSource& x, uint64_t count, uint8_t* out, const PredictShape& s);

}  // namespace nna::addon
