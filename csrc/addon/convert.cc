#include "convert.h"

#include <cmath>
#include <cstring>

#include "../train/aliasing.h"
#include "js_error.h"

namespace nna::addon {

uint64_t exactU64(Napi::Env env, const Napi::Value& v, const char* what) {
  if (v.IsBigInt()) {
    bool lossless = false;
    const uint64_t x = v.As<Napi::BigInt>().Uint64Value(&lossless);
    if (!lossless) throwJs(env, "BAD_ARGUMENT", std::string(what) + " is not a 64-bit unsigned integer");
    return x;
  }
  if (!v.IsNumber()) throwJs(env, "BAD_ARGUMENT", std::string(what) + " must be a number");
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0) || d > 9007199254740991.0 || std::floor(d) != d) throwJs(env, "BAD_ARGUMENT", std::string(what) + " must be an integer in [0, 2^53), got " + std::to_string(d));
  return static_cast<uint64_t>(d);
}

bool boolean(Napi::Env env, const Napi::Value& v, const char* what) {
  if (!v.IsBoolean()) throwJs(env, "BAD_ARGUMENT", std::string(what) + " must be a boolean");
  return v.As<Napi::Boolean>().Value();
}

std::string string(Napi::Env env, const Napi::Value& v, const char* what) {
  if (!v.IsString()) throwJs(env, "BAD_ARGUMENT", std::string(what) + " must be a string");
  return v.As<Napi::String>().Utf8Value();
}

Napi::Uint8Array uint8Array(Napi::Env env, const Napi::Value& v, const char* what) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) throwJs(env, "BAD_ARGUMENT", std::string(what) + " must be a Uint8Array");
  return v.As<Napi::Uint8Array>();
}

namespace {

JitType typeOf(Napi::Env env, const std::string& s) {
  if (s == "f32") return JitType::F32;
  if (s == "f64") return JitType::F64;
  if (s == "i32") return JitType::I32;
  if (s == "u32") return JitType::U32;
  if (s == "i64") return JitType::I64;
  if (s == "u64") return JitType::U64;
  throwJs(env, "BAD_ARGUMENT", "parameter type '" + s + "' is not one of f32, f64, i32, u32, i64, u64");
}

}  // namespace

std::vector<JitType> typesOf(Napi::Env env, const Napi::Value& v) {
  if (!v.IsArray()) throwJs(env, "BAD_ARGUMENT", "params must be an array of type names");
  const Napi::Array a = v.As<Napi::Array>();
  std::vector<JitType> out;
  for (uint32_t i = 0; i < a.Length(); ++i) out.push_back(typeOf(env, string(env, a.Get(i), "params")));
  return out;
}

std::vector<uint8_t> bytesOf(Napi::Env env, const Napi::Value& v, const char* what) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) throwJs(env, "BAD_ARGUMENT", std::string(what) + " must be a Uint8Array");
  const Napi::Uint8Array u = v.As<Napi::Uint8Array>();
  return std::vector<uint8_t>(u.Data(), u.Data() + u.ByteLength());
}

std::vector<uint8_t> validatedHeader(Napi::Env env, const Napi::Value& v) {
  std::vector<uint8_t> h = bytesOf(env, v, "header");
  const std::string why = validateArena(h.data(), h.size(), SIZE_MAX);
  if (!why.empty()) throwJs(env, "BAD_HEADER", why);
  nna_header head;
  std::memcpy(&head, h.data(), sizeof head);
  if (h.size() > head.header_bytes) h.resize(size_t(head.header_bytes));
  return h;
}

std::vector<Range> rangesOf(Napi::Env env, const Napi::Value& v) {
  if (!v.IsArray()) throwJs(env, "BAD_ARGUMENT", "ranges must be an array [offset, bytes, ...]");
  const Napi::Array a = v.As<Napi::Array>();
  const uint32_t n = a.Length();
  if (n % 2) throwJs(env, "BAD_ARGUMENT", "ranges must hold offset/bytes pairs");
  std::vector<Range> out(n / 2);
  for (uint32_t i = 0; i < n; i += 2) out[i / 2] = {exactU64(env, a.Get(i), "range offset"), exactU64(env, a.Get(i + 1), "range bytes")};
  return out;
}

