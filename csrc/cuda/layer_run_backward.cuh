// layer_run_backward.cuh: LayerRun's backward (layer_run.cuh): a layer's error, bias and weight
// gradients in each precision, the 16-bit copies the products read, and the products themselves.
#pragma once
#include "layer_run.cuh"

namespace nna {
namespace {

template <typename T> template <int MODE> auto LayerRun<T>::tiled(uint32_t l, uint64_t rows, uint64_t M, uint64_t N, bool fold, const Hyper<T>& hp) -> void {
  if constexpr (std::is_same_v<T, float>) {
    if (prec_ != Precision::Fp32) {                                                                      // float only (checkRun): nn-arena's tensor-core kernels
      const dim3 grid(unsigned((N + kTcTile - 1) / kTcTile), unsigned((M + kTcTile - 1) / kTcTile), 1);  // one model: check.cc
      if (prec_ == Precision::Tf32x3)
        graph_->launch(s_, tcGemmKernel<MODE, true>, grid, 256, base_, l, rows, fold, hp);
      else
        graph_->launch(s_, tcGemmKernel<MODE, false>, grid, 256, base_, l, rows, fold, hp);
      return;
    }
  }
  auto blocks = [&](uint64_t tile) { return ((M + tile - 1) / tile) * ((N + tile - 1) / tile); };
  auto grid = [&](uint64_t tile) { return dim3(unsigned((N + tile - 1) / tile), unsigned((M + tile - 1) / tile), K_); };
  if (blocks(64) >= uint64_t(sms_))
    graph_->launch(s_, gemmKernel<T, MODE, 64>, grid(64), 256, base_, l, rows, fold, hp, lrs_.get());
  else if (blocks(32) >= uint64_t(sms_))
    graph_->launch(s_, gemmKernel<T, MODE, 32>, grid(32), 256, base_, l, rows, fold, hp, lrs_.get());
  else
    graph_->launch(s_, gemmKernel<T, MODE, 16>, grid(16), 256, base_, l, rows, fold, hp, lrs_.get());
}

template <typename T> auto LayerRun<T>::headBackward(uint64_t rows, const Hyper<T>& hp, bool fold) -> bool {
  const uint32_t l = last_;
  const uint64_t n = L_[l].units, m = L_[l].fan_in;
  st_.dbDone[l] = false;
  HalfOut x, d;
  if (headRead() == HeadRead::Copies) {
    backwardCopies(l, rows);
    x = half_.z(l - 1);
    d = half_.d(l);
  }
  if (l > 1) headError(rows);
  fork();
  // A two-layer net: db[1] (and its bias step) in this launch beside layer 1's weight-gradient
  // product, where it was a launch of its own on the chain before that product (bf16 gains less:
  // its second stream overlaps less).
  // d[1] is final here: the output launch (m_.headFused) applied f' to it.
  const bool prevBias = l == 2 && m_.headFused && !st_.dbDone[1];
  gradientWork(l, [&] {
    launchOutputWeightGrad<T>(n, m, K_, headRead(), half_.fp16(), prevBias, [&](auto kernel, dim3 grid, dim3 block) {
      graph_->launch(s_, kernel, grid, block, base_, l, rows, x, d, fold, h_.optimizer, hp, lrs_.get(), prevBias, prevBias && foldsLayer(1));
    });
  });
  if (prevBias) st_.dbDone[1] = true;
  if (fold && half_.active()) st_.wFresh[l] = false;  // w moved: the next forward makes its copy again
  return fold;
}

template <typename T> auto LayerRun<T>::backward(uint32_t l, uint64_t rows, const Hyper<T>& hp) -> bool {
  const uint64_t n = L_[l].units, m = L_[l].fan_in;
  // The tiled kernels fold with each model's own lr (lrs[blockIdx.z]); a batched cuBLAS product
  // has one alpha for every model, so it folds only where the rates are equal. A compact SGD
  // arena (one model: spec.ts, validate.cc) has no dw: it always folds. tf32x3 through cuBLAS
  // does not fold: three products adding -lr * (a part) into w each round it to w's ulp (over
  // many steps the three roundings drift far past fp32's own noise); dw is summed first, then
  // applied (a compact SGD arena refuses tf32x3: check.cc). Never in a data-parallel group: the step must
  // use the group's reduced dw, not this replica's (a group refuses compact arenas: check.cc).
  // cuBLAS folds w -= lr * dw alone: not with weight decay (the tiled epilogue runs the
  // descriptor's whole update). A clipping run never folds (the step needs the global norm).
  if (L_[l].op != NNA_OP_DENSE) return opBackward(l, rows, hp);
  const bool fold = foldsLayer(l);
  if (m_.lt) return ltBackward(l, rows, hp, fold);
  if (l == last_ && m_.head) return headBackward(rows, hp, fold);
  if (!st_.dbDone[l]) {  // db[l] reads d[l] only, as the products below do
    fork();
    gradientWork(l, [&] { biasGrad(l, rows, fold, hp, false, HalfOut{}); });
  }
  st_.dbDone[l] = false;
  if (!blas_) {
    if (l > 1 && residualInto(l - 1))
      NNA_FAIL("NOT_SUPPORTED", "a residual layer adds layer " + std::to_string(l - 1) + "'s output: without cuBLAS its error takes f' inside the product (use the CPU backend)");
    if (l > 1) tiled<kErrorPrev>(l, rows, rows, m);
    fork();
    gradientWork(l, [&] { tiled<kWeightGrad>(l, rows, n, m, fold, hp); });
    return fold;
  }
  if (half_.active()) return backwardHalf(l, rows, hp, fold);
  // d's split parts serve the error product, and the weight-gradient one unless it reads d^T
  const Split d = l > 1 || !transposeForTensorCores(l) ? split(1, at(l, NNA_D), rows * n) : Split{at(l, NNA_D)};
  const bool early = handsOffEarly(l);
  if (early) {  // the group reduces dw[l] while the error product runs
    weightGrad(l, rows, hp, fold, d);
    handOff(l, true);
  }
  if (l > 1) {
    // d[l-1]^T (m x rows) = w^T (m x n) . d^T (n x rows), then times act'(z[l-1])
    if (K_ > 1)
      gemmBatched(false, false, int(m), int(rows), int(n), T(1), at(l, NNA_W), int(m), stride(l, NNA_W), at(l, NNA_D), int(n), stride(l, NNA_D), T(0), at(l - 1, NNA_D), int(m),
                  stride(l - 1, NNA_D));
    else
      product(false, false, int(m), int(rows), int(n), T(1), split(0, at(l, NNA_W), n * m), int(m), d, int(n), T(0), at(l - 1, NNA_D), int(m));
    fork();  // the weight-gradient product reads d[l] and z[l-1], which the activation gradient leaves alone
    activationGrad(l, rows, fold, hp, HalfOut{});
  } else {
    fork();
  }
  if (early)
    sync_->weightsFree(l, s_, groupStep());
  else
    gradientWork(l, [&] { weightGrad(l, rows, hp, fold, d); });
  return fold;
}

template <typename T> auto LayerRun<T>::headError(uint64_t rows) -> void {
  if (st_.errorDone) {
    st_.errorDone = false;
    return;
  }
  const bool copies = headRead() == HeadRead::Copies;
  const HalfOut w = copies ? half_.w(last_) : HalfOut{}, d = copies ? half_.d(last_) : HalfOut{};
  const HalfOut dPrev = half_.active() ? half_.d(last_ - 1) : HalfOut{};
  launchOutputError<T>(L_[last_].units, rows, K_, headRead(), half_.fp16(),
                       [&](auto kernel, dim3 grid, unsigned threads) { graph_->launch(s_, kernel, grid, threads, base_, last_, rows, w, d, dPrev); });
}

template <typename T> auto LayerRun<T>::gradientD(uint32_t l) const -> HalfOut {
  if (l != last_ || !scalesD(l)) return half_.d(l);
  HalfOut h = half_.d(l);
  h.p = scaledLast_;
  return h;
}

template <typename T> auto LayerRun<T>::opBackward(uint32_t l, uint64_t rows, const Hyper<T>& hp) -> bool {
  const bool norm = ops::isNorm(L_[l].op);
  if (norm)
    withNormRow<NormBackward, T>(L_[l].units, [&](auto kernel) { graph_->launch(s_, kernel, dim3(opRowBlocks(rows), 1, K_), kThreads, base_, l, rows, normRows(l)); });
  else if (l > 1 && !throughBias(l))  // else in layer l-1's bias gradient
    graph_->launch(s_, opElementKernel<T>, dim3(elementBlocks(rows * L_[l].units), 1, K_), kThreads, base_, l, rows, true, true, p_.dropoutSeed, opStep_, rowBase_);
  if (l > 1) activationGrad(l, rows, false, hp, half_.active() ? half_.d(l - 1) : HalfOut{});
  if (norm) {  // the gain and bias gradients read d[l], z[l-1] and the row stats, which nothing below writes
    fork();
    gradientWork(
        l, [&] { graph_->launch(s_, opParamGradKernel<T>, dim3(unsigned((L_[l].units + kOpCols - 1) / kOpCols), 1, K_), dim3(kOpCols, kOpStripes), base_, l, rows, normRows(l)); });
  }
  if (L_[l].op == NNA_OP_EMBEDDING && L_[l].region[NNA_DW].count) {  // layer 1: its tables' gradients, nothing for x
    if (!keysBeside()) embedKeys(rows);                              // else sorted beside this step's forward, joined before the backward
    // a warp a run's element, up to eight blocks a multiprocessor (the kernel strides over the rest)
    const unsigned blocks = std::min(blocksFor(rows * embedMaxDim_ * 32), unsigned(sms_) * 8);
    graph_->launch(s_, embedSumKernel<T>, dim3(blocks, embedColumns_, K_), kThreads, base_, embedSortLength(rows), embedRuns_);
  }
  return false;
}

template <typename T> auto LayerRun<T>::embedKeys(uint64_t rows) -> void {
  graph_->launch(s_, embedZeroKernel<T>, dim3(elementBlocks(L_[1].region[NNA_DW].count), 1, K_), kThreads, base_);
  graph_->launch(s_, embedSortKernel<T>, dim3(embedColumns_, 1, K_), kSortThreads, base_, rows, embedSortLength(rows), embedRuns_);
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
  if (!m_.besides) return f();
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

template <typename T> auto LayerRun<T>::biasGrad(uint32_t l, uint64_t rows, bool fold, const Hyper<T>& hp, bool applyGrad, HalfOut half, BiasFrom from) -> void {
  const bool scaled = applyGrad && scalesD(l);  // the copy the folded product reads: d times lr
  const bool wide = scaled && wideFirst_;       // its rows interleaved over the models
  const uint64_t units = L_[l].units;
  if (wide && half) half.stride = units;
  const dim3 grid(biasColumnBlocks(l), 1, K_);
  const bool narrow = biasNarrow(l);
  auto launch = [&](auto kernel, dim3 grid, unsigned stripes) {
    graph_->launch(s_, kernel, grid, dim3(kBiasCols, stripes), base_, l, rows, fold, h_.optimizer, hp, lrs_.get(), applyGrad, half, scaled,
                   scaled && !half ? scaledFirst_ : nullptr, wide ? units : uint64_t(stride(l, NNA_D)), wide ? units * K_ : units, biasSums_[l], from);
  };
  const bool named = from.through || from.adder;
  if (narrow) return named ? launch(biasGradKernel<T, kBiasStripes, true>, grid, kBiasStripes) : launch(biasGradKernel<T, kBiasStripes>, grid, kBiasStripes);
  const dim3 split(grid.x, biasGroups(l), grid.z);
  if (named)
    launch(biasGradKernel<T, kBiasStripesWide, true>, split, kBiasStripesWide / split.y);
  else
    launch(biasGradKernel<T, kBiasStripesWide>, split, kBiasStripesWide / split.y);
}

template <typename T> auto LayerRun<T>::activationGrad(uint32_t l, uint64_t rows, bool fold, const Hyper<T>& hp, HalfOut half) -> void {
  const uint32_t k = l - 1;
  const bool inBias = L_[k].op == NNA_OP_DENSE && m_.crossBias;  // layer k's bias gradient pass, with f'
  // the residual adds into d[k]; the last in that pass, with the backward of an element op above
  const size_t adds = adders_[k].size();
  residualAdds(k, rows, inBias && adds ? adds - 1 : adds);
  // An op's d takes no f' (ops have no activation) and no product reads a 16-bit copy of it.
  if (L_[k].op != NNA_OP_DENSE) return;
  if (inBias) {
    BiasFrom from;
    if (adds) from.adder = adders_[k].back();
    if (throughBias(l)) from = BiasFrom{l, from.adder, p_.dropoutSeed, opStep_, rowBase_};
    biasGrad(k, rows, foldsLayer(k), hp, true, half, from);
    st_.dbDone[k] = true;
    return;
  }
  graph_->launch(s_, activationGradKernel<T>, dim3(blocksFor(rows * L_[l].fan_in), 1, K_), kThreads, base_, l, rows, half);
}

template <typename T> auto LayerRun<T>::backwardCopies(uint32_t l, uint64_t rows) -> void {
  const uint64_t n = L_[l].units, m = L_[l].fan_in;
  if (l == last_ && !m_.scaling && !st_.dLastHalf) toHalf(l, NNA_D, rows * n);
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

}  // namespace
}  // namespace nna
