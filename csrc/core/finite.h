// finite.h: the finiteness check of streamed data (src/train/stream.ts), natively and off the JS
// thread: a window of rows is checked as it goes up, at memory speed.
#pragma once
#include <cstdint>

namespace nna {

// The index of the first element of p[0, n) that is NaN or infinite (float32, or float64 with
// `f64`), or -1. Large inputs are split over a few threads.
int64_t firstNonFinite(const void* p, uint64_t n, bool f64);

}  // namespace nna
