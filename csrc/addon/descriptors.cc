// descriptors.cc: the optimizer and schedule tables (csrc/descriptors/) read out for
// scripts/gen-tables.cjs, which writes them into src/native/tables.generated.ts at build time
// (the one road of every native table to TypeScript); the learning rate of a step under a
// schedule (lrAt, the one definition the runs use); and, for the TS planner, the native rules of
// every region of a shape (regionRules: its count, the validator's rule, whether it outlives a
// run, whether each model has a copy) and its phase table (stepPhases: the one that the native
// replay of a compact plan walks).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "../core/validate.h"
#include "../descriptors/optimizers.h"
#include "../train/aliasing.h"
#include "../train/half_copies.h"
#include "../train/train.h"
#include "convert.h"
#include "functions.h"
#include "js_error.h"
#include "phases_js.h"

namespace nna::addon {

namespace {

template <class S> Napi::Array paramsArray(Napi::Env env, const ParamSpec<S>* ps, uint32_t n) {
  Napi::Array a = Napi::Array::New(env, n);
  for (uint32_t i = 0; i < n; ++i) {
    const ParamSpec<S>& p = ps[i];
    Napi::Object o = Napi::Object::New(env);
    o.Set("name", p.name);
    o.Set("type", p.type == kFlag ? "boolean" : p.type == kInteger ? "integer" : "number");
    o.Set("default", p.type == kFlag ? Napi::Value(Napi::Boolean::New(env, p.def != 0)) : Napi::Value(Napi::Number::New(env, p.def)));
    o.Set("min", p.lo);
    o.Set("max", p.hi);
    o.Set("minOpen", p.loOpen);
    o.Set("maxOpen", p.hiOpen);
    o.Set("doc", p.doc);
    a.Set(i, o);
  }
  return a;
}

// descriptors(): { optimizers: [{ name, code, doc, state: [kind codes], hypers }], schedules:
// [{ name, code, doc, params }], common: [clipGradNorm's entry] }.
Napi::Value Descriptors(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object out = Napi::Object::New(env);
  Napi::Array opts = Napi::Array::New(env);
  for (uint32_t code = 0; const OptimizerInfo* o = optimizerInfo(code); ++code) {
    Napi::Object d = Napi::Object::New(env);
    d.Set("name", o->name);
    d.Set("code", o->code);
    d.Set("doc", o->doc);
    Napi::Array state = Napi::Array::New(env);
    for (uint32_t k = 0; k < NNA_KIND_COUNT; ++k)
      if (o->states >> k & 1u) state.Set(state.Length(), k);
    d.Set("state", state);
    d.Set("folds", optimizerFolds(code));  // no state: the step folds into the dW product; a compact plan has no dw
    d.Set("hypers", paramsArray(env, o->hypers, o->numHypers));
    opts.Set(code, d);
  }
  out.Set("optimizers", opts);
  uint32_t n = 0;
  const ScheduleInfo* sched = scheduleTable(&n);
  Napi::Array ss = Napi::Array::New(env, n);
  for (uint32_t i = 0; i < n; ++i) {
    Napi::Object d = Napi::Object::New(env);
    d.Set("name", sched[i].name);
    d.Set("code", sched[i].kind);
    d.Set("doc", sched[i].doc);
    d.Set("params", paramsArray(env, sched[i].params, sched[i].numParams));
    ss.Set(i, d);
  }
  out.Set("schedules", ss);
  const HyperSpec* common = commonParams(&n);
  out.Set("common", paramsArray(env, common, n));
  return out;
}

// lrAt(schedule, lr, step): the learning rate of 0-based step `step` (for progress and reports).
Napi::Value LrAt(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Schedule s = scheduleOf(env, info[0]);
  if (!info[1].IsNumber()) throwJs(env, "BAD_ARGUMENT", "lr must be a number");
  const double lr = info[1].As<Napi::Number>().DoubleValue();
  const uint64_t step = exactU64(env, info[2], "step");
  return Napi::Number::New(env, lrAt(s, lr, step));
}

// A shape as the planner has it: { batch, samples, optimizer, compact, models, extras, units[],
// activations[] } (activations[l] is layer l's code; layer 0's is ignored; extras: how many user
// regions), as a header and its layer table whose counts are expectedCount's (offsets 0: nothing
// is placed yet), 2^64 - 1 where one overflows. A combination the format refuses
// (shapeProblem) is the planner's coded error, naming the spec's field.
std::vector<uint8_t> shapeHeader(Napi::Env env, const Napi::Value& v) {
  if (!v.IsObject()) throwJs(env, "BAD_ARGUMENT", "expected a shape object");
  const Napi::Object o = v.As<Napi::Object>();
  nna_header h{};
  h.magic = NNA_MAGIC;
  h.version = NNA_VERSION;
  h.dtype = NNA_FLOAT32;
  h.batch = exactU64(env, o.Get("batch"), "batch");
  h.samples = exactU64(env, o.Get("samples"), "samples");
  h.optimizer = uint32_t(exactU64(env, o.Get("optimizer"), "optimizer"));
  h.flags = boolean(env, o.Get("compact"), "compact") ? NNA_FLAG_COMPACT : 0;
  h.models = exactU64(env, o.Get("models"), "models");
  const uint64_t extras = exactU64(env, o.Get("extras"), "extras");
  const Napi::Value u = o.Get("units"), a = o.Get("activations"), ops = o.Get("ops");
  if (!u.IsArray() || !a.IsArray() || u.As<Napi::Array>().Length() != a.As<Napi::Array>().Length())
    throwJs(env, "BAD_ARGUMENT", "units and activations must be arrays of one length");
  // ops: the layers' op codes (nna_op), or undefined where every layer is dense.
  if (!ops.IsUndefined() && (!ops.IsArray() || ops.As<Napi::Array>().Length() != u.As<Napi::Array>().Length()))
    throwJs(env, "BAD_ARGUMENT", "ops must be undefined or an array of one op code per layer");
  h.num_layers = u.As<Napi::Array>().Length();
  std::vector<uint32_t> opCodes(h.num_layers, NNA_OP_DENSE);
  for (uint32_t l = 0; l < h.num_layers && ops.IsArray(); ++l) {
    opCodes[l] = uint32_t(exactU64(env, ops.As<Napi::Array>().Get(l), "ops"));
    if (opCodes[l] >= NNA_OP_COUNT) throwJs(env, "BAD_ARGUMENT", "unknown op code " + std::to_string(opCodes[l]));
  }
  // embedding: the columns of an embedding layer ({ cardinality, dim }, nn_arena.h nna_embed_col),
  // whose tables are its w; undefined where there is none.
  const Napi::Value emb = o.Get("embedding");
  std::vector<nna_embed_col> cols;
  if (!emb.IsUndefined()) {
    if (!emb.IsArray()) throwJs(env, "BAD_ARGUMENT", "embedding must be undefined or an array of { cardinality, dim }");
    for (uint32_t j = 0; j < emb.As<Napi::Array>().Length(); ++j) {
      const Napi::Value c = emb.As<Napi::Array>().Get(j);
      if (!c.IsObject()) throwJs(env, "BAD_ARGUMENT", "embedding must be undefined or an array of { cardinality, dim }");
      const uint64_t card = exactU64(env, c.As<Napi::Object>().Get("cardinality"), "cardinality"), dim = exactU64(env, c.As<Napi::Object>().Get("dim"), "dim");
      if (card > UINT32_MAX || dim > UINT32_MAX) throwJs(env, "BAD_ARGUMENT", "an embedding's cardinality and dim are 32-bit");
      cols.push_back({uint32_t(card), uint32_t(dim)});
    }
  }
  uint64_t tables = 0;
  if (!embedTableElements(cols.data(), uint32_t(cols.size()), &tables)) tables = ~uint64_t(0);
  const ShapeProblem problem = shapeProblem(h.flags & NNA_FLAG_COMPACT, extras != 0, nna_models(&h));
  if (problem.field) throw jsError(env, problem.code, problem.why, "", problem.field);
  if (h.num_layers > NNA_MAX_LAYERS) throwJs(env, "BAD_ARGUMENT", "more layers than NNA_MAX_LAYERS");
  h.num_kinds = NNA_KIND_COUNT;
  h.layer_size = sizeof(nna_layer);
  h.layers_offset = sizeof(nna_header);
  std::vector<nna_layer> layers(h.num_layers);
  for (uint32_t l = 0; l < h.num_layers; ++l) {
    nna_layer& L = layers[l];
    L.units = exactU64(env, u.As<Napi::Array>().Get(l), "units");
    L.fan_in = l > 0 ? layers[l - 1].units : 0;
    L.activation = uint32_t(exactU64(env, a.As<Napi::Array>().Get(l), "activations"));
    L.op = opCodes[l];
    for (uint32_t k = 0; k < NNA_KIND_COUNT; ++k)
      if (!expectedCount(h, L, l, k, &L.region[k].count, tables)) L.region[k].count = ~uint64_t(0);
  }
  // With ops, the op parameter table's `from` of each layer (the phase table reads a residual's;
  // only a residual's is a layer index, so each is held below its layer).
  const Napi::Value from = o.Get("opFrom");
  std::vector<nna_op_param> params;
  if (ops.IsArray()) {
    if (!from.IsArray() || from.As<Napi::Array>().Length() != h.num_layers) throwJs(env, "BAD_ARGUMENT", "opFrom must be an array of one layer index per layer");
    params.resize(h.num_layers);
    for (uint32_t l = 0; l < h.num_layers; ++l) params[l].from = uint32_t(std::min<uint64_t>(exactU64(env, from.As<Napi::Array>().Get(l), "opFrom"), l > 1 ? l - 2 : 0));
    h.ops_offset = sizeof h + layers.size() * sizeof(nna_layer);
  }
  std::vector<uint8_t> out(sizeof h + layers.size() * sizeof(nna_layer) + params.size() * sizeof(nna_op_param));
  std::memcpy(out.data(), &h, sizeof h);
  if (!layers.empty()) std::memcpy(out.data() + sizeof h, layers.data(), layers.size() * sizeof(nna_layer));
  if (!params.empty()) std::memcpy(out.data() + h.ops_offset, params.data(), params.size() * sizeof(nna_op_param));
  return out;
}

// Bits of regionRules' flags.
constexpr uint8_t kOutlivesRun = 1, kPerModel = 2;

// regionRules(shape): every (layer, kind), layers x NNA_KIND_COUNT, by the native rules the
// planner places with: counts (expectedCount, the validator's rule; a per-layer user region
// shaped like a kind has that kind's count) and flags (1: keeps its bytes after every run, so
// never shared in a compact plan, aliasing.cc outlivesRun; 2: one copy per model,
// nna_kind_per_model).
Napi::Value RegionRules(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::vector<uint8_t> b = shapeHeader(env, info[0]);
  nna_header h;
  std::memcpy(&h, b.data(), sizeof h);
  const size_t n = size_t(h.num_layers) * NNA_KIND_COUNT;
  Napi::BigUint64Array counts = Napi::BigUint64Array::New(env, n);
  Napi::Uint8Array flags = Napi::Uint8Array::New(env, n);
  for (uint32_t l = 0; l < h.num_layers; ++l) {
    nna_layer L;
    std::memcpy(&L, b.data() + sizeof h + size_t(l) * sizeof L, sizeof L);
    for (uint32_t k = 0; k < NNA_KIND_COUNT; ++k) {
      counts[size_t(l) * NNA_KIND_COUNT + k] = L.region[k].count;
      flags[size_t(l) * NNA_KIND_COUNT + k] = (outlivesRun(h.num_layers, l, k) ? kOutlivesRun : 0) | (nna_kind_per_model(&h, l, k) ? kPerModel : 0);
    }
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("counts", counts);
  out.Set("flags", flags);
  return out;
}

// stepPhases(shape, op, resident, fused): the phase table (csrc/train/phases.cc StepModel::step)
// of one step of a shape, which the TS planner reads for a compact plan's live intervals and the
// native replay (aliasing.cc) walks again before such a header is used (phases_js.h).
Napi::Value StepPhases(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::vector<uint8_t> b = shapeHeader(env, info[0]);
  return phasesOf(env, b.data(), info);
}

// halfCopyBytes(shape): the device bytes a bf16 / fp16 CUDA run of the shape allocates beside the
// arena for its 16-bit operand copies (halfCopiesLayout, the rule HalfCopies allocates by).
Napi::Value HalfCopyBytes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::vector<uint8_t> b = shapeHeader(env, info[0]);
  nna_header h;
  std::memcpy(&h, b.data(), sizeof h);
  std::vector<nna_layer> layers(h.num_layers);
  std::memcpy(layers.data(), b.data() + sizeof h, layers.size() * sizeof(nna_layer));
  return Napi::Number::New(env, double(halfCopiesLayout(h, layers).total * sizeof(uint16_t)));
}

}  // namespace

void registerDescriptors(Napi::Env env, Napi::Object exports) {
  exportFunctions(env, exports, {{"descriptors", Descriptors}, {"lrAt", LrAt}, {"regionRules", RegionRules}, {"stepPhases", StepPhases}, {"halfCopyBytes", HalfCopyBytes}});
}

}  // namespace nna::addon
