// residency_check.h: replays the residency plan of a sequence of runs (residency.h) without a
// GPU, against a model of where each region's valid bytes are, and reports the first broken
// rule. The CPU tests use it to show the plans the GPU executes are sound for any network and
// budget: every phase finds what it uses resident and valid, the device never holds more than
// the budget, staged slots never overlap, and no live byte is ever dropped.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "residency.h"

namespace nna {

struct ResidencyReplay {
  std::string error;           // empty when every rule held
  ResidencyCounters counters;  // summed over the runs
  uint64_t phases = 0;         // phases replayed
};

ResidencyReplay replayResidency(const uint8_t* header, Placement placement, uint64_t budget, const std::vector<RunParams>& runs);

}  // namespace nna
