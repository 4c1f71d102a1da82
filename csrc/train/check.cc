// check.cc: validation of a run's parameters against the arena header, shared by both backends.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>

#include "../core/failure.h"
#include "../include/nn_arena.h"
#include "phases.h"
#include "train.h"

namespace nna {

const char* precisionName(Precision p) {
  const PrecisionInfo* r = precisionInfo(p);
  return r ? r->name : "unknown";
}

namespace {

// A value against its table entry (the range TypeScript checks first, in the arena's dtype).
template <class S> void checkParam(const ParamSpec<S>& spec, double x, const std::string& field) {
  const bool ok = std::isfinite(x) && (spec.loOpen ? x > spec.lo : x >= spec.lo) && (spec.hiOpen ? x < spec.hi : x <= spec.hi) && (spec.type == kReal || std::floor(x) == x);
  if (!ok) NNA_FAIL_FIELD("BAD_OPTION", field.c_str(), field + " " + std::to_string(x) + " is outside its range (" + spec.doc + ")");
}

// The optimizer settings of a run: each within its table's range, the schedule consistent, and
// the combinations no path runs refused, naming them (docs/optimizers.md has the table).
void checkOptimizer(const nna_header& h, const RunParams& p) {
  const OptimizerInfo* info = optimizerInfo(h.optimizer);
  if (!info) NNA_FAIL("BAD_HEADER", "unknown optimizer " + std::to_string(h.optimizer));
  for (uint32_t code = 0; const OptimizerInfo* o = optimizerInfo(code); ++code)
    for (uint32_t i = 0; i < o->numHypers; ++i)
      if (o->hypers[i].field) checkParam(o->hypers[i], p.opt.*(o->hypers[i].field), o->hypers[i].name);
  uint32_t n = 0;
  const HyperSpec* common = commonParams(&n);
  for (uint32_t i = 0; i < n; ++i) checkParam(common[i], p.opt.*(common[i].field), common[i].name);
  if (p.opt.nesterov != 0 && h.optimizer != NNA_MOMENTUM)
    NNA_FAIL_FIELD("BAD_OPTION", "nesterov", std::string("nesterov applies to the momentum optimizer; this arena's is ") + info->name);
  const Schedule& s = p.opt.schedule;
  const ScheduleInfo* kinds = scheduleTable(&n);
  if (s.kind >= n) NNA_FAIL_FIELD("BAD_OPTION", "schedule.type", "unknown schedule kind " + std::to_string(s.kind));
  for (uint32_t i = 0; i < kinds[s.kind].numParams; ++i) {
    const ScheduleParam& sp = kinds[s.kind].params[i];
    checkParam(sp, s.*(sp.field), std::string("schedule.") + sp.name);
  }
  if (s.kind == kCosine && !(s.warmup < s.total))
    NNA_FAIL_FIELD("BAD_OPTION", "schedule.warmup",
                   "a cosine schedule's warmup (" + std::to_string(uint64_t(s.warmup)) + ") must be below its total (" + std::to_string(uint64_t(s.total)) + ")");
  if (s.kind == kOneCycle && !(s.pctStart * s.total > 1.0))
    NNA_FAIL_FIELD("BAD_OPTION", "schedule.pctStart", "a one-cycle schedule needs pctStart * total > 1 (a rising phase of at least one step)");
  const bool steps = p.op == Op::Train || p.op == Op::Update;
  if (s.kind == kOneCycle && steps && double(p.stepBase) + double(isPrimitive(p.op) ? 1 : p.numBatches) > s.total)
    NNA_FAIL_FIELD("BAD_OPTION", "schedule.total",
                   "the one-cycle schedule ends after " + std::to_string(uint64_t(s.total)) + " steps; this run would take step " +
                       std::to_string(p.stepBase + (isPrimitive(p.op) ? 1 : p.numBatches)) + " (as torch's OneCycleLR, nn-arena does not step past it)");
  // Clipping needs every gradient of the step before any update, while a compact plan lets a
  // layer's dw share bytes with what the layers below it write next (an SGD plan has no dw).
  if (p.opt.clipGradNorm > 0 && (h.flags & NNA_FLAG_COMPACT))
    NNA_FAIL_FIELD("NOT_SUPPORTED", "clipGradNorm",
                   "clipping holds every layer's gradients until the step's norm is known, which a compact arena "
                   "does not (its dw and db share bytes with later phases): plan it without compact");
}

}  // namespace

// The first layer whose op drops units in training runs (its parameter is a p, NNA_OP_PARAM_P),
// or num_layers where there is none; `op` gets its op.
static uint32_t firstDropping(const void* header, uint32_t* op) {
  const nna_header* h = nna_header_of(header);
  for (uint32_t l = 0; l < h->num_layers; ++l) {
    nna_layer L;
    std::memcpy(&L, static_cast<const char*>(header) + h->layers_offset + size_t(l) * sizeof L, sizeof L);
    if (L.op != NNA_OP_DENSE && nna_op_param_kind_of(L.op) == NNA_OP_PARAM_P) {
      *op = L.op;
      return l;
    }
  }
  return h->num_layers;
}

void checkLoss(const void* header, const RunParams& p) {
  nna_header h;
  std::memcpy(&h, header, sizeof h);
  nna_layer out;
  std::memcpy(&out, static_cast<const char*>(header) + h.layers_offset + size_t(h.num_layers - 1) * sizeof(nna_layer), sizeof out);
  if (uint32_t(p.loss) >= kLossCount) NNA_FAIL("BAD_ARGUMENT", "unknown loss " + std::to_string(uint32_t(p.loss)));
  // What the loss's row of NNA_LOSSES asks of the output layer and of labelSmoothing.
  const LossInfo loss = lossInfo(uint32_t(p.loss));
  const bool softmax = out.activation == NNA_ACT_SOFTMAX;
  if (loss.softmax && !softmax) NNA_FAIL_FIELD("BAD_LOSS", "loss", std::string(loss.name) + " needs a softmax output layer");
  if (!loss.softmax && softmax)
    NNA_FAIL_FIELD("BAD_LOSS", "loss", std::string("a softmax output layer trains with a loss that takes its logits (cross-entropy), not ") + loss.name);
  if (loss.logits && out.activation != NNA_ACT_IDENTITY)
    NNA_FAIL_FIELD("BAD_LOSS", "loss", std::string(loss.name) + " takes logits: the output layer's activation must be identity");
  if (!(p.labelSmoothing >= 0 && p.labelSmoothing <= 1)) NNA_FAIL_FIELD("BAD_OPTION", "labelSmoothing", "labelSmoothing must be in [0, 1]");
  if (p.labelSmoothing != 0 && !loss.smoothing) NNA_FAIL_FIELD("BAD_OPTION", "labelSmoothing", std::string("labelSmoothing applies to cross-entropy, not ") + loss.name);
}

void checkGroup(const void* header) {
  nna_header h;
  std::memcpy(&h, header, sizeof h);
  // The all-reduce ranges (grad_sync.h) cover one model's gradients; K-model arenas train alone.
  if (nna_models(&h) > 1)
    NNA_FAIL_FIELD("NOT_SUPPORTED", "models",
                   "data parallelism trains one model per replica; this plan holds " + std::to_string(nna_models(&h)) + " (models: plan it with models 1)");
  // A compact arena shares gradient bytes with other regions (an SGD plan has no dw at all),
  // while a group's all-reduce needs each layer's dw and db intact until its update.
  if (h.flags & NNA_FLAG_COMPACT)
    NNA_FAIL_FIELD("NOT_SUPPORTED", "compact", "data parallelism all-reduces every layer's dw and db, which a compact plan does not keep (compact: plan it without compact)");
}

// Dynamic loss scaling goes with the precisions that scale (fp16) and with runs that train in
// one go: the step in parts would hand out scaled gradients, and an Update could not skip. Like
// clipping, it holds the step's gradients until it knows them finite: not on a compact arena.
static void checkLossScale(const nna_header& h, const RunParams& p) {
  const LossScale& s = p.lossScale;
  const bool scaled = precisionInfo(p.precision)->scaled;
  if (!scaled) {
    if (s.active()) NNA_FAIL_FIELD("BAD_OPTION", "lossScale", std::string("loss scaling goes with precision 'fp16'; this run's is '") + precisionName(p.precision) + "'");
    return;
  }
  if (p.op == Op::Grad || p.op == Op::Backward || p.op == Op::BackwardFromOutput || p.op == Op::Update)
    NNA_FAIL_FIELD("NOT_SUPPORTED", "precision",
                   std::string("precision '") + precisionName(p.precision) +
                       "' scales the loss inside step() and fit() (dynamic loss scaling); the step in parts (gradients, forward / backward / update) runs in 'fp32' or 'bf16'");
  if (p.op != Op::Train) return;
  if (h.flags & NNA_FLAG_COMPACT)
    NNA_FAIL_FIELD("NOT_SUPPORTED", "precision",
                   std::string("precision '") + precisionName(p.precision) +
                       "' holds every layer's gradients until the step is known "
                       "not to overflow, which a compact arena does not (its dw and db share bytes with later phases): plan it without compact");
  // The Trainer checks each setting with its own message (src/train/options.ts); this guards a run made without one.
  if (!(s.scale > 0 && std::isfinite(s.scale) && s.growth >= 1 && std::isfinite(s.growth) && s.backoff > 0 && s.backoff <= 1 && s.interval >= 1)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "scale %.17g (> 0, finite), growth %.17g (>= 1), backoff %.17g (in (0, 1]), interval %llu (>= 1)", s.scale, s.growth, s.backoff,
                  static_cast<unsigned long long>(s.interval));
    NNA_FAIL_FIELD("BAD_OPTION", "lossScale", std::string("the loss scaling settings are out of range: ") + buf);
  }
}

