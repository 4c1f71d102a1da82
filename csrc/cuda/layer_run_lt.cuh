// layer_run_lt.cuh: LayerRun's products through cuBLASLt with their epilogues (layer_run.cuh):
// the forward's bias + activation, the backward's, and the folded bias steps.
#pragma once
#include "layer_run.cuh"

namespace nna {
namespace {

template <typename T> auto LayerRun<T>::ltForward(uint32_t l, uint64_t rows) -> bool {
  st_.maskFresh[l] = false;
  LtProduct p;
  if (!ltForwardProduct(l, rows, &p) || !ltReady(p)) return false;
  ltLaunch(p);
  st_.maskFresh[l] = p.aux != nullptr;
  return true;
}

template <typename T> auto LayerRun<T>::ltForwardProduct(uint32_t l, uint64_t rows, LtProduct* out) const -> bool {
  if (L_[l].op != NNA_OP_DENSE) return false;  // an op's forward is its own kernel
  const uint64_t n = L_[l].units, m = L_[l].fan_in;
  if (l == last_ && m_.biasInOutput) return false;  // the output launch adds the bias
  // bf16 / fp16: layer L-1's alone, from the 16-bit copies, where the output launch rounds its own operands
  if (half_.active() && !(m_.headRounds && l + 1 == last_)) return false;
  LtProduct p = half_.active() ? ltBase(true, false, n, rows, m, half_.w(l).p, m, half_.z(l - 1).p, m, at(l, NNA_Z), n)
                               : ltBase(true, false, n, rows, m, at(l, NNA_W), m, at(l - 1, NNA_Z), m, at(l, NNA_Z), n);
  if (half_.active()) p.inputs = half_.fp16() ? LtInputs::Fp16 : LtInputs::Bf16;
  p.bias = at(l, NNA_B);
  if (K_ > 1) {
    p.batch = int(K_);
    p.strideA = stride(l, NNA_W);
    p.strideB = stride(l - 1, NNA_Z);
    p.strideC = stride(l, NNA_Z);
    p.strideBias = stride(l, NNA_B);
  }
  const uint32_t act = L_[l].activation;
  const bool mask = m_.lt && act == NNA_ACT_RELU && ltBuf_.mask(l);  // m_.ltForward: relu' from z, as without cuBLASLt
  if (act == NNA_ACT_IDENTITY || act == NNA_ACT_SOFTMAX) {
    p.epilogue = LtEpilogue::Bias;
  } else if (act == NNA_ACT_RELU) {
    p.epilogue = mask ? LtEpilogue::ReluAuxBias : LtEpilogue::ReluBias;
    if (mask) {
      p.aux = ltBuf_.mask(l);
      p.auxLd = ltBuf_.maskLd(l);
    }
  } else {
    return false;
  }
  *out = p;
  return true;
}

template <typename T> auto LayerRun<T>::forwardWorkspace() const -> size_t {
  size_t most = 0;
  for (uint32_t l = 1; l <= last_; ++l) {
    LtProduct p;
    size_t need = 0;
    if (ltForwardProduct(l, h_.batch, &p) && ltSupports(p, &need)) most = std::max(most, need);
  }
  return most;
}

template <typename T> auto LayerRun<T>::ltBackward(uint32_t l, uint64_t rows, const Hyper<T>& hp, bool fold) -> bool {
  const uint64_t n = L_[l].units, m = L_[l].fan_in;
  const T alpha = fold ? foldAlpha(hp) : T(1);
  if (st_.dbParked == l) {
    graph_->launch(s_, parkedBiasKernel<T>, blocksFor(n), kThreads, base_, l, reinterpret_cast<const T*>(ltBuf_.parked()), fold, h_.optimizer, hp, lrs_.get());
    st_.dbParked = 0;
    st_.dbDone[l] = true;
  }
  // tf32 reads d transposed, as the cuBLAS path does (Tf32Workspace): read as stored, L's step
  // was much slower (M's no different).
  const bool dT = prec_ == Precision::Tf32;
  LtProduct wg = dT ? ltBase(false, false, m, n, rows, at(l - 1, NNA_Z), m, work_.transposed(l), rows, at(l, fold ? NNA_W : NNA_DW), m)
                    : ltBase(false, true, m, n, rows, at(l - 1, NNA_Z), m, at(l, NNA_D), n, at(l, fold ? NNA_W : NNA_DW), m);
  wg.alpha = float(alpha);
  wg.beta = fold ? 1.0f : 0.0f;
  wg.scalars = fold ? foldScalars_.get() : nullptr;
  // Only the output layer's db: below it, db comes from the layer above's error product or
  // bias-gradient pass in a full plan, and a compact plan must take the same kernels.
  bool dbInProduct = false;
  if (l == last_ && !st_.dbDone[l] && !fold) {
    LtProduct withDb = wg;
    withDb.epilogue = LtEpilogue::BGradB;
    withDb.bias = at(l, NNA_DB);
    if ((dbInProduct = ltReady(withDb))) wg = withDb;
  }
  if (!st_.dbDone[l] && !dbInProduct) biasGrad(l, rows, fold, hp, false, HalfOut{});
  st_.dbDone[l] = false;
  if (l > 1) {  // d[l-1]^T (m x rows) = w^T (m x n) . d^T (n x rows), times act'(z[l-1])
    const LtProduct plain = ltBase(false, false, m, rows, n, at(l, NNA_W), m, at(l, NNA_D), n, at(l - 1, NNA_D), m);
    LtProduct e = plain;
    if (L_[l - 1].activation == NNA_ACT_RELU && ltBuf_.mask(l - 1) && (!fold || !m_.crossPhase || l - 1 < 64)) {
      // A Backward run (the primitives) has no mask from its Forward run: layer l-1's forward
      // product again makes it, and rewrites z[l-1] with the bits it holds (same operands,
      // same algorithm), so that the primitives give a Train step's bits.
      if (!st_.maskFresh[l - 1] && isPrimitive(p_.op)) ltForward(l - 1, rows);
      if (st_.maskFresh[l - 1]) {
        e.epilogue = LtEpilogue::DReluBGrad;
        e.aux = ltBuf_.mask(l - 1);
        e.auxLd = ltBuf_.maskLd(l - 1);
        e.bias = m_.crossPhase ? static_cast<void*>(at(l - 1, NNA_DB)) : ltBuf_.parked();
      }
    }
    if (e.epilogue != LtEpilogue::None && ltReady(e)) {
      ltLaunch(e);
      if (!m_.crossPhase) {
        st_.dbParked = l - 1;
      } else {
        st_.dbDone[l - 1] = true;
        if (fold) st_.biasSteps |= uint64_t(1) << (l - 1);
      }
    } else {
      if (ltReady(plain))
        ltLaunch(plain);
      else
        product(false, false, int(m), int(rows), int(n), T(1), Split{at(l, NNA_W)}, int(m), Split{at(l, NNA_D)}, int(n), T(0), at(l - 1, NNA_D), int(m));
      activationGrad(l, rows, fold, hp, HalfOut{});
    }
  }
  // dw^T (m x n) = z[l-1]^T (m x rows) . d (rows x n)   [or w^T += -lr * that]
  if (ltReady(wg)) {
    if constexpr (std::is_same_v<T, float>)
      if (dT) graph_->launch(s_, transposeKernel, dim3(unsigned((n + 31) / 32), unsigned((rows + 31) / 32)), dim3(32, 8), at(l, NNA_D), work_.transposed(l), rows, n);
    ltLaunch(wg);
  } else if (transposeForTensorCores(l))
    weightGradTf32(l, rows, alpha, fold, wg.scalars ? foldScalars_.get() : nullptr);
  else
    product(false, true, int(m), int(n), int(rows), alpha, Split{at(l - 1, NNA_Z)}, int(m), Split{at(l, NNA_D)}, int(n), fold ? T(1) : T(0), at(l, fold ? NNA_W : NNA_DW), int(m),
            fold ? foldScalars_.get() : nullptr);
  return fold;
}

template <typename T> auto LayerRun<T>::flushBiasSteps(const Hyper<T>& hp) -> void {
  if (!st_.biasSteps) return;
  uint64_t most = 0;
  for (uint32_t l = 1; l <= last_ && l < 64; ++l)
    if (st_.biasSteps >> l & 1u) most = std::max(most, L_[l].units);
  graph_->launch(s_, biasStepsKernel<T>, dim3(blocksFor(most), last_, 1), kThreads, base_, st_.biasSteps, h_.optimizer, hp, lrs_.get());
  st_.biasSteps = 0;
}

template <typename T>
auto LayerRun<T>::ltBase(bool tA, bool tB, uint64_t m, uint64_t n, uint64_t k, const void* A, uint64_t lda, const void* B, uint64_t ldb, void* C, uint64_t ldc) const -> LtProduct {
  LtProduct p;
  p.transA = tA;
  p.transB = tB;
  p.m = int(m);
  p.n = int(n);
  p.k = int(k);
  p.tf32 = prec_ == Precision::Tf32;
  p.A = A;
  p.lda = int(lda);
  p.B = B;
  p.ldb = int(ldb);
  p.C = static_cast<float*>(C);
  p.ldc = int(ldc);
  return p;
}

template <typename T> auto LayerRun<T>::ltLaunch(const LtProduct& p) -> void {
  if (firstStep_ && p.epilogue != LtEpilogue::None) ++st_.epilogues;  // also where a replay launches it
  if (!graph_->external(p.transA, p.transB, p.m, p.n, p.k, p.tf32, int(p.inputs), p.A, p.lda, p.B, p.ldb, p.C, p.ldc, p.scalars ? 0.0f : p.alpha, p.scalars ? 0.0f : p.beta,
                        p.scalars, uint32_t(p.epilogue), p.bias, p.aux, p.auxLd, ltBuf_.work()))
    return;
  ltMatmul(lane_, p, ltBuf_.work(), ltBuf_.workBytes());
}

}  // namespace
}  // namespace nna
