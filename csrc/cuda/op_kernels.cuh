// op_kernels.cuh: the per-layer CUDA path's launches for the ops other than dense (nn_arena.h
// NNA_OPS), with the row rules of csrc/ops/ (the CPU backend's): a norm a warp a row (its sums
// in double, lane partials added by a fixed shuffle tree), dropout and residual a thread an
// element (a few blocks a multiprocessor, each thread many elements: a thread binds its layers
// once); the norms' gain and bias gradients a thread a column, its rows in kOpStripes stripes
// added in a fixed order; an embedding an element a thread forward, its table gradients a sort
// of the batch's indices then a thread a (run of one index, element) (ops/embedding.h). Grid z:
// the K models.
#pragma once
#include "../include/nn_arena.h"
#include "../ops/element.h"
#include "../ops/embedding.h"
#include "../ops/norm.h"
#include "layer_kernels.cuh"

namespace nna {

constexpr unsigned kOpRowsPerBlock = kThreads / 32;  // a warp a row
constexpr unsigned kOpCols = 32, kOpStripes = 32;    // opParamGradKernel's block: 32 columns x 32 stripes of rows

__device__ __forceinline__ double warpSum(double v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// A row's values as a warp holds them: lane k's are j = k, k + 32, ... (< n). V > 0: in
// registers, read once, every load of the row issued at once (n <= 32 V); V == 0: read from
// memory at each use (any n). Either way each lane takes its values in j order: the same sums.
template <typename T, int V> struct WarpRow {
  double v[V > 0 ? V : 1];
  const T* x;
  uint64_t n;
  unsigned lane;
  __device__ WarpRow(const T* row, uint64_t count, unsigned l) : x(row), n(count), lane(l) {
    if constexpr (V > 0)
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = lane + 32u * k < n ? double(x[lane + 32u * k]) : 0.0;
  }
  // f(j, x[j]) for the lane's j in order
  template <typename F> __device__ void each(F&& f) const {
    if constexpr (V > 0) {
#pragma unroll
      for (int k = 0; k < V; ++k)
        if (lane + 32u * k < n) f(lane + 32u * k, v[k]);
    } else {
      for (uint64_t j = lane; j < n; j += 32) f(j, double(x[j]));
    }
  }
  // f(j, x[j], y[j]) for the lane's j in order, y a row of the same length
  template <typename F> __device__ void each(const WarpRow& y, F&& f) const {
    if constexpr (V > 0) {
#pragma unroll
      for (int k = 0; k < V; ++k)
        if (lane + 32u * k < n) f(lane + 32u * k, v[k], y.v[k]);
    } else {
      for (uint64_t j = lane; j < n; j += 32) f(j, double(x[j]), double(y.x[j]));
    }
  }
};

// The registers a lane's share of an n-value row takes (normRowValues: the kernels' V); 0 above
// 1,024 values.
inline int normRowValues(uint64_t n) {
  for (int v = 1; v <= 32; v *= 2)
    if (n <= 32u * uint64_t(v)) return v;
  return 0;
}

// The row stats of x by one warp: nn.LayerNorm's (centred) or nn.RMSNorm's.
template <typename T, int V> __device__ ops::NormRow warpNormRow(const WarpRow<T, V>& x, double eps, bool centred) {
  ops::NormRow s;
  if (centred) {
    double sum = 0;
    x.each([&](uint64_t, double v) { sum += v; });
    s.mean = warpSum(sum) / double(x.n);
  }
  double sq = 0;
  x.each([&](uint64_t, double v) {
    const double c = v - s.mean;
    sq += c * c;
  });
  s.rstd = ops::normRstd(warpSum(sq), x.n, eps);
  return s;
}

// Layer l's norm forward (z[l] from z[l-1]), a warp a row.
template <typename T, int V> __global__ void normForwardKernel(void* base, uint32_t l, uint64_t rows) {
  const uint64_t r = blockIdx.x * uint64_t(kOpRowsPerBlock) + threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  if (r >= rows) return;
  const nna_bound_layer<T> P = bindModel<T>(base, l - 1), C = bindModel<T>(base, l);
  const uint64_t n = C.units;
  const WarpRow<T, V> x(P.z + r * n, n, lane);
  T* y = C.z + r * n;
  const ops::NormRow s = warpNormRow(x, C.op_value, ops::normCentred(C.op));
  x.each([&](uint64_t j, double v) { y[j] = T(ops::normOut(v, s, double(C.w[j]), C.b ? double(C.b[j]) : 0.0)); });
}

// Layer l's norm backward: dL/dz[l-1] into d[l-1] (l >= 2), the row's stats into `stats`.
template <typename T, int V> __global__ void normBackwardKernel(void* base, uint32_t l, uint64_t rows, ops::NormRow* stats) {
  const uint64_t r = blockIdx.x * uint64_t(kOpRowsPerBlock) + threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  if (r >= rows) return;
  const nna_bound_layer<T> P = bindModel<T>(base, l - 1), C = bindModel<T>(base, l);
  const uint64_t n = C.units;
  const bool centred = ops::normCentred(C.op);
  const WarpRow<T, V> x(P.z + r * n, n, lane);
  const ops::NormRow s = warpNormRow(x, C.op_value, centred);
  if (lane == 0) stats[uint64_t(blockIdx.z) * rows + r] = s;
  if (l == 1) return;
  const WarpRow<T, V> dy(C.d + r * n, n, lane);
  ops::NormGradSums g;  // the lane's share, then the warp's
  x.each(dy, [&](uint64_t j, double xj, double dyj) { g.add(xj, dyj, double(C.w[j]), s); });
  g.a = warpSum(g.a);
  g.b = warpSum(g.b);
  g.finish(n, centred);
  T* dx = P.d + r * n;
  x.each(dy, [&](uint64_t j, double xj, double dyj) { dx[j] = T(g.in(xj, dyj, double(C.w[j]), s)); });
}

// f(kernel) with the norm kernel instantiated for rows of n values (normRowValues).
template <template <typename, int> class K, typename T, typename F> void withNormRow(uint64_t n, F&& f) {
  switch (normRowValues(n)) {
    case 1: return f(K<T, 1>::kernel);
    case 2: return f(K<T, 2>::kernel);
    case 4: return f(K<T, 4>::kernel);
    case 8: return f(K<T, 8>::kernel);
    case 16: return f(K<T, 16>::kernel);
    case 32: return f(K<T, 32>::kernel);
    default: return f(K<T, 0>::kernel);
  }
}
template <typename T, int V> struct NormForward {
  static constexpr auto kernel = normForwardKernel<T, V>;
};
template <typename T, int V> struct NormBackward {
  static constexpr auto kernel = normBackwardKernel<T, V>;
};

// An element op (ops/element.h: dropout, residual), element by element: forward (z[l] from
// z[l-1], and z[from]) or, with `backward`, dL/dz[l-1] into d[l-1] from d[l] (a residual's
// z[from] share is residualAddKernel's). `train`: dropout drops, with the mask of (seed, step);
// `rowBase`: the group's row of this batch's row 0 (LayerRun::rowBase_).
template <typename T> __global__ void opElementKernel(void* base, uint32_t l, uint64_t rows, bool backward, bool train, uint64_t seed, uint64_t step, uint64_t rowBase) {
  const nna_bound_layer<T> P = bindModel<T>(base, l - 1), C = bindModel<T>(base, l);
  const uint64_t n = C.units, total = rows * n;
  const T* in = backward ? C.d : P.z;
  T* out = backward ? P.d : C.z;
  const T* from = nna_op_param_kind_of(C.op) == NNA_OP_PARAM_FROM && !backward ? bindModel<T>(base, C.from).z : nullptr;
  ops::withElementOp(C.op, ops::ElementLayer<T>{l, n, C.op_value, from, train, seed, step, rowBase}, [&](const auto& op) {
    for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < total; i += uint64_t(gridDim.x) * blockDim.x) {
      const uint64_t r = i / n;
      out[i] = backward ? op.backward(r, i - r * n, i, in[i]) : op.forward(r, i - r * n, i, in[i]);
    }
  });
}

// A norm's gain and bias gradients: column j's sum over the rows, each of kOpStripes stripes
// (rows stripe, stripe + kOpStripes, ...) in row order, the stripes added in order.
template <typename T> __global__ void opParamGradKernel(void* base, uint32_t l, uint64_t rows, const ops::NormRow* stats) {
  __shared__ double part[2][kOpStripes][kOpCols];
  const uint64_t j = blockIdx.x * uint64_t(kOpCols) + threadIdx.x;
  const nna_bound_layer<T> P = bindModel<T>(base, l - 1), C = bindModel<T>(base, l);
  const uint64_t n = C.units;
  const ops::NormRow* s = stats + uint64_t(blockIdx.z) * rows;
  double g = 0, bias = 0;
  if (j < n)
#pragma unroll 4
    for (uint64_t r = threadIdx.y; r < rows; r += kOpStripes) {
      const double dy = double(C.d[r * n + j]);
      g += dy * ops::normHat(double(P.z[r * n + j]), s[r]);
      bias += dy;
    }
  part[0][threadIdx.y][threadIdx.x] = g;
  part[1][threadIdx.y][threadIdx.x] = bias;
  __syncthreads();
  if (threadIdx.y != 0 || j >= n) return;
  g = 0;
  bias = 0;
  for (unsigned k = 0; k < kOpStripes; ++k) {
    g += part[0][k][threadIdx.x];
    bias += part[1][k][threadIdx.x];
  }
  if (C.dw) C.dw[j] = T(g);
  if (C.db) C.db[j] = T(bias);
}

// d[k] += d[r]: residual layer r adds z[k], so dL/dz[k] takes its d too (one launch per such
// layer, in layer order, as the CPU adds them), before layer k's backward applies its f'.
template <typename T> __global__ void residualAddKernel(void* base, uint32_t k, uint32_t r, uint64_t rows) {
  const nna_bound_layer<T> P = bindModel<T>(base, k), R = bindModel<T>(base, r);
  const uint64_t n = rows * P.units;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) P.d[i] += R.d[i];
}

