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
// outputs for such a row are NaN (cpu_ops.h embedPoison, op_kernels.cuh embedPoisonKernel): its
// embedding columns are NaN already, but a relu after them would hide that.
template <typename T> NNA_FN bool embedRowBad(const T* x, uint32_t numeric, const nna_embed_col* cols, uint32_t count) {
  for (uint32_t j = 0; j < count; ++j)
    if (embedIndex(x[numeric + j], cols[j].cardinality) < 0) return true;
  return false;
}

// Column j's first output column and its table's first element in w: the columns before it
// take their dims of the output and their tables of w, in column order.
struct EmbedColumnAt {
  uint64_t out = 0, table = 0;
};
NNA_FN EmbedColumnAt embedColumnAt(const nna_embed_col* cols, uint32_t numeric, uint32_t j) {
  EmbedColumnAt a;
  a.out = numeric;
  for (uint32_t k = 0; k < j; ++k) {
    a.out += cols[k].dim;
    a.table += uint64_t(cols[k].cardinality) * cols[k].dim;
  }
  return a;
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
  uint32_t j = 0;  // the column whose dims hold output column c
  for (uint64_t left = c - numeric; j < count && left >= cols[j].dim; ++j) left -= cols[j].dim;
  if (j == count) return s;  // beyond the layer's width: never asked
  const EmbedColumnAt a = embedColumnAt(cols, numeric, j);
  s.col = j;
  s.at = c - a.out;
  s.table = a.table;
  return s;
}

// Output column c of one row: x's numeric value, or its table element (NaN for a bad index).
template <typename T> NNA_FN T embedOut(const T* x, const T* w, const EmbedSource& s, uint32_t numeric, const nna_embed_col* cols) {
  if (s.col < 0) return x[s.at];
  const uint32_t dim = cols[s.col].dim;
  const int64_t i = embedIndex(x[numeric + s.col], cols[s.col].cardinality);
  return i < 0 ? T(NAN) : w[s.table + uint64_t(i) * dim + s.at];
}

// A table element's gradient: the sum of dy over the n rows whose index names its row, `at(t)`
// the t-th of them in row order, added as one warp would: partial k takes rows k, k + 32, ... in
// order, then the partials pairwise (k + o into k, o = 16, 8, 4, 2, 1). Both backends add in
// this order (the CPU's loop and the CUDA kernel, which gives each element a thread), so the
// same bits whatever runs it, and a long run of one index is 32 chains, not one.
constexpr uint32_t kEmbedParts = 32;  // the stages below are written for 32
template <typename T, typename At> NNA_FN T embedGradSum(uint64_t n, At at) {
  if (n == 1) return T(0) + at(0);  // the order below with one row: 0 + dy, then zeros added
  T part[kEmbedParts];
  NNA_UNROLL
  for (uint32_t k = 0; k < kEmbedParts; ++k) part[k] = T(0);
  for (uint64_t base = 0; base < n; base += kEmbedParts) {
    NNA_UNROLL
    for (uint32_t k = 0; k < kEmbedParts; ++k)
      if (base + k < n) part[k] += at(base + k);
  }
  // the pairwise stages spelled out, each with a constant bound: the device keeps part[] in registers
  NNA_UNROLL
  for (uint32_t k = 0; k < 16; ++k) part[k] += part[k + 16];
  NNA_UNROLL
  for (uint32_t k = 0; k < 8; ++k) part[k] += part[k + 8];
  NNA_UNROLL
  for (uint32_t k = 0; k < 4; ++k) part[k] += part[k + 4];
  part[0] += part[2];
  part[1] += part[3];
  return part[0] + part[1];
}

}  // namespace nna::ops
