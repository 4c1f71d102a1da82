// decode_values.h: a streamed .npy window's values in the file's own element type converted to
// the network's float32 / float64 on the gather pool (src/train/npy-rows.ts), off the JS thread.
#pragma once
#include <napi.h>

namespace nna::addon {

// decodeValues(src: Uint8Array, type: string, littleEndian: boolean, out: Float32Array |
// Float64Array, count): src's first `count` values of .npy type `type` ('int8', 'uint8', 'bool',
// 'int16', 'uint16', 'int32', 'uint32', 'int64', 'uint64', 'float32', 'float64') into out from
// 0, as a JS Number then the typed array's store would convert them. Resolves with `count`.
Napi::Value DecodeValues(const Napi::CallbackInfo& info);

}  // namespace nna::addon
