#include "phases.h"

#include <cstring>

#include "../core/failure.h"
#include "../descriptors/optimizers.h"
#include "../core/validate.h"
#include "../ops/residual.h"

namespace nna {

const char* stageName(Stage s) {
  switch (s) {
    case Stage::Gather: return "gather";
    case Stage::Forward: return "forward";
    case Stage::Output: return "output";
    default: return "backward";
  }
}

std::string regionLabel(const RegionInfo& r, bool size) {
  std::string s = std::string(kindName(r.kind)) + "[" + std::to_string(r.layer) + "]";
  return size ? s + " (" + std::to_string(r.bytes >> 20) + " MiB)" : s;
}

StepModel::StepModel(const uint8_t* header) {
  std::memcpy(&h_, header, sizeof h_);
  // The residency plan walks one network's regions; a K-model arena is not planned for.
  if (nna_models(&h_) > 1)
    NNA_FAIL("NOT_SUPPORTED",
             "device budgets (managed or staged memory with deviceBudget) take one model per arena; this plan holds " + std::to_string(nna_models(&h_)) + " (models)");
  layers_.resize(h_.num_layers);
  std::memcpy(layers_.data(), header + h_.layers_offset, layers_.size() * sizeof(nna_layer));
  for (uint32_t l = 0; l < h_.num_layers; ++l) ops_ |= layers_[l].op != NNA_OP_DENSE;
  if (nna_op_param_of(header, 0))  // the op parameter table: each layer's from
    for (uint32_t l = 0; l < h_.num_layers; ++l) from_.push_back(nna_op_param_of(header, l)->from);
  index_.assign(size_t(h_.num_layers) * NNA_KIND_COUNT, -1);
  const uint64_t elem = h_.dtype == NNA_FLOAT64 ? 8 : 4;
  for (uint32_t l = 0; l < h_.num_layers; ++l)
    for (uint32_t k = 0; k < NNA_KIND_COUNT; ++k) {
      const nna_region& r = layers_[l].region[k];
      if (!r.count) continue;
      index_[size_t(l) * NNA_KIND_COUNT + k] = int32_t(regions_.size());
      regions_.push_back({l, k, r.offset, r.count * elem, k == NNA_XDATA || k == NNA_YDATA});
    }
}

void requireScheduled(Op op) {
  if (isPrimitive(op)) NNA_FAIL("NOT_SUPPORTED", "forward / backward / update as separate runs are not supported on an arena with a device budget; use step() or fit()");
}

std::vector<PhaseInfo> StepModel::step(Op op, bool resident, Path path) const {
  requireScheduled(op);
  const uint32_t last = h_.num_layers - 1;
  const bool grad = op == Op::Train || op == Op::Grad;
  const bool folded = op == Op::Train && optimizerFolds(h_.optimizer);
  // A network with ops never takes the fused kernel: its runs are the per-layer order's.
  const bool fused = path == Path::Fused && !ops_;
  const bool fuseOutput = fused && last >= 2 && layers_[last].units <= kFusedOutputMaxUnits;
  std::vector<PhaseInfo> out;
  auto phase = [&](Stage s, uint32_t l) -> PhaseInfo& {
    out.push_back({s, l, {}});
    return out.back();
  };
  // A region used twice in a phase: read then written is an update; written then read stays a
  // write (the old bytes are still dead).
  auto use = [&](PhaseInfo& ph, uint32_t l, uint32_t kind, uint8_t access) {
    const int32_t r = regionOf(l, kind);
    if (r < 0) return;
    for (Use& u : ph.uses)
      if (u.region == uint32_t(r)) {
        if (u.access != kWrite) u.access |= access;
        return;
      }
    ph.uses.push_back({uint32_t(r), access});
  };
  // The target rows: copied from ydata in a resident run, else y as it stands.
  auto targets = [&](PhaseInfo& ph) {
    if (resident) {
      use(ph, last, NNA_YDATA, kRead);
      use(ph, last, NNA_Y, kWrite);
    } else
      use(ph, last, NNA_Y, kRead);
  };
  // dw, db of layer l; then its update when training. An op's parameters (a norm's gain, an
  // embedding's tables) always go through dw (validate.cc expectedCount keeps it).
  auto gradients = [&](PhaseInfo& ph, uint32_t l) {
    use(ph, l, NNA_D, kRead);
    use(ph, l - 1, NNA_Z, kRead);
    if (!folded || layers_[l].op != NNA_OP_DENSE) use(ph, l, NNA_DW, kWrite);
    use(ph, l, NNA_DB, kWrite);
  };
  // d[k] takes the errors of the residual layers that add z[k] (ops/residual.h), in the phase
  // that finishes d[k]: the backward of layer k + 1.
  auto residualErrors = [&](PhaseInfo& ph, uint32_t k) {
    for (uint32_t r : ops::residualAdders(
             h_.num_layers, k, [&](uint32_t i) { return layers_[i].op; }, [&](uint32_t i) { return opFrom(i); }))
      use(ph, r, NNA_D, kRead);
  };
  auto update = [&](PhaseInfo& ph, uint32_t l) {
    if (op == Op::Train)
      for (uint32_t k : {NNA_W, NNA_B, NNA_MW, NNA_MB, NNA_VW, NNA_VB}) use(ph, l, k, kUpdate);
  };
  // d[l-1] = (d[l] w[l]) * act'(z[l-1]), from the old w[l].
  auto errorPrev = [&](PhaseInfo& ph, uint32_t l) {
    use(ph, l, NNA_D, kRead);
    use(ph, l, NNA_W, kRead);
    use(ph, l - 1, NNA_Z, kRead);
    use(ph, l - 1, NNA_D, kWrite);
  };
  if (resident && !fused) {  // gatherKernel: rows of xdata / ydata into z[0] and y
    PhaseInfo& g = phase(Stage::Gather, 0);
    use(g, 0, NNA_XDATA, kRead);
    use(g, last, NNA_YDATA, kRead);
    use(g, 0, NNA_Z, kWrite);
    use(g, last, NNA_Y, kWrite);
  }
  for (uint32_t l = 1; l <= last; ++l) {  // z[l] = act(z[l-1] w^T + b)
    PhaseInfo& f = phase(Stage::Forward, l);
    if (l == 1 && resident && fused) {  // the fused layer 1 reads its rows from xdata, keeps them in z[0]
      use(f, 0, NNA_XDATA, kRead);
      use(f, 0, NNA_Z, kWrite);
    } else {
      use(f, l - 1, NNA_Z, kRead);
    }
    if (layers_[l].op == NNA_OP_RESIDUAL) use(f, opFrom(l), NNA_Z, kRead);
    // A row that names no row of an embedding's table: NaN outputs, from x, after the last product.
    if (l == last && layers_[1].op == NNA_OP_EMBEDDING) use(f, 0, NNA_Z, kRead);
    use(f, l, NNA_W, kRead);
    use(f, l, NNA_B, kRead);
    if (l == last && fuseOutput) {  // with the output: softmax, loss, d[L] and d[L-1] in registers
      targets(f);
      use(f, l, NNA_Z, kWrite);
      if (grad) {
        use(f, l, NNA_D, kWrite);
        use(f, l - 1, NNA_D, kWrite);
      }
      use(f, last, NNA_STATS, kUpdate);
    } else {
      use(f, l, NNA_Z, kWrite);
    }
  }
  if (!fuseOutput) {  // the output kernel: softmax in place, loss into stats, d of the last layer
    PhaseInfo& o = phase(Stage::Output, last);
    if (fused && resident) targets(o);
    use(o, last, NNA_Z, kUpdate);
    use(o, last, NNA_Y, kRead);
    if (grad) use(o, last, NNA_D, kWrite);
    use(o, last, NNA_STATS, kUpdate);
  }
  if (!grad) return out;
  if (!fused) {
    for (uint32_t l = last; l >= 1; --l) {  // dw, db, d[l-1]; then the update of layer l
      PhaseInfo& b = phase(Stage::Backward, l);
      gradients(b, l);
      if (l > 1) {
        use(b, l, NNA_W, kRead);
        use(b, l - 1, NNA_D, kWrite);
        residualErrors(b, l - 1);
      }
      update(b, l);
    }
    return out;
  }
  for (uint32_t l = fuseOutput ? last - 1 : last; l >= 1; --l) {  // d[l-1]; dw, db of l + 1 (and 1)
    PhaseInfo& b = phase(Stage::Backward, l);
    if (l > 1) errorPrev(b, l);
    for (uint32_t k : {l + 1, l == 1 ? 1u : 0u})
      if (k >= 1 && k <= last) {
        gradients(b, k);
        update(b, k);
      }
  }
  return out;
}

uint64_t StepModel::rounded(uint64_t offset, uint64_t bytes, uint64_t granule) {
  const uint64_t start = offset / granule * granule;
  const uint64_t end = (offset + bytes + granule - 1) / granule * granule;
  return end - start;
}

uint64_t StepModel::phaseBytes(const PhaseInfo& ph, uint64_t granule) const {
  uint64_t sum = 0;
  for (const Use& u : ph.uses) {
    const RegionInfo& r = regions_[u.region];
    if (!r.remote && r.kind != NNA_STATS) sum += rounded(r.offset, r.bytes, granule);
  }
  return sum;
}

uint64_t StepModel::runBytes(uint64_t granule) const {
  uint64_t sum = rounded(0, h_.header_bytes, granule);
  for (const RegionInfo& r : regions_)
    if (r.kind == NNA_STATS) sum += rounded(r.offset, r.bytes, granule);
  return sum;
}

uint64_t StepModel::largestPhase(uint64_t granule, PhaseInfo* which) const {
  uint64_t best = 0;
  for (const PhaseInfo& ph : step(Op::Train, h_.samples > 0)) {
    const uint64_t b = phaseBytes(ph, granule);
    if (b > best) {
      best = b;
      if (which) *which = ph;
    }
  }
  return best;
}

}  // namespace nna
