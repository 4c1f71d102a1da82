// copy_bytes.h: copyBytes, a batch's bytes copied into a streamed window in parallel on the
// gather pool (copy_bytes.cc): an in-order iterable's fill (src/train/stream.ts), where one JS
// TypedArray.set of a window's rows was a single-threaded memcpy slower than the S step.
#pragma once
#include <napi.h>

namespace nna::addon {

// copyBytes(dst: Uint8Array, src: Uint8Array, dst2: Uint8Array, src2: Uint8Array): src into
// dst and src2 into dst2 (the same lengths), split over the gather pool's threads. A promise
// that settles when both are copied; the four buffers stay alive until then.
Napi::Value CopyBytes(const Napi::CallbackInfo& info);

}  // namespace nna::addon