namespace {
// One of a few strings, by name: BAD_ARGUMENT listing the accepted ones otherwise.
template <typename E> E choiceOf(Napi::Env env, const Napi::Value& v, const char* what, std::initializer_list<std::pair<const char*, E>> choices) {
  const std::string s = string(env, v, what);
  std::string accepted;
  for (const auto& c : choices) {
    if (s == c.first) return c.second;
    accepted += (accepted.empty() ? "'" : ", '") + std::string(c.first) + "'";
  }
  throwJs(env, "BAD_ARGUMENT", std::string(what) + " must be one of " + accepted + ", got '" + s + "'");
}
}  // namespace

Dir dirOf(Napi::Env env, const Napi::Value& v) { return choiceOf<Dir>(env, v, "direction", {{"toDevice", Dir::ToDevice}, {"toHost", Dir::ToHost}}); }
Where whereOf(Napi::Env env, const Napi::Value& v) { return choiceOf<Where>(env, v, "location", {{"device", Where::Device}, {"host", Where::Host}}); }
Advice adviceOf(Napi::Env env, const Napi::Value& v) {
  return choiceOf<Advice>(env, v, "advice", {{"readMostly", Advice::ReadMostly}, {"preferredLocation", Advice::PreferredLocation}, {"accessedBy", Advice::AccessedBy}});
}
Placement placementOf(Napi::Env env, const Napi::Value& v) { return choiceOf<Placement>(env, v, "placement", {{"managed", Placement::Managed}, {"staged", Placement::Staged}}); }

// A schedule object { type, ...parameters }: the type and every key from the schedule table
// (csrc/descriptors/schedules.h); ranges are checked with the run (check.cc).
Schedule scheduleOf(Napi::Env env, const Napi::Value& v) {
  if (!v.IsObject() || v.IsArray()) throwJs(env, "BAD_ARGUMENT", "run parameter schedule must be an object { type, ... }");
  const Napi::Object o = v.As<Napi::Object>();
  const std::string type = string(env, o.Get("type"), "schedule.type");
  uint32_t n = 0;
  const ScheduleInfo* table = scheduleTable(&n);
  const ScheduleInfo* info = nullptr;
  for (uint32_t i = 0; i < n; ++i)
    if (type == table[i].name) info = &table[i];
  if (!info) throwJs(env, "BAD_ARGUMENT", "unknown schedule type '" + type + "'");
  Schedule s;
  s.kind = info->kind;
  const Napi::Array keys = o.GetPropertyNames();
  for (uint32_t i = 0; i < keys.Length(); ++i) {
    const std::string k = keys.Get(i).As<Napi::String>().Utf8Value();
    if (k == "type") continue;
    const ScheduleParam* param = nullptr;
    for (uint32_t j = 0; j < info->numParams; ++j)
      if (k == info->params[j].name) param = &info->params[j];
    if (!param) throwJs(env, "BAD_ARGUMENT", "schedule '" + type + "' has no parameter '" + k + "'");
    const Napi::Value x = o.Get(k);
    if (!x.IsNumber()) throwJs(env, "BAD_ARGUMENT", "schedule." + k + " must be a number");
    s.*(param->field) = x.As<Napi::Number>().DoubleValue();
  }
  return s;
}

