// validate.h: checks a header that did not come from the planner before anything binds it.
// Device kernels trust the header, so every count, offset and size is checked here, with
// overflow-safe arithmetic, against the bytes actually available.
#pragma once
#include <cstddef>
#include <string>
#include "../include/nn_arena.h"

namespace nna {

// Returns an empty string when the header at `base` is sound for an arena of `available`
// bytes (only the first `readable` bytes of base may be read), else what is wrong. Regions
// must not overlap, except in a compact plan, whose overlaps csrc/train/aliasing.h replays
// (validateArena there runs both: use it for any header from outside).
std::string validateHeader(const void* base, size_t readable, size_t available);

// The element count of region kind k of layer l (L) from the header's shape fields (batch,
// samples, num_layers, optimizer, flags; units, fan_in, activation, op): the one rule of region
// sizes, which the validator checks every header against and the TS planner asks for
// (addon regionCounts). `tables`: the elements of the embedding's tables where L is an
// embedding (embedTableElements), else ignored. False on overflow.
bool expectedCount(const nna_header& h, const nna_layer& L, uint32_t l, uint32_t k, uint64_t* out, uint64_t tables);

// The elements of an embedding's tables: the sum of cardinality x dim over its `count` columns.
// False on overflow.
bool embedTableElements(const nna_embed_col* cols, uint32_t count, uint64_t* out);

// A combination of one shape that nn-arena refuses whatever the sizes: a compact plan, and user
// regions, each hold one model. field is null when there is none; else the spec's field that
// asked for it, with the error code the planner throws and why. validateHeader refuses such a
// header with it, and the planner such a spec (addon regionRules).
struct ShapeProblem {
  const char* code = nullptr;
  const char* field = nullptr;
  std::string why;
};
ShapeProblem shapeProblem(bool compact, uint32_t extras, uint64_t models);

// The name of a region kind (NNA_KINDS), "?" when out of range.
inline const char* kindName(uint32_t kind) {
  const char* name = nna_kind_name(kind);
  return name ? name : "?";
}

// Element size of a dtype code, 0 when unknown.
inline size_t dtypeBytes(uint32_t dtype) { return dtype == NNA_FLOAT32 ? 4 : dtype == NNA_FLOAT64 ? 8 : 0; }

}  // namespace nna