// An embedding's z (layer 1) from x = z[0], an element a thread (ops/embedding.h).
template <typename T> __global__ void embedForwardKernel(void* base, uint64_t rows) {
  const nna_bound_layer<T> X = bindModel<T>(base, 0), C = bindModel<T>(base, 1);
  const uint64_t n = C.units, total = rows * n;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < total; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t r = i / n;
    C.z[i] = ops::embedOut(X.z + r * X.units, C.w, ops::embedSource(i - r * n, C.from, C.cols, C.cols_count), C.from, C.cols);
  }
}

// The output layer's z of each row of x that names no row of some table: NaN (ops/embedding.h
// embedRowBad), after the output layer's product. A thread a row.
template <typename T> __global__ void embedPoisonKernel(void* base, uint64_t rows) {
  const uint64_t r = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const nna_bound_layer<T> X = bindModel<T>(base, 0), E = bindModel<T>(base, 1), O = bindModel<T>(base, nna_header_of(base)->num_layers - 1);
  if (!ops::embedRowBad(X.z + r * X.units, E.from, E.cols, E.cols_count)) return;
  for (uint64_t j = 0; j < O.units; ++j) O.z[r * O.units + j] = T(NAN);
}

constexpr uint32_t kEmbedSharedKeys = 4096;  // an embedding's sort keys in shared memory up to this many rows