// Every key of a run's parameters is known and of the right type, or the call fails before it
// touches the arena: a mistyped key never takes a default.
namespace {

// Each key of object v onto p.
void readRunParams(Napi::Env env, const Napi::Value& v, RunParams& p) {
  if (!v.IsObject() || v.IsArray()) throwJs(env, "BAD_ARGUMENT", "run parameters must be an object");
  const Napi::Object o = v.As<Napi::Object>();
  const Napi::Array keys = o.GetPropertyNames();
  for (uint32_t i = 0; i < keys.Length(); ++i) {
    const Napi::Value key = keys.Get(i);
    if (!key.IsString()) throwJs(env, "BAD_ARGUMENT", "run parameter names must be strings");
    const std::string k = key.As<Napi::String>().Utf8Value();
    const Napi::Value x = o.Get(key);  // by the key itself: no new string to make and intern
    auto d = [&](double& dst) {
      if (!x.IsNumber()) throwJs(env, "BAD_ARGUMENT", "run parameter " + k + " must be a number");
      dst = x.As<Napi::Number>().DoubleValue();
    };
    if (k == "op")
      p.op = static_cast<Op>(exactU64(env, x, "op"));
    else if (k == "loss")
      p.loss = static_cast<Loss>(exactU64(env, x, "loss"));
    else if (k == "precision")
      p.precision = static_cast<Precision>(exactU64(env, x, "precision"));
    else if (k == "resident")
      p.resident = boolean(env, x, "resident");
    else if (k == "resetStats")
      p.resetStats = boolean(env, x, "resetStats");
    else if (k == "rows")
      p.rows = exactU64(env, x, "rows");
    else if (k == "samples")
      p.samples = exactU64(env, x, "samples");
    else if (k == "firstBatch")
      p.firstBatch = exactU64(env, x, "firstBatch");
    else if (k == "numBatches")
      p.numBatches = exactU64(env, x, "numBatches");
    else if (k == "permA")
      p.permA = exactU64(env, x, "permA");
    else if (k == "permC")
      p.permC = exactU64(env, x, "permC");
    else if (k == "stepBase")
      p.stepBase = exactU64(env, x, "stepBase");
    else if (k == "dropoutSeed")
      p.dropoutSeed = exactU64(env, x, "dropoutSeed");
    else if (k == "lr")
      d(p.lr);
    else if (k == "schedule")
      p.opt.schedule = scheduleOf(env, x);
    else if (const HyperSpec* hs = hyperNamed(k.c_str()); hs && hs->field) {  // the optimizers' table
      if (hs->type == kFlag)
        p.opt.*(hs->field) = boolean(env, x, hs->name) ? 1.0 : 0.0;
      else
        d(p.opt.*(hs->field));
    } else if (k == "labelSmoothing")
      d(p.labelSmoothing);
    else if (k == "lossScale")
      d(p.lossScale.scale);
    else if (k == "lossScaleGrowth")
      d(p.lossScale.growth);
    else if (k == "lossScaleBackoff")
      d(p.lossScale.backoff);
    else if (k == "lossScaleInterval")
      p.lossScale.interval = exactU64(env, x, "lossScaleInterval");
    else if (k == "lossScaleGood")
      p.lossScale.good = exactU64(env, x, "lossScaleGood");
    else if (k == "globalBatch")
      p.globalBatch = exactU64(env, x, "globalBatch");
    else if (k == "shardOffset")
      p.shardOffset = exactU64(env, x, "shardOffset");
    else if (k == "lossRows")
      p.lossRows = exactU64(env, x, "lossRows");
    else if (k == "reduce")
      p.reduce = boolean(env, x, "reduce");
    else if (k == "lrs") {  // one learning rate per model (K-model arenas); checkRun checks the count
      if (!x.IsArray()) throwJs(env, "BAD_ARGUMENT", "run parameter lrs must be an array of numbers");
      const Napi::Array a = x.As<Napi::Array>();
      const uint32_t n = a.Length();
      if (n > NNA_MAX_MODELS) throwJs(env, "BAD_ARGUMENT", "run parameter lrs has " + std::to_string(n) + " entries, more than " + std::to_string(NNA_MAX_MODELS) + " models");
      p.lrs.resize(n);
      for (uint32_t j = 0; j < n; ++j) {
        const Napi::Value e = a.Get(j);
        if (!e.IsNumber()) throwJs(env, "BAD_ARGUMENT", "run parameter lrs[" + std::to_string(j) + "] must be a number");
        p.lrs[j] = e.As<Napi::Number>().DoubleValue();
      }
    } else
      throwJs(env, "BAD_ARGUMENT", "unknown run parameter '" + k + "'");
  }
}

}  // namespace

RunParams runParamsOf(Napi::Env env, const Napi::Value& v) {
  RunParams p;
  readRunParams(env, v, p);
  return p;
}

