// descriptors.cc: the optimizer and schedule tables (csrc/descriptors/) handed to TypeScript,
// which reads them once (src/layout/optimizers.ts) for spec validation, the planner's state
// regions, Trainer options, CLI choices and the docs; and the learning rate of a step under a
// schedule (lrAt, the one definition the runs use).
#include <cmath>

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

}  // namespace

void registerDescriptors(Napi::Env env, Napi::Object exports) {
  exportFunctions(env, exports, {{"descriptors", Descriptors}, {"lrAt", LrAt}});
}

}  // namespace nna::addon
