// layer_run_step.cuh: LayerRun (layer_run.cuh) constructed, a run and its steps (graphs, the side
// stream, the group's hand-over), the forward and the output layer, the optimizer steps.
#pragma once
#include "layer_run.cuh"

namespace nna {
namespace {

template <typename T>
LayerRun<T>::LayerRun(void* base, const nna_header& h, const std::vector<nna_layer>& layers, const OpTables& ops, const RunParams& p, const Lane& lane, LayerHooks* hooks,
                      GradSync* sync)
    : device_(lane.device),
      base_(base),
      h_(h),
      L_(layers),
      adders_(ops.adders),
      embedColumns_(ops.embedColumns),
      embedMaxDim_(ops.embedMaxDim),
      p_(p),
      lane_(lane),
      hooks_(hooks),
      sync_(sync),
      s_(lane.stream),
      last_(h.num_layers - 1),
      sms_(multiprocessors()),
      frac_(lossFracBits(h.batch)),
      blas_(lane.blas && productsUseBlas(h, layers)),
      prec_(std::is_same_v<T, float> ? p.precision : Precision::Fp32),
      K_(unsigned(nna_models(&h))),
      lrs_(p.lrs, lane.stream) {
  // The arena's cache (its graph and shelf), if an earlier run on this lane left one. Not
  // with a memory scheduler: its budget counts the arena alone, and its work between launches
  // is host-side (no graph).
  if (!hooks) cache_ = runCacheOf(p, lane);
  ScratchShelf& shelf = cache_ ? cache_->shelf : ownShelf_;
  for (uint32_t l = 1; l < h.num_layers; ++l) ops_ |= layers[l].op != NNA_OP_DENSE;
  // How the run goes, each rule in one place (csrc/train/run_modes.cc).
  RunModeInputs in;
  in.floatRun = std::is_same_v<T, float>;
  in.precision = prec_;
  in.op = p.op;
  in.models = K_;
  in.layers = h.num_layers;
  in.outputUnits = L_[last_].units;
  in.numBatches = p.numBatches;
  in.blas = blas_;
  in.ops = ops_;
  in.compact = h.flags & NNA_FLAG_COMPACT;
  in.hooks = hooks != nullptr;
  in.sync = sync != nullptr;
  in.syncGraphs = sync && sync->graphs();
  in.cache = cache_ != nullptr;
  in.lossScale = p.lossScale.active();
  in.sideStream = lane.sideStream;
  in.cublasLt = knob(Knob::CublasLt);
  in.cublasLtOn = knobOn(Knob::CublasLt);
  in.sideStreamKnob = knob(Knob::SideStream, "1") != "0";
  in.cudaGraphKnob = knob(Knob::CudaGraph, "1") != "0";
  // cuBLASLt is looked for only where a mode would take it (ltAvailable loads the library).
  in.ltAvailable = true;
  const RunModes wouldUse = resolveRunModes(in);
  in.ltAvailable = (wouldUse.lt || wouldUse.ltForward) && ltAvailable();
  m_ = resolveRunModes(in);
  if (m_.half) {
    half_.allocate(
        h, layers, prec_ == Precision::Fp16, [this](uint32_t l, uint32_t kind) { return stride(l, kind) ? K_ : 1u; }, shelf);
    st_.zFresh.assign(h.num_layers, false);
    st_.wFresh.assign(h.num_layers, false);
  }
  rowBase_ = sync ? sync->rank() * h.batch : 0;
  while (layers[firstProduct_].op != NNA_OP_DENSE) ++firstProduct_;  // the output layer is dense
  if (ops_) {
    // Each norm's row stats between its backward kernels (its gain and bias gradients may go
    // beside the chain: a slot a norm), and an embedding's sorted keys and runs (a column a model)
    // apart from them: the keys may be sorted beside the forward (embedKeys), and live through
    // the norms' backward above the embedding.
    normSlot_.assign(h.num_layers, 0);
    uint32_t norms = 0;
    for (uint32_t l = 0; l < h.num_layers; ++l)
      if (ops::isNorm(layers[l].op)) normSlot_[l] = norms++;
    const uint64_t rowBytes = (norms * h.batch * K_ * sizeof(ops::NormRow) + 255) / 256 * 256;
    const uint64_t columns = K_ * embedColumns_, keys = columns * embedSortLength(h.batch) * sizeof(unsigned long long);
    uint8_t* scratch = static_cast<uint8_t*>(shelf.take(ScratchShelf::kOps, rowBytes + 2 * keys + columns * sizeof(unsigned)));
    opRows_ = reinterpret_cast<ops::NormRow*>(scratch);
    embedRuns_.keys = reinterpret_cast<unsigned long long*>(scratch + rowBytes);
    embedRuns_.runs = reinterpret_cast<unsigned long long*>(scratch + rowBytes + keys);
    embedRuns_.count = reinterpret_cast<unsigned*>(scratch + rowBytes + 2 * keys);
  }
  if (m_.lt) ltBuf_.allocate(h, layers, shelf, kLtMaxWorkspace, true);
  st_.dbDone.assign(h.num_layers, false);
  side_ = lane.side();
  if (blas_ && (prec_ == Precision::Tf32 || prec_ == Precision::Tf32x3) && K_ == 1 && p.op != Op::Update)
    work_.allocate(h, layers, prec_ == Precision::Tf32x3, m_.besides && h.batch * layers[1].units >= kTransposeMin, shelf);
  if (m_.lt || m_.ltForward) st_.maskFresh.assign(h.num_layers, false);
  if (m_.ltForward) ltBuf_.allocate(h, layers, shelf, forwardWorkspace(), false);
  if (p.clips() || m_.scaling) clip_.allocate(K_, h.num_layers, isPrimitive(p.op) ? 1 : p.numBatches, shelf, s_);
  if (m_.scaling) lossScale_.allocate(p.lossScale, shelf, s_);
  // SGD folds w -= lr dw into the batched product only where one alpha serves every model.
  sameLr_ = true;
  for (double x : p.lrs) sameLr_ = sameLr_ && x == p.lrs.front();
  allocateScaledCopies(shelf);
  allocateBiasSums(shelf);
  if (m_.graphs && cache_) graph_ = p.op != Op::Forward ? &cache_->graph : p.queued ? &cache_->fed : &cache_->forward;
  graph_->beginRun();
  // A group's graph holds its collectives: the group may have to destroy it before an abort.
  if (m_.graphs && sync && cache_)
    sync->graphOwner([weak = std::weak_ptr<RunCache>(cache_)] {
      if (const std::shared_ptr<RunCache> c = weak.lock()) c->graph.release();
    });
  // A scheduled lr: cuBLAS's folded products read alpha from the device, graphed or not (with
  // its scalars in device memory cuBLAS may pick another kernel, as it did for bf16), so that
  // a run's bits do not depend on NN_ARENA_CUDA_GRAPH or on how steps are split into runs.
  if (blas_ && folds() && p.opt.schedule.kind != kConstant) foldScalars_.allocate(shelf);
}

template <typename T> auto LayerRun<T>::allocateBiasSums(ScratchShelf& shelf) -> void {
  biasSums_.assign(h_.num_layers, BiasSums<T>{});
  // a count per split column block of each model; 32 stripes x 32 columns of sums each
  auto counts = [&](uint32_t l) -> uint64_t { return biasGroups(l) > 1 ? uint64_t(biasColumnBlocks(l)) * K_ : 0; };
  constexpr uint64_t kSums = uint64_t(kBiasStripesWide) * kBiasCols;
  uint64_t all = 0;
  for (uint32_t l = 1; l <= last_; ++l) all += counts(l);
  if (!all) return;
  // the counts first, at offsets that depend on the layers and K alone: a run in another dtype
  // taking the shelf's bytes back finds them zero
  const uint64_t countBytes = (all * sizeof(unsigned) + 255) / 256 * 256;
  bool fresh = false;
  uint8_t* at = static_cast<uint8_t*>(shelf.take(ScratchShelf::kBiasSums, countBytes + all * kSums * sizeof(T), &fresh));
  if (fresh) CUDA_CHECK(cudaMemsetAsync(at, 0, countBytes, s_));
  unsigned* count = reinterpret_cast<unsigned*>(at);
  T* partial = reinterpret_cast<T*>(at + countBytes);
  for (uint32_t l = 1; l <= last_; ++l)
    if (counts(l)) {
      biasSums_[l] = BiasSums<T>{partial, count};
      count += counts(l);
      partial += counts(l) * kSums;
    }
}

template <typename T> auto LayerRun<T>::run() -> bool {
  if (hooks_) hooks_->beginRun(s_, p_.numBatches);
  // A one-step graphed run (step() in a loop, a forward run on the caller's batch): its copies,
  // the stats' reset and fold and the parameters' scan are nodes of the step's graph, so that a
  // call is one graph launch and one wait. Not with pageable host memory (a capture cannot hold
  // its copies), nor in a group (its run ends with the stats' reduction, outside the graph).
  const bool whole = m_.graphs && !sync_ && p_.numBatches == 1 && (!p_.copies || p_.copies->pinned);
  const auto begin = [&] {
    queueRunCopies(base_, p_, /*in=*/true, s_, [&](const RunCopies::Span& c) { return graph_->external(true, c.offset, c.bytes, p_.copies->host); });
    if (p_.resetStats) graph_->launch(s_, resetStatsKernel<T>, dim3(1, 1, K_), 1, base_, last_);
  };
  const auto end = [&] {
    if (st_.foldPending) graph_->launch(s_, foldStatsKernel<T>, dim3(1, 1, K_), 1, base_, last_, frac_);
    st_.foldPending = false;
    if (sync_) sync_->endRun(s_);  // never in a whole run
    if (!hooks_)
      if (const NonFiniteScan n = nonFiniteScan(h_, L_, p_); n.needed) graph_->launch(s_, nonFiniteKernel<T>, n.grid, kThreads, base_, n.last, T(n.step));
    queueRunCopies(base_, p_, /*in=*/false, s_, [&](const RunCopies::Span& c) { return graph_->external(false, c.offset, c.bytes, p_.copies->host); });
  };
  if (!whole) begin();
  if (sync_) sync_->beginRun(s_, p_.resetStats);
  if (isPrimitive(p_.op)) {
    primitive();  // never in a group (check.cc: reduce applies to train and grad runs)
  } else {
    const bool grad = p_.op == Op::Train || p_.op == Op::Grad;
    const bool deferred = p_.op == Op::Train && clip_.active();
    auto step = [&](uint64_t s) {
      if (sync_) {
        const StepGraph::Mode m = graph_->mode();
        sync_->launching(m == StepGraph::Mode::Replay ? GradSync::Launch::Replay : m == StepGraph::Mode::Capture ? GradSync::Launch::Capture : GradSync::Launch::Direct);
      }
      if (whole) begin();
      firstStep_ = s == 0;
      opStep_ = p_.stepBase + s + 1;
      const StepRows sr = stepRows(h_.batch, p_, s);
      // A data-parallel replica may have no rows of the group's last step: it contributes zero
      // gradients to the reduction and still takes the step.
      const uint64_t rows = sr.rows;
      if (rows) {
        if (p_.resident) {
          // bf16 / fp16: the weights' copies (a folded step moved w) made beside the gather
          if (half_.active() && p_.op == Op::Train) {
            fork();
            onSide([&] { staleWeightsToHalf(); });
          }
          gather(sr);
          join();
        }
        if (grad && keysBeside()) {
          fork();
          onSide([&] { embedKeys(rows); });
        }
        for (uint32_t l = 1; l <= last_; ++l) {
          before(Stage::Forward, l);
          forward(l, rows);
          after(Stage::Forward, l);
        }
        before(Stage::Output, last_);
        output(rows, sr.scale, s, grad);
        after(Stage::Output, last_);
      }
      if (grad) {
        join();  // the embedding's keys, sorted beside the forward
        st_.stepNow = p_.stepBase + s + 1;
        const Hyper<T> hp = hyper(st_.stepNow);
        if (foldScalars_.get()) graph_->launch(s_, foldScalarsKernel<T>, 1, 1, foldScalars_.get(), foldAlpha(hp));
        // Layer l's update right after its backward pass: d[l-1] has been computed with the old
        // w[l] by then, and nothing later reads w[l], so the order gives the same values as
        // updating every layer at the end, with one pass less over each layer's memory.
        std::vector<uint32_t> steps;
        st_.handedOff = 0;
        for (uint32_t l = last_; l >= 1; --l) {
          before(Stage::Backward, l);
          bool folded = false;
          if (rows)
            folded = backward(l, rows, hp);
          else
            zeroGradients(l);
          if (sync_)
            handOff(l);
          else if (p_.op == Op::Train && !folded && !deferred && m_.stepsTogether)
            steps.push_back(l);
          else if (p_.op == Op::Train && !folded && !deferred)
            gradientWork(l, [&] { update(l, hp, s_); });  // after its dw, on the same stream
          after(Stage::Backward, l);
        }
        join();  // the steps in one launch read the dw the side stream made
        if (!steps.empty()) updateLayers(steps.data(), steps.size(), hp, s_);
        flushBiasSteps(hp);
        if (sync_) sync_->endStep(s_);
        if (deferred) clipAndUpdate(hp, s);
      }
      if (hooks_) hooks_->endStep(s, s_);
      if (whole) end();
    };
    // Where the updates write the weights' 16-bit copies (layers that do not fold), the first
    // step would be the only one to make them: made before it, so that it launches what the
    // later steps do (a folded layer's copy is made beside each step's gather, the first's too).
    if (half_.active() && p_.op == Op::Train && !folds()) staleWeightsToHalf(/*unfoldedOnly=*/true);
    // Graphs (step_graph.cuh): the second step is captured, later ones replayed (a one-step
    // run captures its only step, for the next one-step run to replay). A graph an
    // earlier run left serves from the first step: launched directly, a step keeps the GPU
    // waiting for the host's launches. Where that step differs from the
    // graph in more than kernel arguments, it is launched directly and the graph stays for the
    // next step.
    const auto launched = [&] {
      if (sync_) sync_->stepLaunched(s_);
    };
    for (uint64_t s = 0; s < p_.numBatches; ++s) {
      if (!m_.graphs || graph_->disabled() || (s == 0 && !graph_->ready() && p_.numBatches > 1) || (sync_ && !sync_->capturable())) {
        step(s);
        launched();
        continue;
      }
      const HostState began = st_;
      if (!(graph_->ready() ? graph_->replay(
                                  s_, [&] { step(s); }, /*tentative=*/s == 0)
                            : graph_->capture(s_, [&] { step(s); }))) {
        st_ = began;  // the host state the step began with, then the step launched directly
        step(s);
      }
      launched();
    }
    if (p_.graphSteps) *p_.graphSteps = graph_->replayed();
  }
  if (!whole) end();  // before the one sync that ends the run
  if (p_.epilogues) *p_.epilogues = st_.epilogues;
  if (p_.queued) return blas_;  // a feed's batch (RunFeed): the feed waits, once
  CUDA_CHECK(cudaStreamSynchronize(s_));
  if (p_.clips()) clip_.readNorms(p_.gradNorms);
  lossScale_.read(p_.lossScaleOut);
  return blas_;
}

template <typename T> auto LayerRun<T>::primitive() -> void {
  const Hyper<T> hp = hyper(p_.stepBase + 1);
  opStep_ = p_.stepBase + 1;
  if (p_.op == Op::Update) {
    if (clip_.active()) return clipAndUpdate(hp, 0);
    return updateAll(hp);
  }
  if (p_.op == Op::Backward) {
    // The Forward run left softmax's probabilities in z[L], not the logits, and a loss read from
    // probabilities that underflowed would be clamped: the output layer's product again (z[L-1]
    // and w[L] are as the Forward run left them; their 16-bit copies made first, as this run
    // has not made them), so the loss and d are a Train run's (the CPU backend does the same).
    if (half_.active() && !m_.head) {
      const uint32_t in = last_ - 1;
      if (!st_.zFresh[in] || (in == 0 && !p_.resident)) toHalf(in, NNA_Z, p_.rows * L_[last_].fan_in);
      if (!st_.wFresh[last_]) toHalf(last_, NNA_W, L_[last_].units * L_[last_].fan_in);
    }
    forward(last_, p_.rows);
    output(p_.rows, stepRows(h_.batch, p_, 0).scale, 0, true);
  } else {
    graph_->launch(s_, outputGradKernel<T>, dim3(blocksFor(p_.rows), 1, K_), kThreads, base_, last_, p_.rows);
  }
  for (uint32_t l = last_; l >= 1; --l) backward(l, p_.rows, hp);  // not Train: never folds
}

template <typename T> auto LayerRun<T>::output(uint64_t rows, uint64_t scaleRows, uint64_t s, bool grad) -> void {
  const OutputLoss ol = outputLoss(L_[last_].activation, h_.act_param, p_);
  // A row of x that names no row of some table: NaN outputs (op_kernels.cuh, as the CPU's), in
  // the output launch where it is outputWarpKernel's (rows of up to 32 units)
  const bool poisonInOutput = embedColumns_ && !m_.headFused && L_[last_].units <= 32;
  if (embedColumns_ && !poisonInOutput) graph_->launch(s_, embedPoisonKernel<T>, dim3(blocksFor(rows), 1, K_), kThreads, base_, rows);
  const bool stats = p_.op != Op::Forward;
  // Up to 32 units a warp per row: one thread per row put M's 256 rows of 10 on one
  // multiprocessor, a serial chain of loads and exps per thread.
  st_.dLastHalf = st_.errorDone = false;
  if (m_.headFused) {
    const HalfOut dHalf = headRead() == HeadRead::Copies && grad && !m_.scaling ? half_.d(last_) : HalfOut{};
    // d[L-1] too where it follows from this launch's d (a loss-scaled step's waits for the scale)
    const bool error = grad && last_ > 1 && !m_.scaling;
    head(rows, scaleRows, ol, grad, stats, s, dHalf, true, error);
    st_.dLastHalf = bool(dHalf);
    st_.errorDone = error;
  } else if (L_[last_].units > 32 && L_[last_].units <= kOutBlockMaxUnits)
    graph_->launch(s_, outputBlockKernel<T>, dim3(rowBlocks(rows), 1, K_), 256, base_, last_, rows, scaleRows, ol, grad, stats, s, frac_);
  else {
    // Up to 32 units: d's 16-bit copy (the error product's operand) and scalesD's copy made here
    OutputCopies<T> c;
    if (grad && L_[last_].units <= 32) {
      if (headRead() == HeadRead::Copies && !m_.scaling) c.dHalf = half_.d(last_);
      if (scalesD(last_)) {
        c.hp = hyper(p_.stepBase + s + 1);
        c.lrs = lrs_.get();
        if (half_.active())
          c.scaledHalf = gradientD(last_);
        else
          c.scaled = scaledCopy(last_);
        c.stride = uint64_t(stride(last_, NNA_D));
      }
    }
    const uint64_t n = L_[last_].units;  // a row a warp, or a half / quarter of one for rows of up to 16 / 8 units
    auto rowLaunch = [&](auto kernel, unsigned lanes) {
      graph_->launch(s_, kernel, dim3(blocksFor(rows * lanes), 1, K_), kThreads, base_, last_, rows, scaleRows, ol, grad, stats, s, frac_, c, m_.biasInOutput, poisonInOutput);
    };
    if (n <= 8)
      rowLaunch(outputWarpKernel<T, 8>, 8);
    else if (n <= 16)
      rowLaunch(outputWarpKernel<T, 16>, 16);
    else
      rowLaunch(outputWarpKernel<T, 32>, 32);
    st_.dLastHalf = bool(c.dHalf);
  }
  if (stats && m_.crossBias && p_.resident)  // with ops too: the gather and the fold know no layers
    st_.foldPending = true;                  // the next gather (or the run's end) folds it
  else if (stats)
    graph_->launch(s_, foldStatsKernel<T>, dim3(1, 1, K_), 1, base_, last_, frac_);
  if constexpr (std::is_same_v<T, float>) {
    if (m_.scaling && grad) {  // d[L] times the loss scale, and its fp16 copy (backwardHalf reads it)
      const uint64_t n = rows * L_[last_].units;
      graph_->launch(s_, scaleToHalfKernel, blocksFor(n), kThreads, at(last_, NNA_D), half_.d(last_), n, lossScale_.get());
    }
  }
}

template <typename T> auto LayerRun<T>::updateLayers(const uint32_t* layers, size_t count, const Hyper<T>& hp, cudaStream_t stream, const double* scale) -> void {
  size_t i = 0;
  while (i < count) {
    UpdateLayers u;
    std::memset(&u, 0, sizeof u);
    uint64_t most = 0;
    for (; i < count && u.count < kUpdateLayers; ++i) {
      const uint32_t l = layers[i];
      if (!paramCount(L_[l])) continue;                              // a layer without parameters (dropout, a residual) has no step
      const bool copy = half_.active() && L_[l].op == NNA_OP_DENSE;  // an op's gain has no 16-bit copy
      u.l[u.count] = l;
      if (copy) u.half[u.count] = half_.w(l);
      ++u.count;
      most = std::max(most, paramCount(L_[l]));
      if (!st_.wFresh.empty()) st_.wFresh[l] = copy;  // bf16 / fp16: the update wrote w's copy too
    }
    if (!u.count) break;
    // Parameters a thread: each thread binds its model's layer from the header first (dozens of
    // loads), so with one a thread every parameter paid for a binding (K models: 16, four rounds
    // of updateKernel's loads); one model: 4, one round, where 16 left a small network's few
    // blocks walking their rounds one after another.
    const uint64_t per = K_ > 1 ? 16 : 4;
    graph_->launch(stream, updateKernel<T>, dim3(blocksFor((most + per - 1) / per), u.count, K_), kThreads, base_, u, h_.optimizer, hp, lrs_.get(), scale);
  }
}

template <typename T> auto LayerRun<T>::clipAndUpdate(const Hyper<T>& hp, uint64_t s) -> void {
  for (uint32_t l = 1; l <= last_; ++l) {
    graph_->launch(s_, sumSquaresKernel<T>, dim3(normBlocks(paramCount(L_[l])), 1, K_), kThreads, base_, l, h_.num_layers, clip_.partials());
  }
  if (m_.scaling)  // one model (check.cc)
    graph_->launch(s_, lossScaleKernel, 1, kThreads, clip_.partials(), h_.num_layers, p_.clips() ? p_.opt.clipGradNorm : 0.0, clip_.scale(), clip_.norms(s), lossScale_.get());
  else
    graph_->launch(s_, clipScaleKernel, K_, kThreads, clip_.partials(), h_.num_layers, p_.opt.clipGradNorm, clip_.scale(), clip_.norms(s));
  updateAll(hp, clip_.scale());
}

template <typename T> auto LayerRun<T>::gather(const StepRows& sr) -> void {
  before(Stage::Gather, 0);
  graph_->launch(s_, gatherKernel<T>, rowBlocks(sr.rows), kThreads, base_, last_, sr.first, sr.rows, p_.permA, p_.permC, p_.samples, half_.active() ? half_.z(0) : HalfOut{},
                 st_.foldPending ? K_ : 0u, frac_);
  st_.foldPending = false;
  if (half_.active()) st_.zFresh[0] = true;  // the gather wrote z[0]'s copy
  after(Stage::Gather, 0);
}

template <typename T> auto LayerRun<T>::forward(uint32_t l, uint64_t rows) -> void {
  const uint64_t n = L_[l].units, m = L_[l].fan_in;
  if (L_[l].op != NNA_OP_DENSE) {
    const bool train = p_.op == Op::Train || p_.op == Op::Grad;  // dropout drops (check.cc refuses Backward runs with dropout)
    if (ops::isNorm(L_[l].op))
      withNormRow<NormForward, T>(n, [&](auto kernel) { graph_->launch(s_, kernel, dim3(opRowBlocks(rows), 1, K_), kThreads, base_, l, rows); });
    else if (L_[l].op == NNA_OP_EMBEDDING)
      graph_->launch(s_, embedForwardKernel<T>, dim3(elementBlocks(rows * n), 1, K_), kThreads, base_, rows);
    else
      graph_->launch(s_, opElementKernel<T>, dim3(elementBlocks(rows * n), 1, K_), kThreads, base_, l, rows, false, train, p_.dropoutSeed, opStep_, rowBase_);
    if (half_.active() && l < last_ && L_[l + 1].op == NNA_OP_DENSE) {  // bf16 / fp16: the copy of z[l] the next layer's products read
      toHalf(l, NNA_Z, rows * n);
      st_.zFresh[l] = true;
    }
    return;
  }
  const bool biasLater = l == last_ && m_.biasInOutput;  // output()'s launch adds b and applies f
  if (l == last_ && m_.head) {
    if (!m_.headFused) head(rows, rows, OutputLoss{}, false, false, 0, HalfOut{}, false);
    return;  // else output() computes it
  }
  if (!blas_) return tiled<kForward>(l, rows, rows, n);
  if ((m_.lt || m_.ltForward) && !half_.active() && ltForward(l, rows)) return;
  if (half_.active()) {                                                          // z[l]^T = w . z[l-1]^T from 16-bit copies; the pass after it writes z[l]'s
    if (l == 1 && (!st_.zFresh[0] || !p_.resident)) toHalf(0, NNA_Z, rows * m);  // not gathered: the caller's z[0]
    if (l == firstProduct_) staleWeightsToHalf();                                // before the forward's first product (ops before it have none)
    const bool copy = l < last_ && !(m_.headRounds && l + 1 == last_);           // m_.headRounds: the output launch rounds z[L-1] itself
    if (!copy && m_.ltForward && ltForward(l, rows)) return;
    gemmHalf(true, false, int(n), int(rows), int(m), 1.0f, half_.w(l), int(m), half_.z(l - 1), int(m), 0.0f, at(l, NNA_Z), int(n), stride(l, NNA_Z));
    if (biasLater) return;
    graph_->launch(s_, biasActivateKernel<T>, dim3(bandBlocks(rows, n, K_, sms_), 1, K_), kThreads, base_, l, rows, copy ? half_.z(l) : HalfOut{});
    if (copy) st_.zFresh[l] = true;
    return;
  }
  if (K_ > 1) {  // z[l]^T (n x rows) = w (n x m) . z[l-1]^T (m x rows), for every model at once (fp32: check.cc)
    gemmBatched(true, false, int(n), int(rows), int(m), T(1), at(l, NNA_W), int(m), stride(l, NNA_W), at(l - 1, NNA_Z), int(m), stride(l - 1, NNA_Z), T(0), at(l, NNA_Z), int(n),
                stride(l, NNA_Z));
  } else {  // z[l]^T (n x rows) = w (n x m) . z[l-1]^T (m x rows)
    const Split a = split(0, at(l, NNA_W), n * m), b = split(1, at(l - 1, NNA_Z), rows * m);
    product(true, false, int(n), int(rows), int(m), T(1), a, int(m), b, int(m), T(0), at(l, NNA_Z), int(n));
  }
  if (biasLater) return;
  graph_->launch(s_, biasActivateKernel<T>, dim3(bandBlocks(rows, n, K_, sms_), 1, K_), kThreads, base_, l, rows, HalfOut{});
}

template <typename T>
auto LayerRun<T>::head(uint64_t rows, uint64_t scaleRows, const OutputLoss& ol, bool grad, bool stats, uint64_t s, HalfOut dHalf, bool finish, bool error) -> void {
  HalfOut x, w;
  if (headRead() == HeadRead::Copies) {
    const uint32_t in = last_ - 1;
    if (!st_.zFresh[in] || (in == 0 && !p_.resident)) toHalf(in, NNA_Z, rows * L_[last_].fan_in);
    if (!st_.wFresh[last_]) toHalf(last_, NNA_W, L_[last_].units * L_[last_].fan_in);
    x = half_.z(in);
    w = half_.w(last_);
  }
  const HalfOut dPrev = error && half_.active() ? half_.d(last_ - 1) : HalfOut{};
  launchOutputHead<T>(L_[last_].units, rows, K_, headRead(), half_.fp16(), [&](auto kernel, dim3 grid, unsigned threads) {
    graph_->launch(s_, kernel, grid, threads, base_, last_, rows, scaleRows, ol, grad, stats, s, frac_, x, w, dHalf, finish, error, dPrev);
  });
}

template <typename T> auto LayerRun<T>::allocateScaledCopies(ScratchShelf& shelf) -> void {
  // Layer 1 as one product over the models where they share z[0] (its 16-bit copy too) and
  // their w[1] lie back to back: w[1] of every model is then one matrix, and the scaled copy
  // of d[1] is written with the models' rows interleaved: one wide product instead of K narrow
  // ones in a batched call.
  const uint64_t n1 = L_[1].units, m1 = L_[1].fan_in;
  wideFirst_ = scalesD(1) && last_ > 1 && stride(0, NNA_Z) == 0 && uint64_t(stride(1, NNA_W)) == n1 * m1 && n1 * K_ < (1ull << 31) && (!half_.active() || half_.z(0).stride == 0);
  const size_t first = scalesD(1) && last_ > 1 && !half_.active() ? (size_t(K_) * size_t(stride(1, NNA_D)) * sizeof(T) + 255) / 256 * 256 : 0;
  const size_t last = !scalesD(last_) ? 0 : half_.active() ? size_t(K_) * size_t(half_.d(last_).stride) * 2 : size_t(K_) * size_t(stride(last_, NNA_D)) * sizeof(T);
  if (!first && !last) return;
  char* p = static_cast<char*>(shelf.take(ScratchShelf::kScaledD, first + last));
  if (first) scaledFirst_ = reinterpret_cast<T*>(p);
  if (last) scaledLast_ = p + first;
}

}  // namespace
}  // namespace nna