void checkTarget(const void* header, const RunParams& p, RunTarget target) {
  // Ops other than dense (nn_arena.h NNA_OPS) have their CPU forward and backward (csrc/ops/);
  // the per-layer CUDA path runs them for one model or K (op_kernels.cuh, grid z: the models),
  // a device budget's schedulers too (the phase table, phases.cc, gives each op's reads and
  // writes); the fused kernel is written for chains of dense layers (fusedRuns leaves them).
  // A device budget's schedulers plan each layer's dw to go once its update ran; clipping holds
  // every dw until the step's norm is known.
  if (p.clips() && target.budgeted)
    NNA_FAIL_FIELD("BAD_OPTION", "clipGradNorm",
                   "clipping holds every layer's gradients until the step's norm is known, which the schedulers of a "
                   "deviceBudget do not plan for: use an arena without a deviceBudget");
  // A fed run (RunFeed) stages its batches in the CUDA backend's page-locked slots, between
  // launches queued on one stream of an arena of its own.
  if (p.feed && (!target.cuda || target.budgeted || p.reduce || p.copies || p.op != Op::Forward))
    NNA_FAIL("NOT_SUPPORTED", "a fed run is a forward run of one CUDA arena on plain device memory, with no copies of its own");
  const PrecisionInfo* info = precisionInfo(p.precision);
  if (!info || p.precision == Precision::Fp32) return;
  // TF32 is a tensor-core format the CPU does not have: the CPU backend says so rather than run
  // another mode under its name. bf16 and fp16 it emulates (precisions.h).
  if (!target.cuda && !info->cpu)
    NNA_FAIL_FIELD(
        "BAD_OPTION", "precision",
        std::string("precision '") + info->name + "' needs the CUDA backend (a GPU with " + info->cores + "); the CPU backend computes in fp32 (and emulates 'bf16' and 'fp16')");
  if (target.cuda && !info->cuda) NNA_FAIL_FIELD("NOT_SUPPORTED", "precision", std::string("precision '") + info->name + "' does not run on the CUDA backend in this version");
  // tf32x3, bf16 and fp16 through cuBLAS take a device workspace (LayerRun, layer_run.cuh) that a budget
  // does not allow for.
  if (info->workspace && target.budgeted)
    NNA_FAIL_FIELD("BAD_OPTION", "precision",
                   std::string("precision '") + info->name + "' needs a device workspace beside the arena, which a deviceBudget does not allow; use 'tf32' or 'fp32'");
}

