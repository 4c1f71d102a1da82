// split.h: one pass over [0, n) split into parts on a few short-lived threads, where the bytes
// are worth a thread (the finiteness scan of streamed windows, core/finite.cc; the checked copy
// of user data, core/checked_copy.cc). Each part's result is kept in part order.
#pragma once
#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace nna {

// part(from, to) over [0, n) in up to `maxParts` parts of at least `perThread` bytes
// (`bytesPerItem` an item); the calling thread does the first. One part (no thread) below that.
template <typename R, typename F> std::vector<R> splitOverThreads(uint64_t n, uint64_t bytesPerItem, uint64_t perThread, uint64_t maxParts, F part) {
  if (n * bytesPerItem < perThread) return {part(uint64_t(0), n)};  // before asking for the cores: glibc reads a file for it
  static const uint64_t hw = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t k = std::min<uint64_t>({maxParts, hw, n * bytesPerItem / perThread + 1});
  if (k <= 1) return {part(uint64_t(0), n)};
  std::vector<R> found(k);
  std::vector<std::thread> threads;
  const uint64_t per = (n + k - 1) / k;
  const auto run = [&](uint64_t t) { found[t] = part(std::min(n, t * per), std::min(n, (t + 1) * per)); };
  for (uint64_t t = 1; t < k; ++t) {
    try {
      threads.emplace_back(run, t);
    } catch (...) {  // no thread to be had: this one does that part
      run(t);
    }
  }
  run(0);
  for (auto& th : threads) th.join();
  return found;
}

}  // namespace nna
