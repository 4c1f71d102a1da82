// embedding.h: the embedding op (layer 1; nn.Embedding per categorical column, nn_arena.h
// NNA_OPS): a row of x holds N numeric features and then one category index per column; its
// output is the numeric features followed by each column's table row. Table j sits in w after
// the tables before it, [cardinality][dim] row-major, as nn.Embedding.weight. Compiled for the
// host and the device.
#pragma once
#include <math.h>
#include <stdint.h>

#include "../descriptors/host_device.h"
#include "../include/nn_arena.h"

namespace nna::ops {

// The table row that index value x names, or -1 where x is not an integer in [0, cardinality)
// (NaN included): then the column's output is NaN, and so are the row's outputs (embedRowBad).
template <typename T> NNA_FN int64_t embedIndex(T x, uint32_t cardinality) {
  if (!(x >= T(0) && x < T(cardinality))) return -1;
  const int64_t i = int64_t(x);
  return T(i) == x ? i : -1;
}

// Whether a row of x names a row outside some table (or no row: a fraction, NaN). The network's
// outputs for such a row are NaN (embedPoisonRow): its embedding columns are NaN already, but a
// relu after them would hide that.
template <typename T> NNA_FN bool embedRowBad(const T* x, uint32_t numeric, const nna_embed_col* cols, uint32_t count) {
  for (uint32_t j = 0; j < count; ++j)
    if (embedIndex(x[numeric + j], cols[j].cardinality) < 0) return true;
  return false;
}

// Where output column c of an embedding comes from: numeric column c (col < 0), or element
// `at` of column col's table row. `table` is the column's first element in w.
struct EmbedSource {
  int64_t col = -1;
  uint64_t at = 0, table = 0;
};
NNA_FN EmbedSource embedSource(uint64_t c, uint32_t numeric, const nna_embed_col* cols, uint32_t count) {
  EmbedSource s;
  if (c < numeric) {
    s.at = c;
    return s;
  }
  c -= numeric;
  for (uint32_t j = 0; j < count; ++j) {
    if (c < cols[j].dim) {
      s.col = j;
      s.at = c;
      return s;
    }
    c -= cols[j].dim;
    s.table += uint64_t(cols[j].cardinality) * cols[j].dim;
  }
  return s;  // beyond the layer's width: never asked
}

// Output column c of one row: x's numeric value, or its table element (NaN for a bad index).
template <typename T> NNA_FN T embedOut(const T* x, const T* w, const EmbedSource& s, uint32_t numeric, const nna_embed_col* cols) {
  if (s.col < 0) return x[s.at];
  const uint32_t dim = cols[s.col].dim;
  const int64_t i = embedIndex(x[numeric + s.col], cols[s.col].cardinality);
  return i < 0 ? T(NAN) : w[s.table + uint64_t(i) * dim + s.at];
}

// The gradient of table element (row i of column s.col, element s.at) gains each row's error
// at output column c where that row's index is i: dw[...] += dy[r][c], rows in order (one
// thread, or one loop, per output column, so every backend adds in the same order).
template <typename T>
NNA_FN void embedGradColumn(const T* x, uint64_t xWidth, const T* dy, uint64_t units, uint64_t c, uint64_t rows, T* dw, const EmbedSource& s, uint32_t numeric,
                            const nna_embed_col* cols) {
  const uint32_t dim = cols[s.col].dim, card = cols[s.col].cardinality;
  for (uint64_t r = 0; r < rows; ++r) {
    const int64_t i = embedIndex(x[r * xWidth + numeric + s.col], card);
    if (i >= 0) dw[s.table + uint64_t(i) * dim + s.at] += dy[r * units + c];
  }
}

}  // namespace nna::ops
