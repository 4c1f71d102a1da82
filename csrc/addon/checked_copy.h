// checked_copy.h: the addon's entries to core/checked_copy.h: a user's typed array read once,
// natively, straight into an arena region's host view (src/train/data.ts).
#pragma once
#include <napi.h>

namespace nna::addon {

// checkedCopy(dst: Float32Array | Float64Array, src: numeric typed array, compare: boolean):
// [bad, value, changed, 0] (core/checked_copy.h), or null for a source type it does not read
// (the caller reads those in JS). dst holds at least src's length.
Napi::Value CheckedCopyJs(const Napi::CallbackInfo& info);
// oneHot(dst, labels: numeric typed array, outputs, compare): [bad, value, changed, label], or null.
Napi::Value OneHotJs(const Napi::CallbackInfo& info);

}  // namespace nna::addon