// The smallest power of two >= rows: the length of an embedding column's bitonic sort.
inline uint64_t embedSortLength(uint64_t rows) {
  uint64_t n = 1;
  while (n < rows) n *= 2;
  return n;
}

// An embedding's dw cleared (every element): rows that no index names keep 0.
template <typename T> __global__ void embedZeroKernel(void* base) {
  const nna_bound_layer<T> C = bindModel<T>(base, 1);
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < C.w_count; i += uint64_t(gridDim.x) * blockDim.x) C.dw[i] = T(0);
}

constexpr unsigned kSortThreads = 1024;           // embedSortKernel's block: the bitonic passes' work spread four times wider
constexpr unsigned long long kEmbedNone = ~0ull;  // a sort key of a row whose index is bad (its outputs are NaN), or padding

// Where an embedding column's runs are (one run: the sorted rows of one index): `keys`, sortLength
// a column a model; `runs`, (first sorted row << 32 | rows) of each run, in no order, sortLength
// a column a model; `count`, the runs of each column of each model.
struct EmbedRuns {
  unsigned long long* keys = nullptr;
  unsigned long long* runs = nullptr;
  unsigned* count = nullptr;
};

// An embedding's table gradients, first half: a block a categorical column (blockIdx.x) sorts the
// batch's (index, row) keys (bitonic, in shared memory up to kEmbedSharedKeys rows), into
// r.keys, then lists the runs of one index (their order does not matter: each run owns its
// table row).
template <typename T> __global__ void __launch_bounds__(kSortThreads) embedSortKernel(void* base, uint64_t rows, uint64_t sortLength, EmbedRuns r) {
  __shared__ unsigned long long shared[kEmbedSharedKeys];
  __shared__ unsigned runCount;
  const nna_bound_layer<T> X = bindModel<T>(base, 0), C = bindModel<T>(base, 1);
  const uint32_t j = blockIdx.x;
  const uint64_t column = uint64_t(blockIdx.z) * C.cols_count + j;
  unsigned long long* out = r.keys + column * sortLength;
  unsigned long long* k = sortLength <= kEmbedSharedKeys ? shared : out;
  const uint32_t card = C.cols[j].cardinality;
  if (threadIdx.x == 0) runCount = 0;
  for (uint64_t p = threadIdx.x; p < sortLength; p += blockDim.x) {
    const int64_t i = p < rows ? ops::embedIndex(X.z[p * X.units + C.from + j], card) : -1;
    k[p] = i < 0 ? kEmbedNone : (static_cast<unsigned long long>(i) << 32) | p;
  }
  __syncthreads();
  for (uint64_t size = 2; size <= sortLength; size *= 2)
    for (uint64_t stride = size / 2; stride > 0; stride /= 2) {
      for (uint64_t t = threadIdx.x; t < sortLength; t += blockDim.x) {
        const uint64_t u = t ^ stride;
        if (u <= t) continue;
        const unsigned long long a = k[t], b = k[u];
        if ((a > b) == ((t & size) == 0)) {
          k[t] = b;
          k[u] = a;
        }
      }
      __syncthreads();
    }
  unsigned long long* runs = r.runs + column * sortLength;
  for (uint64_t p = threadIdx.x; p < rows; p += blockDim.x) {
    if (k != out) out[p] = k[p];
    const unsigned long long key = k[p];
    if (key == kEmbedNone || (p > 0 && k[p - 1] >> 32 == key >> 32)) continue;  // not the first row of its index
    uint64_t lo = p + 1, hi = rows;                                             // the run's end: a binary search over the sorted keys
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (k[mid] >> 32 == key >> 32)
        lo = mid + 1;
      else
        hi = mid;
    }
    runs[atomicAdd(&runCount, 1u)] = (static_cast<unsigned long long>(p) << 32) | (lo - p);
  }
  __syncthreads();
  if (threadIdx.x == 0) r.count[column] = runCount;
}

