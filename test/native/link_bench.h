// link_bench.h: host <-> device link rates by memory method, for bench/um.ts (bench-only native
// code: not used by the library itself).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace nna {

// Measured on `bytes`: pinned cudaMemcpy each way, managed-memory prefetch each way, and the
// discards a scheduler uses instead of copies (link_bench.cu; absent.cc without CUDA).
struct LinkRates {
  double copyToDevice = 0, copyToHost = 0;          // GB/s, pinned cudaMemcpy
  double prefetchToDevice = 0, prefetchToHost = 0;  // GB/s, cudaMemPrefetchAsync of resident pages
  double prefetchToHost4 = 0;                       // GB/s, the same split over 4 threads and streams
  int64_t prefetchRetainedBytes = 0;                // device memory still taken after the range went back to the host
  double discardToHost = 0, discardToDevice = 0;    // GB/s equivalent: discard + prefetch (no bytes to move)
  double discardOnly = 0;                           // GB/s equivalent: discard of device-resident pages
  int64_t discardFreedBytes = 0;                    // device memory freed by discard alone (cudaMemGetInfo)
  std::string discard;                              // "" when supported, else why not
};
LinkRates measureLink(size_t bytes);

}  // namespace nna
