#include "checked_copy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include "split.h"

namespace nna {
namespace {

template <typename D> struct Bits;
template <> struct Bits<float> {
  using U = uint32_t;
  static constexpr U kExp = 0x7f800000u;
};
template <> struct Bits<double> {
  using U = uint64_t;
  static constexpr U kExp = 0x7ff0000000000000ull;
};

// The same type without a comparison: the bits, as TypedArray.set copies them, flagging any
// element whose exponent is all ones (a NaN or an infinity) in the same pass. One loop over
// distinct arrays vectorises fully (AVX2 where the CPU has it); overlapping ones (a view of the
// destination given as the source) are moved as TypedArray.set moves them, then scanned.
template <typename D, typename U> inline __attribute__((always_inline)) U copyBitsBody(U* __restrict d, const U* __restrict s, uint64_t n) {
  constexpr U exp = Bits<D>::kExp;
  U bad = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const U u = s[i];
    d[i] = u;
    bad |= U((u & exp) == exp);
  }
  return bad;
}
template <typename D, typename U> U copyBitsPortable(U* d, const U* s, uint64_t n) { return copyBitsBody<D>(d, s, n); }
#if defined(__x86_64__) && defined(__GNUC__)
template <typename D, typename U> __attribute__((target("avx2"))) U copyBitsAvx2(U* d, const U* s, uint64_t n) { return copyBitsBody<D>(d, s, n); }
#endif

template <typename D, typename U = typename Bits<D>::U> U copyBits(U* d, const U* s, uint64_t n) {
  if (d < s + n && s < d + n) {
    std::memmove(d, s, n * sizeof(U));
    U bad = 0;
    for (uint64_t i = 0; i < n; ++i) bad |= U((d[i] & Bits<D>::kExp) == Bits<D>::kExp);
    return bad;
  }
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return copyBitsAvx2<D>(d, s, n);
#endif
  return copyBitsPortable<D>(d, s, n);
}

// Elements [from, to): blocks are converted, written and OR-reduced without branches (the loop
// vectorises); only a block that flagged is searched for its first bad element. `Compare` is a
// template argument so that the copy without it reads nothing of the destination.
template <bool Compare, typename S, typename D> CheckedCopy copyPart(D* dst, const S* src, uint64_t from, uint64_t to) {
  using U = typename Bits<D>::U;
  constexpr U exp = Bits<D>::kExp;
  constexpr uint64_t kBlock = 2048;
  CheckedCopy r;
  U* du = reinterpret_cast<U*>(dst);
  for (uint64_t b = from; b < to; b += kBlock) {
    const uint64_t e = std::min(to, b + kBlock);
    U bad = 0, diff = 0;
    if constexpr (std::is_same_v<S, D> && !Compare) {
      bad = copyBits<D>(du + b, reinterpret_cast<const U*>(src) + b, e - b);
    } else {
      for (uint64_t i = b; i < e; ++i) {
        U u;
        if constexpr (std::is_same_v<S, D>) {
          std::memcpy(&u, src + i, sizeof u);
        } else {
          const D v = D(double(src[i]));  // as Number(x) stored into the typed array
          std::memcpy(&u, &v, sizeof u);
        }
        bad |= U((u & exp) == exp);
        if constexpr (Compare) diff |= u ^ du[i];
        du[i] = u;
      }
    }
    if (diff) r.changed = true;
    if (bad) {
      for (uint64_t i = b; i < e; ++i) {
        U u = du[i];
        if ((u & exp) == exp) {
          r.bad = int64_t(i);
          D v;
          std::memcpy(&v, &u, sizeof v);
          r.value = double(v);
          return r;
        }
      }
    }
  }
  return r;
}

// One-hot rows of labels [from, to).
template <typename S, typename D> CheckedCopy hotPart(D* dst, const S* src, uint64_t from, uint64_t to, uint64_t outputs, bool compare) {
  CheckedCopy r;
  for (uint64_t i = from; i < to; ++i) {
    const double v = double(src[i]);  // read once
    if (!std::isfinite(v) || v != std::floor(v) || v < 0 || v >= double(outputs)) {
      r.bad = int64_t(i);
      r.value = v;
      r.label = std::isfinite(v) ? 1 : 0;
      return r;
    }
    D* row = dst + i * outputs;
    const uint64_t k = uint64_t(v);
    if (compare && !r.changed) {
      for (uint64_t j = 0; j < outputs; ++j)
        if (row[j] != (j == k ? D(1) : D(0))) {
          r.changed = true;
          break;
        }
    }
    std::fill(row, row + outputs, D(0));
    row[k] = D(1);
  }
  return r;
}

// The parts of a copy (split.h): the first bad element of all wins (parts after it may have
// written theirs).
template <typename F> CheckedCopy parts(uint64_t n, uint64_t bytesPerItem, F part) {
  constexpr uint64_t kPerPart = uint64_t(32) << 10;  // bytes read and written: a part's work well above waking a thread
  CheckedCopy r;
  for (const CheckedCopy& f : splitOverThreads<CheckedCopy>(n, bytesPerItem, kPerPart, part)) {
    r.changed = r.changed || f.changed;
    if (r.bad < 0 && f.bad >= 0) {
      r.bad = f.bad;
      r.value = f.value;
      r.label = f.label;
    }
  }
  return r;
}

template <typename D, typename Fn> CheckedCopy dispatch(SrcType type, Fn fn) {
  switch (type) {
    case SrcType::I8: return fn(static_cast<const int8_t*>(nullptr));
    case SrcType::U8: return fn(static_cast<const uint8_t*>(nullptr));
    case SrcType::I16: return fn(static_cast<const int16_t*>(nullptr));
    case SrcType::U16: return fn(static_cast<const uint16_t*>(nullptr));
    case SrcType::I32: return fn(static_cast<const int32_t*>(nullptr));
    case SrcType::U32: return fn(static_cast<const uint32_t*>(nullptr));
    case SrcType::F32: return fn(static_cast<const float*>(nullptr));
    case SrcType::F64: return fn(static_cast<const double*>(nullptr));
  }
  return CheckedCopy{};
}

template <typename D> CheckedCopy copyAs(D* dst, const void* src, SrcType type, uint64_t n, bool compare) {
  return dispatch<D>(type, [&](auto tag) {
    using S = std::remove_const_t<std::remove_pointer_t<decltype(tag)>>;
    const S* s = static_cast<const S*>(src);
    return parts(n, sizeof(S) + sizeof(D), [&](uint64_t a, uint64_t b) { return compare ? copyPart<true, S, D>(dst, s, a, b) : copyPart<false, S, D>(dst, s, a, b); });
  });
}

template <typename D> CheckedCopy hotAs(D* dst, const void* src, SrcType type, uint64_t n, uint64_t outputs, bool compare) {
  return dispatch<D>(type, [&](auto tag) {
    using S = std::remove_const_t<std::remove_pointer_t<decltype(tag)>>;
    const S* s = static_cast<const S*>(src);
    return parts(n, outputs * sizeof(D), [&](uint64_t a, uint64_t b) { return hotPart<S, D>(dst, s, a, b, outputs, compare); });
  });
}

}  // namespace

CheckedCopy checkedCopy(void* dst, bool f64, const void* src, SrcType type, uint64_t n, bool compare) {
  return f64 ? copyAs(static_cast<double*>(dst), src, type, n, compare) : copyAs(static_cast<float*>(dst), src, type, n, compare);
}

CheckedCopy oneHotRows(void* dst, bool f64, const void* src, SrcType type, uint64_t n, uint64_t outputs, bool compare) {
  return f64 ? hotAs(static_cast<double*>(dst), src, type, n, outputs, compare) : hotAs(static_cast<float*>(dst), src, type, n, outputs, compare);
}

}  // namespace nna
