// aliasing.h: the replay that proves a compact plan's shared bytes safe. A compact header
// (NNA_FLAG_COMPACT) may place regions over each other; the validator (core/validate.cc) lets
// such overlaps through and this replay decides: it walks the phases of every run the arena can
// make (phases.h: train, eval and forward; resident or not; per-layer and fused order), two
// steps each, tracking which region last wrote every byte, and refuses the header when a phase
// reads a region whose bytes another region wrote since, when two regions that share bytes are
// used in one phase, or when a run ends with a kept region (weights, biases, optimizer state,
// the data set, stats, the outputs) or a user region (the kind table: the user's data, which
// validateHeader already keeps clear of every other region) overwritten.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "../include/nn_arena.h"

namespace nna {

// Whether region `kind` of layer `layer` must keep its bytes after every run (never scratch): the
// weights, biases, optimizer state, data set and stats, and the last layer's outputs. The replay
// checks it and the TS planner reads it (addon regionRules) to choose what may share bytes.
bool outlivesRun(uint32_t numLayers, uint32_t layer, uint32_t kind);

// "" when the validated header's aliasing is safe (always, for a header without the flag).
std::string checkAliasing(const uint8_t* header);

// validateHeader (core/validate.h), then checkAliasing: the one check every header that did not
// come from the planner goes through before anything binds it.
std::string validateArena(const void* base, size_t readable, size_t available);

}  // namespace nna
