// checked_copy.h: the addon's entries to core/checked_copy.h: a user's typed array read once,
// natively, straight into an arena region's host view (src/train/data.ts).
#pragma once
#include <napi.h>

#include <optional>

#include "../core/checked_copy.h"

namespace nna::addon {

// A numeric typed array's elements as the checked copy reads them (SharedArrayBuffer views
// included); nullopt for a type it does not read (Float16Array). BAD_ARGUMENT for anything but a
// typed array.
struct TypedSource {
  const void* data = nullptr;
  size_t length = 0;
  SrcType type = SrcType::F32;
};
std::optional<TypedSource> typedSource(Napi::Env env, const Napi::Value& v, const char* what);

// A Float32Array / Float64Array to write into (SharedArrayBuffer views included); BAD_ARGUMENT
// naming `what` for anything else.
struct TypedDestination {
  void* data = nullptr;
  size_t length = 0;
  bool f64 = false;
};
TypedDestination typedDestination(Napi::Env env, const Napi::Value& v, const char* what);

// checkedCopy(dst: Float32Array | Float64Array, src: numeric typed array, compare: boolean):
// whether dst changed where all is finite, else [bad, value, 0] (core/checked_copy.h), or null
// for a source type it does not read (the caller reads those in JS). dst holds at least src's
// length.
Napi::Value CheckedCopyJs(const Napi::CallbackInfo& info);
// oneHot(dst, labels: numeric typed array, outputs, compare): changed, or [bad, value, label], or null.
Napi::Value OneHotJs(const Napi::CallbackInfo& info);

}  // namespace nna::addon
