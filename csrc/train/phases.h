// phases.h: what each phase of a training step touches, region by region. A memory scheduler
// (csrc/budget/residency.h, executed by csrc/budget/um_scheduler.cu and staging.cu) plans from
// this table, and the smallest usable device budget is its largest phase. It must follow the
// launches of the per-layer CUDA path (LayerRun, layer_run.cuh): the schedulers check the
// order of the hook calls against it and stop a run whose phases differ.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../include/nn_arena.h"
#include "stage.h"
#include "train.h"

namespace nna {

// How a phase uses a region. kWrite: the phase writes it before anything reads it, so the bytes
// it held before are dead (no copy in; the previous value need not be kept). A partial batch
// writes only its rows of z, d and y; the rows past it are never read (every kernel stops at
// `rows`) and, being scratch, are not kept after a run either: still kWrite.
enum Access : uint8_t { kRead = 1, kWrite = 2, kUpdate = 3 };

struct RegionInfo {
  uint32_t layer = 0, kind = 0;
  uint64_t offset = 0, bytes = 0;
  // The resident data set (xdata, ydata): the gather reads a batch of rows from it in place,
  // over the host link; it is never made device-resident by a scheduler.
  bool remote = false;
};

// "w[3]"; with `size`, "w[3] (64 MiB)" (traces of the schedulers).
std::string regionLabel(const RegionInfo& r, bool size = false);

struct Use {
  uint32_t region;
  uint8_t access;
};

// Whose launch order a step follows. Layers: the per-layer CUDA path and the CPU backend (the
// order the schedulers check); Fused: the one-kernel CUDA path (fused_step.cu), whose backward
// phase l computes d[l-1] and takes dw / db and the update of layer l + 1 (and of layer 1 in
// the last phase), and which does the output of a last layer of at most 16 units together
// with its forward pass. A compact plan must be safe under both (csrc/train/aliasing.cc).
enum class Path : uint8_t { Layers = 0, Fused = 1 };

// The fused path takes the last layer with the output (and d[L-1]) when it has at most this
// many units and there is a hidden layer (fused_step.cu, kFusedOutMax).
constexpr uint64_t kFusedOutputMaxUnits = 16;

struct PhaseInfo {
  Stage stage;
  uint32_t layer;
  std::vector<Use> uses;  // each region once
};

// The trainer primitives (Op::Backward, BackwardFromOutput, Update) have no phases in this
// table: their runs need what earlier runs left on the device (every layer's z, then dw / db),
// which a scheduler drops as scratch between runs. Budgeted arenas refuse them: NOT_SUPPORTED.
void requireScheduled(Op op);

class StepModel {
 public:
  // `header`: a validated header (its layer table follows it).
  explicit StepModel(const uint8_t* header);

  const nna_header& header() const { return h_; }
  const std::vector<nna_layer>& layers() const { return layers_; }
  const std::vector<RegionInfo>& regions() const { return regions_; }
  int32_t regionOf(uint32_t layer, uint32_t kind) const { return index_[size_t(layer) * NNA_KIND_COUNT + kind]; }

  // The phases of one step in launch order (the same for every step of a run). SGD training
  // never writes dw here: the runs that follow this table (device budgets, compact plans) fold
  // the update into the weight-gradient product (w -= lr * z^T d), a compact SGD plan has no dw,
  // and what would write it (tf32x3, K models, data parallelism) is refused on those arenas.
  std::vector<PhaseInfo> step(Op op, bool resident, Path path = Path::Layers) const;

  // Bytes a phase needs on the device besides runBytes(): each region it uses, rounded out to
  // `granule` (the unit a scheduler places), but the data set (read in place) and the stats.
  uint64_t phaseBytes(const PhaseInfo& ph, uint64_t granule) const;
  // Bytes on the device for the whole of a run: the header (every kernel binds from it) and
  // the stats region (written before the first phase and after the last).
  uint64_t runBytes(uint64_t granule) const;
  // The largest phase of a resident training step (the largest phase of any run): the smallest
  // budget a scheduler can work in. `which` receives that phase.
  uint64_t largestPhase(uint64_t granule, PhaseInfo* which = nullptr) const;
  // Bytes of [offset, offset + bytes) rounded out to `granule` boundaries.
  static uint64_t rounded(uint64_t offset, uint64_t bytes, uint64_t granule);

 private:
  // Layer l's `from` in the op parameter table (a residual's earlier layer), 0 where none.
  uint32_t opFrom(uint32_t l) const { return from_.empty() ? 0 : from_[l]; }

  nna_header h_;
  std::vector<nna_layer> layers_;
  std::vector<uint32_t> from_;
  bool ops_ = false;  // some layer is not dense: its runs are the per-layer order's
  std::vector<RegionInfo> regions_;
  std::vector<int32_t> index_;
};

}  // namespace nna
