#include "finite.h"

#include <algorithm>
#include <cstring>
#include "split.h"

namespace nna {
namespace {

// All exponent bits set: NaN or an infinity. Blocks are OR-reduced without branches (the loop
// vectorises) and only a block that flagged is scanned for its first element.
template <typename U> int64_t scan(const U* v, uint64_t from, uint64_t to) {
  constexpr U exp = sizeof(U) == 4 ? U(0x7f800000u) : U(0x7ff0000000000000ull);
  constexpr uint64_t kBlock = 4096;
  for (uint64_t b = from; b < to; b += kBlock) {
    const uint64_t e = std::min(to, b + kBlock);
    U any = 0;
    for (uint64_t i = b; i < e; ++i) any |= U((v[i] & exp) == exp);
    if (any)
      for (uint64_t i = b; i < e; ++i)
        if ((v[i] & exp) == exp) return int64_t(i);
  }
  return -1;
}

template <typename U> int64_t firstOf(const U* v, uint64_t n) {
  constexpr uint64_t kPerPart = uint64_t(64) << 10;  // bytes read: a part's work well above waking a thread
  for (int64_t f : splitOverThreads<int64_t>(n, sizeof(U), kPerPart, [&](uint64_t a, uint64_t b) { return scan(v, a, b); }))
    if (f >= 0) return f;
  return -1;
}

}  // namespace

int64_t firstNonFinite(const void* p, uint64_t n, bool f64) { return f64 ? firstOf(static_cast<const uint64_t*>(p), n) : firstOf(static_cast<const uint32_t*>(p), n); }

}  // namespace nna
