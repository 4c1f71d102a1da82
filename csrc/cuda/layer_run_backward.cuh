// layer_run_backward.cuh: LayerRun's backward (layer_run.cuh): a layer's error, bias and weight
// gradients in each precision, the 16-bit copies the products read, and the products themselves.
#pragma once
#include "layer_run.cuh"

namespace nna {
namespace {

template <typename T> auto LayerRun<T>::opBackward(uint32_t l, uint64_t rows) -> bool {
  const bool norm = ops::isNorm(L_[l].op);
  if (norm)
    graph_->launch(s_, normBackwardKernel<T>, dim3(opRowBlocks(rows), 1, K_), kThreads, base_, l, rows, opRows_);
  else if (l > 1)
    graph_->launch(s_, opElementKernel<T>, dim3(elementBlocks(rows * L_[l].units), 1, K_), kThreads, base_, l, rows, true, true, p_.dropoutSeed, opStep_);
  if (l > 1) {
    residualAdds(l - 1, rows);
    // f' of layer l-1, and (bf16 / fp16) the copy of d[l-1] its products read
    graph_->launch(s_, activationGradKernel<T>, dim3(blocksFor(rows * L_[l].fan_in), 1, K_), kThreads, base_, l, rows, half_.active() ? half_.d(l - 1) : HalfOut{});
  }
  if (norm) graph_->launch(s_, opParamGradKernel<T>, dim3(unsigned((L_[l].units + kOpCols - 1) / kOpCols), 1, K_), dim3(kOpCols, kOpStripes), base_, l, rows, opRows_);
  if (L_[l].op == NNA_OP_EMBEDDING && L_[l].region[NNA_DW].count) {  // layer 1: its tables' gradients, nothing for x
    graph_->launch(s_, embedZeroKernel<T>, dim3(elementBlocks(L_[l].region[NNA_DW].count), 1, K_), kThreads, base_);
    const uint64_t sortLength = embedSortLength(rows);
    graph_->launch(s_, embedSortKernel<T>, dim3(embedColumns_, 1, K_), kSortThreads, base_, rows, sortLength, embedKeys_);
    graph_->launch(s_, embedSumKernel<T>, dim3(blocksFor(rows * embedMaxDim_), embedColumns_, K_), kThreads, base_, rows, sortLength, embedKeys_);
  }
  return false;
}

template <typename T> auto LayerRun<T>::weightGrad(uint32_t l, uint64_t rows, const Hyper<T>& hp, bool fold, const Split& d) -> void {
  const uint64_t n = L_[l].units, m = L_[l].fan_in;
  const T alpha = weightGradAlpha(l, hp, fold);
  const T* scalars = fold ? foldScalars_.get() : nullptr;  // alpha from the device (a scheduled fold)
  if (K_ > 1 && l == 1 && wideFirst_)                      // every model's at once: [w_1 .. w_K]^T += -1 z[0]^T [lr_1 d_1 .. lr_K d_K]
    gemmBatched(false, true, int(m), int(n * K_), int(rows), alpha, at(0, NNA_Z), int(m), 0, scaledFirst_, int(n * K_), 0, T(1), at(1, NNA_W), int(m), 0, nullptr, 1);
  else if (K_ > 1)
    gemmBatched(false, true, int(m), int(n), int(rows), alpha, at(l - 1, NNA_Z), int(m), stride(l - 1, NNA_Z), scalesD(l) ? scaledCopy(l) : at(l, NNA_D), int(n), stride(l, NNA_D),
                fold ? T(1) : T(0), at(l, fold ? NNA_W : NNA_DW), int(m), stride(l, fold ? NNA_W : NNA_DW), scalars);
  else if (transposeForTensorCores(l))
    weightGradTf32(l, rows, alpha, fold, scalars);
  else {
    const Split z = split(0, at(l - 1, NNA_Z), rows * m);
    weightGradSlices(l, [&](uint64_t u0, uint64_t u1) {
      product(false, true, int(m), int(u1 - u0), int(rows), alpha, z, int(m), u0 ? Split{d.x + u0} : d, int(n), fold ? T(1) : T(0), at(l, fold ? NNA_W : NNA_DW) + u0 * m, int(m),
              scalars);
    });
  }
}

template <typename T> template <typename F> auto LayerRun<T>::onSide(F&& f) -> void {
  if (!besides_) return f();
  const cudaStream_t main = s_;
  s_ = side_.stream;
  on_ = &side_;
  try {
    f();
  } catch (...) {
    s_ = main;
    on_ = &lane_;
    throw;
  }
  s_ = main;
  on_ = &lane_;
}

template <typename T> template <typename F> auto LayerRun<T>::gradientWork(uint32_t l, F&& f) -> void {
  if (l == 1)
    f();
  else
    onSide(std::forward<F>(f));
}

template <typename T> template <typename F> auto LayerRun<T>::weightGradSlices(uint32_t l, F&& f) -> void {
  const uint32_t n = sync_ && K_ == 1 && prec_ != Precision::Tf32x3 ? sync_->slices(l) : 1;
  for (uint32_t j = 0; j < n; ++j) {
    f(sliceUnits(L_[l].units, n, j), sliceUnits(L_[l].units, n, j + 1));
    if (n > 1) sync_->sliceReady(l, j, s_);
  }
}

template <typename T> auto LayerRun<T>::ltForward(uint32_t l, uint64_t rows) -> bool {
  st_.maskFresh[l] = false;
  LtProduct p;
  if (!ltForwardProduct(l, rows, &p) || !ltReady(p)) return false;
  ltLaunch(p);
  st_.maskFresh[l] = p.aux != nullptr;
  return true;
}

template <typename T> auto LayerRun<T>::activationGrad(uint32_t l, uint64_t rows, bool fold, const Hyper<T>& hp, HalfOut half) -> void {
  if (crossPhase_) {
    biasGrad(l - 1, rows, foldsLayer(l - 1), hp, true, half);
    st_.dbDone[l - 1] = true;
    return;
  }
  graph_->launch(s_, activationGradKernel<T>, dim3(blocksFor(rows * L_[l].fan_in), 1, K_), kThreads, base_, l, rows, half);
}

template <typename T> auto LayerRun<T>::backwardCopies(uint32_t l, uint64_t rows) -> void {
  const uint64_t n = L_[l].units, m = L_[l].fan_in;
  if (l == last_ && !scaling_ && !st_.dLastHalf) toHalf(l, NNA_D, rows * n);
  if (!st_.wFresh[l]) toHalf(l, NNA_W, n * m);
  if (!st_.zFresh[l - 1]) toHalf(l - 1, NNA_Z, rows * m);
}

template <typename T> auto LayerRun<T>::backwardHalf(uint32_t l, uint64_t rows, const Hyper<T>& hp, bool fold) -> bool {
  const uint64_t n = L_[l].units, m = L_[l].fan_in;
  backwardCopies(l, rows);
  const float alpha = float(weightGradAlpha(l, hp, fold));
  // dw^T (m x n) = z[l-1]^T (m x rows) . d (rows x n)   [or w^T += -lr * that]
  const auto weightGradHalf = [&] {
    if (l == 1 && wideFirst_) {  // every model's at once (weightGrad)
      HalfOut d = half_.d(1);
      d.stride = 0;
      gemmHalf(false, true, int(m), int(n * K_), int(rows), alpha, half_.z(0), int(m), d, int(n * K_), 1.0f, at(1, NNA_W), int(m), 0, nullptr, 1);
      return;
    }
    weightGradSlices(l, [&](uint64_t u0, uint64_t u1) {
      HalfOut d = gradientD(l);
      d.p = static_cast<char*>(d.p) + u0 * 2;  // 16-bit elements
      gemmHalf(false, true, int(m), int(u1 - u0), int(rows), alpha, half_.z(l - 1), int(m), d, int(n), fold ? 1.0f : 0.0f, at(l, fold ? NNA_W : NNA_DW) + u0 * m, int(m),
               stride(l, fold ? NNA_W : NNA_DW), fold ? foldScalars_.get() : nullptr);
    });
  };
  const bool early = handsOffEarly(l);
  if (early) {  // the group reduces dw[l] while the error product runs
    weightGradHalf();
    handOff(l, true);
  }
  if (l > 1) {  // d[l-1]^T (m x rows) = w^T (m x n) . d^T (n x rows), then times act'(z[l-1])
    gemmHalf(false, false, int(m), int(rows), int(n), 1.0f, half_.w(l), int(m), half_.d(l), int(n), 0.0f, at(l - 1, NNA_D), int(m), stride(l - 1, NNA_D));
    fork();  // the weight-gradient product reads the copies of d[l] and z[l-1], which the activation gradient leaves alone
    residualAdds(l - 1, rows);
    activationGrad(l, rows, fold, hp, half_.d(l - 1));
  } else {
    fork();
  }
  if (early)
    sync_->weightsFree(l, s_, groupStep());
  else
    gradientWork(l, weightGradHalf);
  if (fold) st_.wFresh[l] = false;  // w moved: the next forward makes its copy again
  return fold;
}

template <typename T>
auto LayerRun<T>::gemmBatched(bool tA, bool tB, int m, int n, int k, T alpha, const T* A, int lda, long long sA, const T* B, int ldb, long long sB, T beta, T* C, int ldc,
                              long long sC, const T* scalars, int count) -> void {
  if (!count) count = int(K_);
  if (!graph_->external(tA, tB, m, n, k, scalars ? T(0) : alpha, scalars, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, count)) return;
  blasGemmBatched(*on_, tA, tB, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, count, scalars);
}

template <typename T>
auto LayerRun<T>::gemmHalf(bool tA, bool tB, int m, int n, int k, float alpha, HalfOut A, int lda, HalfOut B, int ldb, float beta, T* C, int ldc, long long sC, const T* scalars,
                           int count) -> void {
  if (!count) count = int(K_);
  const void *a = A.p, *b = B.p;
  const long long sA = static_cast<long long>(A.stride), sB = static_cast<long long>(B.stride);
  if (!graph_->external(tA, tB, m, n, k, scalars ? 0.0f : alpha, scalars, a, lda, sA, b, ldb, sB, beta, C, ldc, sC, count)) return;
  if constexpr (std::is_same_v<T, float>) blasGemmHalfBatched(*on_, half_.fp16(), tA, tB, m, n, k, alpha, a, lda, sA, b, ldb, sB, beta, C, ldc, sC, count, scalars);
}

template <typename T> auto LayerRun<T>::staleWeightsToHalf(bool unfoldedOnly) -> void {
  if constexpr (std::is_same_v<T, float>) {
    HalfCasts c{};
    unsigned count = 0;
    auto flush = [&] {
      if (count) castsToHalf(c, count);
      c = HalfCasts{};
      count = 0;
    };
    for (uint32_t l = 1; l <= last_; ++l) {
      if (st_.wFresh[l] || (unfoldedOnly && foldsLayer(l)) || L_[l].op != NNA_OP_DENSE) continue;  // an op's gain is read in fp32
      c.src[count] = at(l, NNA_W);
      c.srcStride[count] = uint64_t(stride(l, NNA_W));
      c.dst[count] = half_.w(l);
      c.n[count] = L_[l].units * L_[l].fan_in;
      st_.wFresh[l] = true;
      if (++count == kMaxCasts) flush();
    }
    flush();
  }
}

template <typename T> auto LayerRun<T>::toHalf(uint32_t l, uint32_t kind, uint64_t n) -> void {
  if constexpr (std::is_same_v<T, float>) {
    HalfCasts c{};
    c.src[0] = at(l, kind);
    c.srcStride[0] = uint64_t(stride(l, kind));
    c.dst[0] = kind == NNA_W ? half_.w(l) : kind == NNA_Z ? half_.z(l) : half_.d(l);
    c.n[0] = n;
    castsToHalf(c, 1);
    if (kind == NNA_W) st_.wFresh[l] = true;
    if (kind == NNA_Z) st_.zFresh[l] = true;
  }
}

template <typename T> auto LayerRun<T>::weightGradTf32(uint32_t l, uint64_t rows, T alpha, bool fold, const T* scalars) -> void {
  if constexpr (std::is_same_v<T, float>) {
    const uint64_t n = L_[l].units, m = L_[l].fan_in;
    float* dT = work_.transposed(l);
    graph_->launch(s_, transposeKernel, dim3(unsigned((n + 31) / 32), unsigned((rows + 31) / 32)), dim3(32, 8), at(l, NNA_D), dT, rows, n);
    const Split z = split(0, at(l - 1, NNA_Z), rows * m), dTs = split(1, dT, rows * n);
    weightGradSlices(l, [&](uint64_t u0, uint64_t u1) {
      product(false, false, int(m), int(u1 - u0), int(rows), alpha, z, int(m), u0 ? Split{dT + u0 * rows} : dTs, int(rows), fold ? T(1) : T(0),
              at(l, fold ? NNA_W : NNA_DW) + u0 * m, int(m), scalars);
    });
  }
}

template <typename T> auto LayerRun<T>::split(int slot, const T* x, uint64_t n) -> Split {
  if (prec_ != Precision::Tf32x3) return {x};
  if constexpr (std::is_same_v<T, float>) {
    float* big = work_.slot(slot);
    float* small = big + work_.slotElements(slot);
    graph_->launch(s_, splitKernel, blocksFor(n), kThreads, x, big, small, n);
    return {x, big, small};
  }
  return {x};
}

template <typename T>
auto LayerRun<T>::product(bool tA, bool tB, int m, int n, int k, T alpha, const Split& a, int lda, const Split& b, int ldb, T beta, T* C, int ldc, const T* scalars) -> void {
  if (!graph_->external(tA, tB, m, n, k, scalars ? T(0) : alpha, scalars, a.x, a.big, a.small, lda, b.x, b.big, b.small, ldb, beta, C, ldc)) return;
  if constexpr (std::is_same_v<T, float>) {
    if (prec_ == Precision::Tf32) return blasGemmTf32(*on_, tA, tB, m, n, k, alpha, a.x, lda, b.x, ldb, beta, C, ldc, scalars);
    if (prec_ == Precision::Tf32x3) {
      blasGemmTf32(*on_, tA, tB, m, n, k, alpha, a.small, lda, b.big, ldb, beta, C, ldc);
      blasGemmTf32(*on_, tA, tB, m, n, k, alpha, a.big, lda, b.small, ldb, 1.0f, C, ldc);
      return blasGemmTf32(*on_, tA, tB, m, n, k, alpha, a.big, lda, b.big, ldb, 1.0f, C, ldc);
    }
  }
  blasGemm(*on_, tA, tB, m, n, k, alpha, a.x, lda, b.x, ldb, beta, C, ldc, scalars);
}

}  // namespace
}  // namespace nna
