// descriptors.cc: the optimizer and schedule tables (csrc/descriptors/) handed to TypeScript,
// which reads them once (src/layout/optimizers.ts) for spec validation, the planner's state
// regions, Trainer options, CLI choices and the docs; the learning rate of a step under a
// schedule (lrAt, the one definition the runs use); and every region's element count of a shape
// (regionCounts: the validator's rule, which the TS planner places).
#include <cmath>

#include "../core/validate.h"
#include "../descriptors/optimizers.h"
#include "../train/train.h"
#include "convert.h"
#include "functions.h"
#include "js_error.h"

namespace nna::addon {

namespace {

template <class S>
Napi::Array paramsArray(Napi::Env env, const ParamSpec<S>* ps, uint32_t n) {
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

// regionCounts({ batch, samples, optimizer, compact, units[], activations[] }): the element
// count of every (layer, kind), layers x NNA_KIND_COUNT (expectedCount, validate.cc); 2^64 - 1
// where it overflows. activations[l] is layer l's code (layer 0's is ignored).
Napi::Value RegionCounts(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsObject()) throwJs(env, "BAD_ARGUMENT", "regionCounts expects a shape object");
  const Napi::Object o = info[0].As<Napi::Object>();
  nna_header h{};
  h.batch = exactU64(env, o.Get("batch"), "batch");
  h.samples = exactU64(env, o.Get("samples"), "samples");
  h.optimizer = uint32_t(exactU64(env, o.Get("optimizer"), "optimizer"));
  h.flags = boolean(env, o.Get("compact"), "compact") ? NNA_FLAG_COMPACT : 0;
  const Napi::Value u = o.Get("units"), a = o.Get("activations");
  if (!u.IsArray() || !a.IsArray() || u.As<Napi::Array>().Length() != a.As<Napi::Array>().Length())
    throwJs(env, "BAD_ARGUMENT", "units and activations must be arrays of one length");
  h.num_layers = u.As<Napi::Array>().Length();
  if (h.num_layers > NNA_MAX_LAYERS) throwJs(env, "BAD_ARGUMENT", "more layers than NNA_MAX_LAYERS");
  std::vector<nna_layer> layers(h.num_layers);
  for (uint32_t l = 0; l < h.num_layers; ++l) {
    layers[l].units = exactU64(env, u.As<Napi::Array>().Get(l), "units");
    layers[l].fan_in = l > 0 ? layers[l - 1].units : 0;
    layers[l].activation = uint32_t(exactU64(env, a.As<Napi::Array>().Get(l), "activations"));
  }
  Napi::BigUint64Array out = Napi::BigUint64Array::New(env, size_t(h.num_layers) * NNA_KIND_COUNT);
  for (uint32_t l = 0; l < h.num_layers; ++l)
    for (uint32_t k = 0; k < NNA_KIND_COUNT; ++k) {
      uint64_t n = 0;
      out[size_t(l) * NNA_KIND_COUNT + k] = expectedCount(h, layers[l], l, k, &n) ? n : ~uint64_t(0);
    }
  return out;
}

}  // namespace

void registerDescriptors(Napi::Env env, Napi::Object exports) {
  exportFunctions(env, exports, {{"descriptors", Descriptors}, {"lrAt", LrAt}, {"regionCounts", RegionCounts}});
}

}  // namespace nna::addon