void checkRun(const void* header, const RunParams& p) {
  nna_header h;
  std::memcpy(&h, header, sizeof h);
  if (uint32_t(p.op) > uint32_t(Op::Update)) NNA_FAIL("BAD_ARGUMENT", "unknown op " + std::to_string(uint32_t(p.op)));
  // Version 4's 16-bit z / d: the format holds them, no executor reads them yet (issue 49).
  if (h.flags & NNA_FLAG_REGION_DTYPES)
    NNA_FAIL_FIELD("NOT_SUPPORTED", "dtypes", "16-bit activation and error regions are not trained by this version of nn-arena (the header holds them)");
  if ((h.flags & NNA_FLAG_COMPACT) && p.op == Op::Grad)
    NNA_FAIL("NOT_SUPPORTED", "a compact arena keeps no gradients after a run (dw and db share bytes, or an SGD plan has no dw); plan it without compact to read gradients");
  // The primitives keep values between runs that a compact plan lets other regions overwrite:
  // dw / db until update() (they share bytes with later layers' errors; an SGD plan has none),
  // so backward and update there could only be inexact. Forward runs are exact and allowed.
  if ((h.flags & NNA_FLAG_COMPACT) && (p.op == Op::Backward || p.op == Op::BackwardFromOutput || p.op == Op::Update))
    NNA_FAIL_FIELD("NOT_SUPPORTED", "compact",
                   "backward and update keep gradients between runs, which a compact arena does not (dw and db share bytes, "
                   "and an SGD plan has no dw); use step() or fit(), or plan it without compact");
  if (!precisionInfo(p.precision)) NNA_FAIL("BAD_ARGUMENT", "unknown precision " + std::to_string(uint32_t(p.precision)));
  if (!precisionInfo(p.precision)->models && nna_models(&h) > 1)
    NNA_FAIL_FIELD(
        "NOT_SUPPORTED", "precision",
        std::string("precision '") + precisionName(p.precision) + "' trains one model; this arena holds " + std::to_string(nna_models(&h)) + " (models: use 'fp32' or 'bf16')");
  if (p.precision == Precision::Tf32x3 && (h.flags & NNA_FLAG_COMPACT) && optimizerFolds(h.optimizer) && p.op == Op::Train)
    NNA_FAIL_FIELD("BAD_OPTION", "precision",
                   "precision 'tf32x3' sums an SGD step's weight gradients before applying them, and a compact SGD arena "
                   "has no dw regions: use a full plan, or 'tf32' / 'fp32'");
  checkLossScale(h, p);
  if (p.precision != Precision::Fp32 && h.dtype != NNA_FLOAT32)
    NNA_FAIL_FIELD("BAD_OPTION", "precision", std::string("precision '") + precisionName(p.precision) + "' applies to float32 arenas; this one is float64");
  checkLoss(header, p);
  if (!std::isfinite(p.lr)) NNA_FAIL("BAD_ARGUMENT", "hyper-parameters must be finite");
  checkOptimizer(h, p);
  const uint64_t models = nna_models(&h);
  if (!p.lrs.empty() && p.lrs.size() != models)
    NNA_FAIL("BAD_ARGUMENT", "lrs has " + std::to_string(p.lrs.size()) + " entries; the arena holds " + std::to_string(models) + " models");
  for (double x : p.lrs)
    if (!std::isfinite(x)) NNA_FAIL("BAD_ARGUMENT", "hyper-parameters must be finite");
  if (p.numBatches == 0) NNA_FAIL("BAD_ARGUMENT", "numBatches must be at least 1");
  if (p.reduce && p.op != Op::Train && p.op != Op::Grad) NNA_FAIL("BAD_ARGUMENT", "reduce applies to train and grad runs");
  if (p.reduce) checkGroup(header);
  // A Forward run drops nothing, so the step in parts would differentiate another network than
  // the one whose outputs it saw.
  uint32_t op = 0;
  const uint32_t dropout = firstDropping(header, &op);
  if ((p.op == Op::Backward || p.op == Op::BackwardFromOutput) && dropout < h.num_layers)
    NNA_FAIL("NOT_SUPPORTED", "layer " + std::to_string(dropout) + " is a " + nna_op_name(op) + " layer, which forward() runs without: train it with step() or fit()");
  if (isPrimitive(p.op)) {  // the rows a previous Forward run left in z, one step
    if (p.resident) NNA_FAIL("BAD_ARGUMENT", "backward and update runs work on the rows a forward run left, not on the resident data set");
    if (p.numBatches != 1) NNA_FAIL("BAD_ARGUMENT", "backward and update runs are one step");
    // A data-parallel group's knobs: a group's trainer refuses the primitives (data_parallel.ts).
    if (p.lossRows || p.globalBatch || p.shardOffset) NNA_FAIL("BAD_ARGUMENT", "backward and update runs take no lossRows, globalBatch or shardOffset");
    if (p.op == Op::Update) return;  // every parameter, whatever the rows
  }
  if (!p.resident) {
    if (p.globalBatch || p.shardOffset) NNA_FAIL("BAD_ARGUMENT", "globalBatch and shardOffset apply to resident runs; use lossRows");
    // A replica may have no rows of a group's step (lossRows says the group has some).
    if ((p.rows == 0 && p.lossRows == 0) || p.rows > h.batch) NNA_FAIL("BAD_ARGUMENT", "rows " + std::to_string(p.rows) + " outside [1, batch " + std::to_string(h.batch) + "]");
    if (p.lossRows && p.lossRows < p.rows) NNA_FAIL("BAD_ARGUMENT", "lossRows " + std::to_string(p.lossRows) + " is below rows " + std::to_string(p.rows));
    if (p.numBatches != 1) NNA_FAIL("BAD_ARGUMENT", "a run on z[0]/y as they stand is one step");
    return;
  }
  if (h.samples == 0) NNA_FAIL("NO_DATA", "the arena holds no resident data set (plan it with samples > 0)");
  if (p.samples == 0 || p.samples > h.samples || p.samples > NNA_MAX_SAMPLES)
    NNA_FAIL("BAD_ARGUMENT", "samples " + std::to_string(p.samples) + " outside [1, " + std::to_string(h.samples) + "]");
  if (p.lossRows) NNA_FAIL("BAD_ARGUMENT", "lossRows applies to runs on z[0]/y; a resident run takes the group's rows from globalBatch");
  const uint64_t global = p.globalBatch ? p.globalBatch : h.batch;
  if (global < h.batch || global >= (uint64_t(1) << 40) || p.shardOffset > global - h.batch)
    NNA_FAIL("BAD_ARGUMENT", "shard [" + std::to_string(p.shardOffset) + ", +" + std::to_string(h.batch) + ") outside the global batch of " + std::to_string(global));
  const uint64_t batches = (p.samples + global - 1) / global;
  if (p.firstBatch >= batches || p.numBatches > batches - p.firstBatch)
    NNA_FAIL("BAD_ARGUMENT", "batches [" + std::to_string(p.firstBatch) + ", +" + std::to_string(p.numBatches) + ") outside the epoch of " + std::to_string(batches));
  if (p.permA == 0 || p.permA >= p.samples + (p.samples == 1) || p.permC >= p.samples || std::gcd(p.permA, p.samples) != 1)
    NNA_FAIL("BAD_ARGUMENT", "permutation (a=" + std::to_string(p.permA) + ", c=" + std::to_string(p.permC) + ") is not a bijection of " + std::to_string(p.samples) + " samples");
}

}  // namespace nna