RunParams runParamsOf(Napi::Env env, const Napi::Value& base, const Napi::Value& own, ParamsCache& cache) {
  if (cache.base.IsEmpty() || !cache.base.Value().StrictEquals(base)) {
    if (!base.IsObject() || !env.Global().Get("Object").As<Napi::Object>().Get("isFrozen").As<Napi::Function>().Call({base}).ToBoolean())
      throwJs(env, "BAD_ARGUMENT", "base run parameters must be a frozen object");
    RunParams parsed;
    readRunParams(env, base, parsed);
    cache.parsed = parsed;
    cache.base = Napi::Persistent(base.As<Napi::Object>());
  }
  RunParams p = cache.parsed;
  readRunParams(env, own, p);
  return p;
}

void arenaOptionsOf(Napi::Env env, const Napi::Value& v, BlockOptions* options, Budget* budget) {
  if (!v.IsObject() || v.IsArray()) throwJs(env, "BAD_ARGUMENT", "arena options must be an object");
  const Napi::Object o = v.As<Napi::Object>();
  options->cuda = boolean(env, o.Get("cuda"), "cuda");
  options->pinned = boolean(env, o.Get("pinned"), "pinned");
  options->memory = memoryOf(env, o.Get("memory"));
  const Napi::Value device = o.Get("device");
  if (!device.IsUndefined()) {
    const uint64_t d = exactU64(env, device, "device");
    if (d > 1023) throw jsError(env, "BAD_OPTION", "device must be a CUDA device index", "", "device");
    options->device = int(d);
  }
  *budget = budgetOf(env, o.Get("budget"), o.Get("scheduled"));
}

Memory memoryOf(Napi::Env env, const Napi::Value& v) {
  const uint64_t memory = exactU64(env, v, "memory");
  if (memory > uint64_t(Memory::Staged)) throwJs(env, "BAD_ARGUMENT", "memory code " + std::to_string(memory) + " is not device (0), managed (1) or staged (2)");
  return static_cast<Memory>(memory);
}

Budget budgetOf(Napi::Env env, const Napi::Value& bytes, const Napi::Value& scheduled) {
  Budget b;
  if (!bytes.IsUndefined()) {
    const double d = bytes.IsNumber() ? bytes.As<Napi::Number>().DoubleValue() : -1;
    if (!(d >= 1) || d > 9007199254740991.0 || std::floor(d) != d) throw jsError(env, "BAD_BUDGET", "must be a positive safe integer (bytes)", "", "deviceBudget");
    b.bytes = uint64_t(d);
  }
  b.scheduled = boolean(env, scheduled, "scheduled");
  return b;
}

Napi::Object statsObject(Napi::Env env, const Stats& s) {
  Napi::Object o = Napi::Object::New(env);
  auto n = [&](const char* k, uint64_t v) { o.Set(k, Napi::Number::New(env, static_cast<double>(v))); };
  n("hostAllocs", s.hostAllocs);
  n("deviceAllocs", s.deviceAllocs);
  n("hostFrees", s.hostFrees);
  n("deviceFrees", s.deviceFrees);
  n("toDeviceTransfers", s.toDeviceTransfers);
  n("toDeviceBytes", s.toDeviceBytes);
  n("toHostTransfers", s.toHostTransfers);
  n("toHostBytes", s.toHostBytes);
  return o;
}

Napi::Object countersObject(Napi::Env env, const ResidencyCounters& c) {
  Napi::Object o = Napi::Object::New(env);
  auto n = [&](const char* k, uint64_t v) { o.Set(k, Napi::Number::New(env, static_cast<double>(v))); };
  n("runs", c.runs);
  n("steps", c.steps);
  n("fetches", c.fetches);
  n("fetchedBytes", c.fetchedBytes);
  n("placedBytes", c.placedBytes);
  n("writeBacks", c.writeBacks);
  n("writtenBackBytes", c.writtenBackBytes);
  n("drops", c.drops);
  n("droppedBytes", c.droppedBytes);
  n("compactions", c.compactions);
  n("peakScheduledBytes", c.peakScheduledBytes);
  return o;
}

}  // namespace nna::addon
