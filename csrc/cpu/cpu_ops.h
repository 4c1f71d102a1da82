// cpu_ops.h: the CPU backend's forward and backward of the ops other than dense (nn_arena.h
// NNA_OPS; each op's row rule in csrc/ops/), over the bound layers of one model. Rows run in
// parallel; a parameter gradient is summed over rows in row order, so the bits never depend on
// the thread count.
#pragma once
#include <algorithm>
#include <cstring>
#include <vector>

#include "../include/nn_arena.h"
#include "../ops/element.h"
#include "../ops/embedding.h"
#include "../ops/norm.h"
#include "../ops/residual.h"
#include "../train/activations.h"
#include "../core/thread_pool.h"

namespace nna::cpu {

// What a step's ops need besides the layers: whether dropout drops (training runs) and its mask's
// counters.
struct OpStep {
  bool train = false;
  uint64_t seed = 0, step = 0;
  // Layer l as an element op is built from it (ops/element.h).
  template <typename T> ops::ElementLayer<T> elementOf(const std::vector<nna_bound_layer<T>>& L, uint32_t l) const {
    const nna_bound_layer<T>& C = L[l];
    return ops::ElementLayer<T>{l, C.units, C.op_value, nna_op_param_kind_of(C.op) == NNA_OP_PARAM_FROM ? L[C.from].z : nullptr, train, seed, step};
  }
};

// An embedding's z (layer 1) from x = z[0]: each row's numeric values and table rows.
template <typename T> void embedForward(const nna_bound_layer<T>& X, const nna_bound_layer<T>& C, uint64_t rows) {
  const uint64_t n = C.units;
  std::vector<ops::EmbedSource> src(n);
  for (uint64_t c = 0; c < n; ++c) src[c] = ops::embedSource(c, C.from, C.cols, C.cols_count);
  parallelFor(rows, n * 4, [&](uint64_t b, uint64_t e) {
    for (uint64_t r = b; r < e; ++r)
      for (uint64_t c = 0; c < n; ++c) C.z[r * n + c] = ops::embedOut(X.z + r * X.units, C.w, src[c], C.from, C.cols);
  });
}

// The output layer's z of every row of x that names no row of some table: NaN (its predict
// outputs NaN, its training step non-finite), after the output layer's product.
template <typename T> void embedPoison(const std::vector<nna_bound_layer<T>>& L, uint64_t rows) {
  const nna_bound_layer<T>&X = L[0], &E = L[1], &O = L.back();
  for (uint64_t r = 0; r < rows; ++r)
    if (ops::embedRowBad(X.z + r * X.units, E.from, E.cols, E.cols_count))
      for (uint64_t j = 0; j < O.units; ++j) O.z[r * O.units + j] = T(NAN);
}

// An embedding's table gradients: dw zeroed, then each named table element the sum of its rows'
// errors (ops/embedding.h embedGradSum: the CUDA kernel's order), a thread range of output columns.
template <typename T> void embedBackward(const nna_bound_layer<T>& X, const nna_bound_layer<T>& C, uint64_t rows) {
  if (!C.dw) return;
  std::memset(C.dw, 0, C.w_count * sizeof(T));
  // Each column's rows grouped by index, in row order within an index (a stable sort); rows whose
  // index is bad have none (their outputs are NaN).
  std::vector<std::vector<uint64_t>> order(C.cols_count);
  std::vector<std::vector<int64_t>> index(C.cols_count, std::vector<int64_t>(rows));  // each row's table row, by column
  for (uint32_t j = 0; j < C.cols_count; ++j) {
    for (uint64_t r = 0; r < rows; ++r) {
      index[j][r] = ops::embedIndex(X.z[r * X.units + C.from + j], C.cols[j].cardinality);
      if (index[j][r] >= 0) order[j].push_back(r);
    }
    std::stable_sort(order[j].begin(), order[j].end(), [&](uint64_t a, uint64_t b) { return index[j][a] < index[j][b]; });
  }
  const uint64_t n = C.units;
  parallelFor(n - C.from, rows * 4, [&](uint64_t b, uint64_t e) {
    for (uint64_t c = C.from + b; c < C.from + e; ++c) {
      const ops::EmbedSource s = ops::embedSource(c, C.from, C.cols, C.cols_count);
      const std::vector<uint64_t>& rs = order[s.col];
      const std::vector<int64_t>& of = index[s.col];
      const uint32_t dim = C.cols[s.col].dim;
      for (size_t p = 0; p < rs.size();) {  // each run of one index
        const int64_t i = of[rs[p]];
        size_t q = p + 1;
        while (q < rs.size() && of[rs[q]] == i) ++q;
        C.dw[s.table + uint64_t(i) * dim + s.at] = ops::embedGradSum<T>(q - p, [&](uint64_t t) { return C.d[rs[p + t] * n + c]; });
        p = q;
      }
    }
  });
}

// z[l] from z[l-1] (and z[from]) by layer l's op.
template <typename T> void opForward(const std::vector<nna_bound_layer<T>>& L, uint32_t l, uint64_t rows, const OpStep& s) {
  const nna_bound_layer<T>& P = L[l - 1];
  const nna_bound_layer<T>& C = L[l];
  if (C.op == NNA_OP_EMBEDDING) return embedForward(P, C, rows);
  const uint64_t n = C.units;
  if (ops::isNorm(C.op)) {
    parallelFor(rows, n * 8, [&](uint64_t b, uint64_t e) {
      for (uint64_t r = b; r < e; ++r) {
        const T* x = P.z + r * n;
        ops::normForward(x, C.z + r * n, C.w, C.b, n, ops::normRow(x, n, C.op_value, ops::normCentred(C.op)));
      }
    });
    return;
  }
  ops::withElementOp(C.op, s.elementOf(L, l), [&](const auto& op) {
    parallelFor(rows, n * 8, [&](uint64_t b, uint64_t e) {
      for (uint64_t r = b; r < e; ++r)
        for (uint64_t j = 0, i = r * n; j < n; ++j, ++i) C.z[i] = op.forward(r, j, i, P.z[i]);
    });
  });
}

// Layer l's op backward from its d (dL/dz[l]): dL/dz[l-1] into d[l-1] (l >= 2; layer l-1's own
// f' is finishError's), and its parameter gradients into dw / db. `rowsScratch`: per-row stats.
template <typename T> void opBackward(const std::vector<nna_bound_layer<T>>& L, uint32_t l, uint64_t rows, const OpStep& s, std::vector<ops::NormRow>& rowsScratch) {
  const nna_bound_layer<T>& P = L[l - 1];
  const nna_bound_layer<T>& C = L[l];
  const uint64_t n = C.units;
  T* dx = l > 1 ? P.d : nullptr;
  switch (C.op) {
    case NNA_OP_EMBEDDING: return embedBackward(P, C, rows);  // layer 1: nothing for x
    case NNA_OP_LAYERNORM:
    case NNA_OP_RMSNORM: {
      const bool centred = ops::normCentred(C.op);
      rowsScratch.resize(rows);
      parallelFor(rows, n * 12, [&](uint64_t b, uint64_t e) {
        for (uint64_t r = b; r < e; ++r) {
          rowsScratch[r] = ops::normRow(P.z + r * n, n, C.op_value, centred);
          if (dx) ops::normBackward(P.z + r * n, C.d + r * n, C.w, dx + r * n, n, rowsScratch[r], centred);
        }
      });
      parallelFor(n, rows * 4, [&](uint64_t b, uint64_t e) {  // gain and bias gradients, each summed in row order
        for (uint64_t j = b; j < e; ++j) {
          double g = 0, bias = 0;
          for (uint64_t r = 0; r < rows; ++r) {
            const double dy = double(C.d[r * n + j]);
            g += dy * ops::normHat(double(P.z[r * n + j]), rowsScratch[r]);
            bias += dy;
          }
          if (C.dw) C.dw[j] = T(g);
          if (C.db) C.db[j] = T(bias);
        }
      });
      return;
    }
    default:  // an element op (ops/element.h); a residual's z[from] gets d[l] in finishError
      if (!dx) return;
      ops::withElementOp(C.op, s.elementOf(L, l), [&](const auto& op) {
        parallelFor(rows, n * 8, [&](uint64_t b, uint64_t e) {
          for (uint64_t r = b; r < e; ++r)
            for (uint64_t j = 0, i = r * n; j < n; ++j, ++i) dx[i] = op.backward(r, j, i, C.d[i]);
        });
      });
      return;
  }
}

// The errors d[r] of the residual layers r that add z[k] (ops/residual.h).
template <typename T> std::vector<const T*> residualAdders(const std::vector<nna_bound_layer<T>>& L, uint32_t k) {
  std::vector<const T*> adds;
  for (uint32_t r : ops::residualAdders(
           uint32_t(L.size()), k, [&](uint32_t i) { return L[i].op; }, [&](uint32_t i) { return L[i].from; }))
    adds.push_back(L[r].d);
  return adds;
}

// Whether some residual layer adds z[k] (then the product that writes d[k] leaves f' to finishError).
template <typename T> bool residualAdds(const std::vector<nna_bound_layer<T>>& L, uint32_t k) { return !residualAdders(L, k).empty(); }

// d[k] = (dL/dz[k] as the layer above left it + d of every residual layer that adds z[k]) *
// f'(layer k), where the dense product's epilogue left f' out (residualAdds) or layer k+1 is
// an op (its backward applies none).
template <typename T> void finishError(const std::vector<nna_bound_layer<T>>& L, uint32_t k, uint64_t rows) {
  const nna_bound_layer<T>& P = L[k];
  const uint64_t n = P.units;
  const std::vector<const T*> adds = residualAdders(L, k);
  if (adds.empty() && P.activation == NNA_ACT_IDENTITY) return;
  parallelFor(rows, n * (adds.size() + 2), [&](uint64_t b, uint64_t e) {
    for (uint64_t i = b * n; i < e * n; ++i) {
      T g = P.d[i];
      for (const T* a : adds) g += a[i];
      P.d[i] = g * activationGradAt(P, i);
    }
  });
}

}  // namespace nna::cpu