// Second half: a warp a (run, element e) of column blockIdx.y adds the run's errors into its
// table element in ops/embedding.h embedGradSum's order (lane k takes rows k, k + 32, ..., then
// the lanes pairwise, k + o into k): the CPU's bits without atomics, a run's rows loaded at once.
template <typename T> __global__ void embedSumKernel(void* base, uint64_t sortLength, EmbedRuns r) {
  const nna_bound_layer<T> C = bindModel<T>(base, 1);
  const uint32_t j = blockIdx.y, dim = C.cols[j].dim;
  const uint64_t column = uint64_t(blockIdx.z) * C.cols_count + j;
  const unsigned long long* k = r.keys + column * sortLength;
  const uint64_t runs = r.count[column];
  const unsigned lane = threadIdx.x % 32;
  const ops::EmbedColumnAt col = ops::embedColumnAt(C.cols, C.from, j);
  const uint64_t units = C.units;
  // a warp-stride loop (every lane of a warp has its w): the grid is capped, the runs are not
  for (uint64_t w = (blockIdx.x * uint64_t(blockDim.x) + threadIdx.x) / 32;; w += uint64_t(gridDim.x) * blockDim.x / 32) {
    const uint64_t run = w / dim, e = w - run * dim;
    if (run >= runs) return;
    const unsigned long long at = r.runs[column * sortLength + run];
    const uint64_t first = at >> 32, n = at & 0xffffffffull;
    T sum = T(0);
    for (uint64_t t = lane; t < n; t += 32) sum += C.d[(k[first + t] & 0xffffffffull) * units + col.out + e];
    for (unsigned o = 16; o > 0; o /= 2) {
      const T other = __shfl_down_sync(0xffffffffu, sum, o);
      if (lane < o) sum += other;
    }
    if (lane == 0) C.dw[col.table + (k[first] >> 32) * dim + e] = sum;
  }
}

}  // namespace nna
