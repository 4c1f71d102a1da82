// checked_copy.h: a user's numbers into an arena region (or a staging buffer) in ONE pass: each
// element read once, converted as a JS Number stored into a Float32Array / Float64Array would
// be, checked finite in the destination's type, compared with what the destination held, and
// written. What trains is what was checked, even when another thread writes the source (a
// SharedArrayBuffer): the check reads the value written, never the source a second time.
// Labels become one-hot rows in the same way. Large copies are split over a few threads.
#pragma once
#include <cstdint>

namespace nna {

// The element types a typed array can hold (BigInt arrays excluded: they are refused before).
enum class SrcType : uint32_t { I8, U8, I16, U16, I32, U32, F32, F64 };

// Bytes of one element of `t`.
constexpr uint64_t bytesOf(SrcType t) { return t == SrcType::I8 || t == SrcType::U8 ? 1 : t == SrcType::I16 || t == SrcType::U16 ? 2 : t == SrcType::F64 ? 8 : 4; }

struct CheckedCopy {
  // The first element whose value is not finite in the destination's type (or, for labels, not
  // a class: `label` tells why), or -1. Elements before it are written; after it, maybe.
  int64_t bad = -1;
  // The source value there, as a double.
  double value = 0;
  // Labels: 1 when the bad value is finite but not an integer class in [0, outputs).
  int label = 0;
  // Some written element differs (in its bits) from what the destination held before.
  bool changed = false;
};

// src[0, n) into dst (float64 when f64, else float32). `compare`: also tell whether anything
// changed (the destination's old bits are read).
CheckedCopy checkedCopy(void* dst, bool f64, const void* src, SrcType type, uint64_t n, bool compare);

// Labels src[0, n) into n one-hot rows of `outputs` values at dst: a row is zero but for 1 at
// its label. A label must be finite (bad, label 0) and an integer in [0, outputs) (bad, label 1).
CheckedCopy oneHotRows(void* dst, bool f64, const void* src, SrcType type, uint64_t n, uint64_t outputs, bool compare);

}  // namespace nna
