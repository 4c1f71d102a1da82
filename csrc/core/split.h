// split.h: one pass over [0, n) split into parts run on the thread pool (thread_pool.h) where the
// bytes are worth waking it (the finiteness scan of streamed windows, core/finite.cc; the checked
// copy of user data, core/checked_copy.cc). Each part's result is kept in part order. One
// thread's copy runs at a fraction of the host's memory bandwidth, so a batch of user rows
// (hundreds of kilobytes) is already worth several threads.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>
#include "thread_pool.h"

namespace nna {

// part(from, to) over [0, n) in parts of at least `perPart` bytes (`bytesPerItem` an item), a few
// per thread of up to kThreads (claimed as threads come free), on pool workers that do not linger
// (PoolUse); one part, on the caller, below twice that.
template <typename R, typename F> std::vector<R> splitOverThreads(uint64_t n, uint64_t bytesPerItem, uint64_t perPart, F part) {
  constexpr unsigned kThreads = 8;  // eight threads come near a host's copy bandwidth
  const uint64_t bytes = n * bytesPerItem;
  if (bytes < 2 * perPart) return {part(uint64_t(0), n)};
  const uint64_t k = std::min<uint64_t>({bytes / perPart, uint64_t(4) * std::min(poolThreads(), kThreads), n});
  if (k <= 1) return {part(uint64_t(0), n)};
  std::vector<R> found(k);
  parallel(
      unsigned(k), [&](unsigned t) { found[t] = part(n * t / k, n * (t + 1) / k); }, PoolUse{false});
  return found;
}

}  // namespace nna
