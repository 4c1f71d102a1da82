// addon.cc: the thin Node-API binding. All policy (planning, selectors, coalescing, errors as
// classes) lives in TypeScript (src/); this file converts arguments, calls the core and turns a
// nna::Failure into a JS Error carrying `code`, which src/native.ts rethrows as ArenaError.
#include <napi.h>

#include <cmath>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "../core/block.h"
#include "../bench/copy_bench.h"
#include "../core/crc32c.h"
#include "../core/failure.h"
#include "../core/validate.h"
#include "../include/nn_arena.h"
#include "../budget/residency_check.h"
#include "../train/train.h"

namespace {

using nna::Failure;

[[noreturn]] void throwJs(Napi::Env env, const std::string& code, const std::string& message) {
  Napi::Error e = Napi::Error::New(env, message);
  e.Set("code", Napi::String::New(env, code));
  throw e;
}

// Runs f, converting a core Failure into a JS exception with a code.
template <typename F>
auto guarded(Napi::Env env, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Failure& e) {
    throwJs(env, e.code, e.what());
  } catch (const std::bad_alloc&) {
    throwJs(env, "HOST_OOM", "out of host memory");
  }
}

uint64_t exactU64(Napi::Env env, const Napi::Value& v, const char* what) {
  if (v.IsBigInt()) {
    bool lossless = false;
    const uint64_t x = v.As<Napi::BigInt>().Uint64Value(&lossless);
    if (!lossless) throwJs(env, "BAD_ARGUMENT", std::string(what) + " is not a 64-bit unsigned integer");
    return x;
  }
  if (!v.IsNumber()) throwJs(env, "BAD_ARGUMENT", std::string(what) + " must be a number");
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0) || d > 9007199254740991.0 || std::floor(d) != d)
    throwJs(env, "BAD_ARGUMENT", std::string(what) + " must be an integer in [0, 2^53), got " + std::to_string(d));
  return static_cast<uint64_t>(d);
}

std::vector<nna::Range> rangesOf(Napi::Env env, const Napi::Value& v) {
  if (!v.IsArray()) throwJs(env, "BAD_ARGUMENT", "ranges must be an array [offset, bytes, ...]");
  const Napi::Array a = v.As<Napi::Array>();
  if (a.Length() % 2) throwJs(env, "BAD_ARGUMENT", "ranges must hold offset/bytes pairs");
  std::vector<nna::Range> out(a.Length() / 2);
  for (uint32_t i = 0; i < a.Length(); i += 2)
    out[i / 2] = {exactU64(env, a.Get(i), "range offset"), exactU64(env, a.Get(i + 1), "range bytes")};
  return out;
}

Napi::Object statsObject(Napi::Env env, const nna::Stats& s) {
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

// ---- Header decoding: what the native side reads from bytes the TS encoder wrote -----------
Napi::Value decodeHeaderAt(Napi::Env env, const uint8_t* p, size_t readable) {
  const std::string why = nna::validateHeader(p, readable, SIZE_MAX);
  if (!why.empty()) throwJs(env, "BAD_HEADER", why);
  nna_header h;
  std::memcpy(&h, p, sizeof h);
  Napi::Object o = Napi::Object::New(env);
  auto big = [&](uint64_t v) { return Napi::BigInt::New(env, v); };
  o.Set("magic", Napi::Number::New(env, h.magic));
  o.Set("version", Napi::Number::New(env, h.version));
  o.Set("dtype", Napi::Number::New(env, h.dtype));
  o.Set("order", Napi::Number::New(env, h.order));
  o.Set("optimizer", Napi::Number::New(env, h.optimizer));
  o.Set("numLayers", Napi::Number::New(env, h.num_layers));
  o.Set("batch", big(h.batch));
  o.Set("samples", big(h.samples));
  o.Set("align", big(h.align));
  o.Set("headerBytes", big(h.header_bytes));
  o.Set("totalBytes", big(h.total_bytes));
  Napi::Array layers = Napi::Array::New(env, h.num_layers);
  for (uint32_t l = 0; l < h.num_layers; ++l) {
    nna_layer L;
    std::memcpy(&L, p + h.layers_offset + size_t(l) * sizeof(nna_layer), sizeof L);
    Napi::Object lo = Napi::Object::New(env);
    lo.Set("units", big(L.units));
    lo.Set("fanIn", big(L.fan_in));
    lo.Set("activation", Napi::Number::New(env, L.activation));
    Napi::Array regions = Napi::Array::New(env, NNA_KIND_COUNT);
    for (uint32_t k = 0; k < NNA_KIND_COUNT; ++k) {
      Napi::Array r = Napi::Array::New(env, 2);
      r.Set(0u, big(L.region[k].offset));
      r.Set(1u, big(L.region[k].count));
      regions.Set(k, r);
    }
    lo.Set("regions", regions);
    layers.Set(l, lo);
  }
  o.Set("layers", layers);
  return o;
}

Napi::Value DecodeHeader(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsTypedArray()) throwJs(env, "BAD_ARGUMENT", "decodeHeader expects a Uint8Array");
  const Napi::Uint8Array u = info[0].As<Napi::Uint8Array>();
  return decodeHeaderAt(env, u.Data(), u.ByteLength());
}

Napi::Value ValidateHeader(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsTypedArray()) throwJs(env, "BAD_ARGUMENT", "validateHeader expects a Uint8Array");
  const Napi::Uint8Array u = info[0].As<Napi::Uint8Array>();
  const uint64_t available = info.Length() > 1 ? exactU64(env, info[1], "available") : u.ByteLength();
  return Napi::String::New(env, nna::validateHeader(u.Data(), u.ByteLength(), available));
}

// sizeof/offsetof of the C structs: compared with the TS encoder by test/header-drift.test.ts.
Napi::Value LayoutInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  auto n = [&](Napi::Object t, const char* k, double v) { t.Set(k, Napi::Number::New(env, v)); };
  n(o, "magic", NNA_MAGIC);
  n(o, "version", NNA_VERSION);
  n(o, "maxLayers", NNA_MAX_LAYERS);
  n(o, "kindCount", NNA_KIND_COUNT);
  n(o, "headerSize", sizeof(nna_header));
  n(o, "layerSize", sizeof(nna_layer));
  n(o, "regionSize", sizeof(nna_region));
  Napi::Object h = Napi::Object::New(env);
#define F(name) n(h, #name, offsetof(nna_header, name))
  F(magic); F(version); F(dtype); F(order); F(optimizer); F(num_layers); F(num_kinds); F(layer_size);
  F(batch); F(samples); F(align); F(header_bytes); F(total_bytes); F(layers_offset);
#undef F
  o.Set("header", h);
  Napi::Object l = Napi::Object::New(env);
  n(l, "units", offsetof(nna_layer, units));
  n(l, "fan_in", offsetof(nna_layer, fan_in));
  n(l, "activation", offsetof(nna_layer, activation));
  n(l, "region", offsetof(nna_layer, region));
  n(l, "region_offset", offsetof(nna_region, offset));
  n(l, "region_count", offsetof(nna_region, count));
  o.Set("layer", l);
  Napi::Object e = Napi::Object::New(env);
  n(e, "float32", NNA_FLOAT32); n(e, "float64", NNA_FLOAT64);
  n(e, "layerMajor", NNA_LAYER_MAJOR); n(e, "kindMajor", NNA_KIND_MAJOR);
  n(e, "sgd", NNA_SGD); n(e, "momentum", NNA_MOMENTUM); n(e, "adam", NNA_ADAM);
  n(e, "input", NNA_ACT_INPUT); n(e, "identity", NNA_ACT_IDENTITY); n(e, "relu", NNA_ACT_RELU);
  n(e, "sigmoid", NNA_ACT_SIGMOID); n(e, "tanh", NNA_ACT_TANH); n(e, "softmax", NNA_ACT_SOFTMAX);
  n(e, "z", NNA_Z); n(e, "b", NNA_B); n(e, "w", NNA_W); n(e, "d", NNA_D); n(e, "db", NNA_DB);
  n(e, "dw", NNA_DW); n(e, "mw", NNA_MW); n(e, "mb", NNA_MB); n(e, "vw", NNA_VW); n(e, "vb", NNA_VB);
  n(e, "y", NNA_Y); n(e, "xdata", NNA_XDATA); n(e, "ydata", NNA_YDATA); n(e, "stats", NNA_STATS);
  n(o, "statsCount", NNA_STATS_COUNT);
  Napi::Object st = Napi::Object::New(env);
  n(st, "loss", NNA_STAT_LOSS); n(st, "correct", NNA_STAT_CORRECT); n(st, "rows", NNA_STAT_ROWS);
  n(st, "badStep", NNA_STAT_BAD_STEP); n(st, "lossFixed", NNA_STAT_LOSS_FIXED);
  o.Set("statSlots", st);
  o.Set("enums", e);
  return o;
}

// crc32c(bytes: Uint8Array, crc = 0): CRC-32C continued over bytes.
Napi::Value Crc32c(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsTypedArray()) throwJs(env, "BAD_ARGUMENT", "crc32c expects a Uint8Array");
  const Napi::Uint8Array u = info[0].As<Napi::Uint8Array>();
  const uint32_t crc = info.Length() > 1 ? info[1].As<Napi::Number>().Uint32Value() : 0;
  return Napi::Number::New(env, nna::crc32c(crc, u.Data(), u.ByteLength()));
}

Napi::Value CudaInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const nna::CudaInfo c = nna::cudaInfo();
  Napi::Object o = Napi::Object::New(env);
  o.Set("built", Napi::Boolean::New(env, c.built));
  o.Set("devices", Napi::Number::New(env, c.devices));
  o.Set("why", Napi::String::New(env, c.why));
  o.Set("name", Napi::String::New(env, c.name));
  o.Set("runtimeVersion", Napi::Number::New(env, c.runtimeVersion));
  o.Set("driverVersion", Napi::Number::New(env, c.driverVersion));
  o.Set("computeCapability", Napi::String::New(env, std::to_string(c.ccMajor) + "." + std::to_string(c.ccMinor)));
  o.Set("freeBytes", Napi::Number::New(env, static_cast<double>(c.freeBytes)));
  o.Set("totalBytes", Napi::Number::New(env, static_cast<double>(c.totalBytes)));
  o.Set("gemm", Napi::String::New(env, c.gemm));
  o.Set("archs", Napi::String::New(env, c.archs));            // issue 15: the binary's architectures
  o.Set("noKernelImage", Napi::Boolean::New(env, c.noKernelImage));
  return o;
}


// ---- Training runs: off the JS thread, resolved as a promise --------------------------------
nna::RunParams runParamsOf(Napi::Env env, const Napi::Object o) {
  nna::RunParams p;
  auto u = [&](const char* k, uint64_t& dst) { if (o.Has(k)) dst = exactU64(env, o.Get(k), k); };
  auto d = [&](const char* k, double& dst) {
    if (!o.Has(k)) return;
    if (!o.Get(k).IsNumber()) throwJs(env, "BAD_ARGUMENT", std::string(k) + " must be a number");
    dst = o.Get(k).As<Napi::Number>().DoubleValue();
  };
  uint64_t op = 0, loss = 0;
  u("op", op);
  u("loss", loss);
  p.op = static_cast<nna::Op>(op);
  p.loss = static_cast<nna::Loss>(loss);
  p.resident = o.Get("resident").ToBoolean();
  p.resetStats = !o.Has("resetStats") || o.Get("resetStats").ToBoolean();
  u("rows", p.rows); u("samples", p.samples); u("firstBatch", p.firstBatch); u("numBatches", p.numBatches);
  u("permA", p.permA); u("permC", p.permC); u("stepBase", p.stepBase);
  d("lr", p.lr); d("momentum", p.momentum); d("beta1", p.beta1); d("beta2", p.beta2); d("eps", p.eps);
  return p;
}

class RunWorker : public Napi::AsyncWorker {
 public:
  RunWorker(Napi::Env env, std::shared_ptr<nna::Block> block, const nna::RunParams& p)
      : Napi::AsyncWorker(env, "nn-arena:run"), block_(std::move(block)), p_(p), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise promise() { return deferred_.Promise(); }

  void Execute() override {
    try {
      std::lock_guard<std::mutex> lock(block_->mutex());  // dispose() waits for the run
      if (block_->released()) NNA_FAIL("DISPOSED", "the arena was disposed");
      if (block_->options().cuda && block_->options().budget) path_ = nna::runBudgeted(*block_, p_);
      else if (block_->options().cuda) path_ = nna::runCuda(block_->device(), block_->header(), p_);
      else nna::runCpu(block_->device(), p_);
    } catch (const Failure& e) {
      code_ = e.code;
      SetError(e.what());
    } catch (const std::exception& e) {
      code_ = "INTERNAL";
      SetError(e.what());
    }
  }
  void OnOK() override { deferred_.Resolve(Napi::String::New(Env(), path_)); }
  void OnError(const Napi::Error& e) override {
    Napi::Error err = Napi::Error::New(Env(), e.Message());
    err.Set("code", Napi::String::New(Env(), code_));
    deferred_.Reject(err.Value());
  }

 private:
  std::shared_ptr<nna::Block> block_;
  nna::RunParams p_;
  Napi::Promise::Deferred deferred_;
  std::string code_;
  std::string path_ = "cpu";  // which kernel path ran (resolved to JS)
};

// ---- Residency: the budget check and the plan replay (no GPU needed) ------------------------
nna::Placement placementOf(Napi::Env env, const Napi::Value& v) {
  const std::string s = v.ToString();
  if (s == "managed") return nna::Placement::Managed;
  if (s == "staged") return nna::Placement::Staged;
  throwJs(env, "BAD_ARGUMENT", "placement must be 'managed' or 'staged', got '" + s + "'");
}

const uint8_t* validHeader(Napi::Env env, const Napi::Value& v) {
  if (!v.IsTypedArray()) throwJs(env, "BAD_ARGUMENT", "expected the header as a Uint8Array");
  const Napi::Uint8Array u = v.As<Napi::Uint8Array>();
  const std::string why = nna::validateHeader(u.Data(), u.ByteLength(), SIZE_MAX);
  if (!why.empty()) throwJs(env, "BAD_HEADER", why);
  return u.Data();
}

// minDeviceBudget(header, placement): { bytes, stage, layer } of the smallest usable budget.
Napi::Value MinDeviceBudget(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint8_t* h = validHeader(env, info[0]);
  const nna::Placement placement = placementOf(env, info[1]);
  return guarded(env, [&] {
    const nna::StepModel m(h);
    const uint64_t g = placement == nna::Placement::Managed ? 64 * 1024 : m.header().align;
    nna::PhaseInfo which{};
    m.largestPhase(g, &which);
    Napi::Object o = Napi::Object::New(env);
    o.Set("bytes", Napi::Number::New(env, static_cast<double>(nna::Residency::minBudget(m, placement))));
    o.Set("stage", Napi::String::New(env, nna::stageName(which.stage)));
    o.Set("layer", Napi::Number::New(env, which.layer));
    return o;
  });
}

Napi::Object countersObject(Napi::Env env, const nna::ResidencyCounters& c) {
  Napi::Object o = Napi::Object::New(env);
  auto n = [&](const char* k, uint64_t v) { o.Set(k, Napi::Number::New(env, static_cast<double>(v))); };
  n("runs", c.runs); n("steps", c.steps);
  n("fetches", c.fetches); n("fetchedBytes", c.fetchedBytes); n("placedBytes", c.placedBytes);
  n("writeBacks", c.writeBacks); n("writtenBackBytes", c.writtenBackBytes);
  n("drops", c.drops); n("droppedBytes", c.droppedBytes);
  n("compactions", c.compactions); n("peakScheduledBytes", c.peakScheduledBytes);
  return o;
}

// replayResidency(header, placement, budget, runs[], blas?): the plan of those runs replayed against
// a model of where every region's bytes are valid (csrc/budget/residency_check.cc).
Napi::Value ReplayResidency(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint8_t* h = validHeader(env, info[0]);
  const nna::Placement placement = placementOf(env, info[1]);
  const uint64_t budget = exactU64(env, info[2], "budget");
  if (!info[3].IsArray()) throwJs(env, "BAD_ARGUMENT", "runs must be an array of run parameters");
  const Napi::Array a = info[3].As<Napi::Array>();
  std::vector<nna::RunParams> runs;
  for (uint32_t i = 0; i < a.Length(); ++i) runs.push_back(runParamsOf(env, a.Get(i).As<Napi::Object>()));
  return guarded(env, [&] {
    for (const nna::RunParams& p : runs) nna::checkRun(h, p);
    const nna::ResidencyReplay r = nna::replayResidency(h, placement, budget, runs, info.Length() > 4 && info[4].ToBoolean());
    Napi::Object o = Napi::Object::New(env);
    o.Set("error", Napi::String::New(env, r.error));
    o.Set("phases", Napi::Number::New(env, static_cast<double>(r.phases)));
    o.Set("counters", countersObject(env, r.counters));
    return o;
  });
}

// measureLink(bytes): host <-> device rates by method (bench/um.ts).
Napi::Value MeasureLink(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint64_t bytes = exactU64(env, info[0], "bytes");
  const nna::LinkRates r = guarded(env, [&] { return nna::measureLink(size_t(bytes)); });
  Napi::Object o = Napi::Object::New(env);
  auto n = [&](const char* k, double v) { o.Set(k, Napi::Number::New(env, v)); };
  n("bytes", double(bytes));
  n("copyToDevice", r.copyToDevice); n("copyToHost", r.copyToHost);
  n("prefetchToDevice", r.prefetchToDevice); n("prefetchToHost", r.prefetchToHost); n("prefetchToHost4", r.prefetchToHost4);
  n("prefetchRetainedBytes", double(r.prefetchRetainedBytes));
  n("discardToHost", r.discardToHost); n("discardToDevice", r.discardToDevice); n("discardOnly", r.discardOnly);
  n("discardFreedBytes", double(r.discardFreedBytes));
  o.Set("discard", Napi::String::New(env, r.discard));
  return o;
}

// ---- ArenaHandle ---------------------------------------------------------------------------
class ArenaHandle : public Napi::ObjectWrap<ArenaHandle> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "ArenaHandle",
                       {InstanceMethod<&ArenaHandle::Transfer>("transfer"),
                        InstanceMethod<&ArenaHandle::TransferAll>("transferAll"),
                        InstanceMethod<&ArenaHandle::Prefetch>("prefetch"),
                        InstanceMethod<&ArenaHandle::Advise>("advise"),
                        InstanceMethod<&ArenaHandle::View>("view"),
                        InstanceMethod<&ArenaHandle::Stats>("stats"),
                        InstanceMethod<&ArenaHandle::Dispose>("dispose"),
                        InstanceMethod<&ArenaHandle::Addresses>("addresses"),
                        InstanceMethod<&ArenaHandle::ProbeBind>("probeBind"),
                        InstanceMethod<&ArenaHandle::DeviceHeader>("deviceHeader"),
                        InstanceMethod<&ArenaHandle::Run>("run"),
                        InstanceMethod<&ArenaHandle::Residency>("residency")});
  }

  // new ArenaHandle(header: Uint8Array, { cuda, pinned, managed })
  ArenaHandle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ArenaHandle>(info) {
    Napi::Env env = info.Env();
    if (!info[0].IsTypedArray() || !info[1].IsObject()) throwJs(env, "BAD_ARGUMENT", "ArenaHandle(header: Uint8Array, options)");
    const Napi::Uint8Array header = info[0].As<Napi::Uint8Array>();
    const Napi::Object opts = info[1].As<Napi::Object>();
    const std::string why = nna::validateHeader(header.Data(), header.ByteLength(), SIZE_MAX);
    if (!why.empty()) throwJs(env, "BAD_HEADER", why);
    nna_header h;
    std::memcpy(&h, header.Data(), sizeof h);
    nna::BlockOptions o;
    o.cuda = opts.Get("cuda").ToBoolean();
    o.pinned = opts.Get("pinned").ToBoolean();
    o.memory = opts.Get("staged").ToBoolean() ? nna::Memory::Staged : opts.Get("managed").ToBoolean() ? nna::Memory::Managed : nna::Memory::Device;
    if (opts.Has("budget")) o.budget = exactU64(env, opts.Get("budget"), "budget");
    o.scheduled = !opts.Has("scheduled") || opts.Get("scheduled").ToBoolean();
    const size_t headerBytes = std::min<size_t>(header.ByteLength(), h.header_bytes);
    block_ = guarded(env, [&] { return std::make_shared<nna::Block>(h.total_bytes, header.Data(), headerBytes, o); });
    numLayers_ = h.num_layers;
    external_ = static_cast<int64_t>(h.total_bytes);
    Napi::MemoryManagement::AdjustExternalMemory(env, external_);
  }

  void Finalize(Napi::Env env) override { releaseExternal(env); }

 private:
  nna::Block& live(Napi::Env env) {
    if (!block_ || block_->released()) throwJs(env, "DISPOSED", "the arena was disposed");
    return *block_;
  }
  void releaseExternal(Napi::Env env) {
    if (external_) Napi::MemoryManagement::AdjustExternalMemory(env, -external_);
    external_ = 0;
  }

  Napi::Value Transfer(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    nna::Block& b = live(env);
    const std::string dir = info[0].ToString();
    const auto ranges = rangesOf(env, info[1]);
    const uint64_t moved = guarded(env, [&] { return b.transfer(ranges, dir == "toDevice" ? nna::Dir::ToDevice : nna::Dir::ToHost); });
    return Napi::Number::New(env, static_cast<double>(moved));
  }

  // transferAll(dir): the whole arena as one transfer, without marshalling a range list.
  Napi::Value TransferAll(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    nna::Block& b = live(env);
    const bool toDevice = info[0].ToString().Utf8Value() == "toDevice";
    const std::vector<nna::Range> all{{0, b.total()}};
    const uint64_t moved = guarded(env, [&] { return b.transfer(all, toDevice ? nna::Dir::ToDevice : nna::Dir::ToHost); });
    return Napi::Number::New(env, static_cast<double>(moved));
  }

  static nna::Where whereOf(Napi::Env env, const Napi::Value& v) {
    const std::string w = v.ToString();
    if (w == "device") return nna::Where::Device;
    if (w == "host") return nna::Where::Host;
    throwJs(env, "BAD_ARGUMENT", "location must be 'device' or 'host', got '" + w + "'");
  }

  Napi::Value Prefetch(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    nna::Block& b = live(env);
    const auto ranges = rangesOf(env, info[0]);
    const nna::Where where = whereOf(env, info[1]);
    guarded(env, [&] { b.prefetch(ranges, where); });
    return env.Undefined();
  }

  Napi::Value Advise(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    nna::Block& b = live(env);
    const auto ranges = rangesOf(env, info[0]);
    const std::string a = info[1].ToString();
    nna::Advice advice;
    if (a == "readMostly") advice = nna::Advice::ReadMostly;
    else if (a == "preferredLocation") advice = nna::Advice::PreferredLocation;
    else if (a == "accessedBy") advice = nna::Advice::AccessedBy;
    else throwJs(env, "BAD_ARGUMENT", "unknown advice '" + a + "'");
    const nna::Where where = whereOf(env, info[2]);
    const bool unset = info[3].ToBoolean();
    guarded(env, [&] { b.advise(ranges, advice, where, unset); });
    return env.Undefined();
  }

  // An ArrayBuffer over [offset, offset+bytes) of the host allocation. It shares ownership of
  // the block (a forgotten arena is not freed under a live view) and is detached by dispose().
  Napi::Value View(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    nna::Block& b = live(env);
    const uint64_t offset = exactU64(env, info[0], "offset"), bytes = exactU64(env, info[1], "bytes");
    if (offset > b.total() || bytes > b.total() - offset) throwJs(env, "OUT_OF_RANGE", "view outside the arena");
    if (bytes > (uint64_t(1) << 32) - 1)
      throwJs(env, "VIEW_TOO_LARGE", "a view of " + std::to_string(bytes) + " bytes exceeds the 4 GiB limit of one ArrayBuffer; view a smaller region");
    auto* hint = new std::shared_ptr<nna::Block>(block_);
    Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(
        env, b.host() + offset, static_cast<size_t>(bytes),
        [](Napi::Env, void*, std::shared_ptr<nna::Block>* h) { delete h; }, hint);
    // Drop references to views the GC already collected, then remember this one (weakly).
    std::vector<Napi::Reference<Napi::ArrayBuffer>> alive;
    for (auto& r : views_) if (!r.Value().IsEmpty()) alive.push_back(std::move(r));
    views_ = std::move(alive);
    views_.push_back(Napi::Reference<Napi::ArrayBuffer>::New(ab, 0));
    return ab;
  }

  Napi::Value Stats(const Napi::CallbackInfo& info) { return statsObject(info.Env(), block_ ? block_->stats() : finalStats_); }

  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!block_ || block_->released()) return Napi::Boolean::New(env, false);
    for (auto& r : views_) {
      Napi::Value v = r.Value();
      if (!v.IsEmpty() && v.IsArrayBuffer() && !v.As<Napi::ArrayBuffer>().IsDetached()) v.As<Napi::ArrayBuffer>().Detach();
    }
    views_.clear();
    guarded(env, [&] { block_->release(); });
    releaseExternal(env);
    // Drop the block now rather than at finalization: a disposed handle keeps only its counters.
    finalStats_ = block_->stats();
    block_.reset();
    return Napi::Boolean::New(env, true);
  }

  Napi::Value Addresses(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    nna::Block& b = live(env);
    Napi::Object o = Napi::Object::New(env);
    o.Set("host", Napi::BigInt::New(env, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(b.host()))));
    o.Set("device", Napi::BigInt::New(env, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(b.device()))));
    return o;
  }

  // Offsets that binding code computes from the device-side base alone (kernel on CUDA, the
  // same inline function on the CPU backend's stand-in device buffer).
  Napi::Value ProbeBind(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    nna::Block& b = live(env);
    Napi::BigUint64Array out = Napi::BigUint64Array::New(env, size_t(numLayers_) * NNA_KIND_COUNT);
    guarded(env, [&] {
      std::lock_guard<std::mutex> lock(b.mutex());
      if (b.options().cuda) return nna::cudaProbeBind(b.device(), numLayers_, out.Data());
      for (uint32_t l = 0; l < numLayers_; ++l) {
        const nna_bound_layer<float> p = nna_bind<float>(b.device(), l);
        float* ptrs[NNA_KIND_COUNT] = {p.z, p.b, p.w, p.d, p.db, p.dw, p.mw, p.mb, p.vw, p.vb, p.y, p.xdata, p.ydata, p.stats};
        for (uint32_t k = 0; k < NNA_KIND_COUNT; ++k)
          out.Data()[l * NNA_KIND_COUNT + k] = ptrs[k] ? uint64_t(reinterpret_cast<char*>(ptrs[k]) - reinterpret_cast<char*>(b.device())) : ~uint64_t(0);
      }
    });
    return out;
  }

  // Decodes the header as it stands in device memory (copied back without touching the host
  // allocation or the counters): proof the device holds the same header the TS encoder wrote.
  Napi::Value DeviceHeader(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    nna::Block& b = live(env);
    nna_header h;
    std::vector<uint8_t> bytes;
    guarded(env, [&] {
      std::lock_guard<std::mutex> lock(b.mutex());
      b.backend().copy(&h, b.device(), sizeof h, nna::Dir::ToHost);
      if (h.header_bytes > b.total() || h.header_bytes < sizeof h) NNA_FAIL("BAD_HEADER", "device header is not initialised (call toDevice first)");
      bytes.resize(h.header_bytes);
      b.backend().copy(bytes.data(), b.device(), bytes.size(), nna::Dir::ToHost);
    });
    return decodeHeaderAt(env, bytes.data(), bytes.size());
  }

  // run(params): one training / evaluation run; resolves when the device work is complete.
  Napi::Value Run(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    live(env);
    if (!info[0].IsObject()) throwJs(env, "BAD_ARGUMENT", "run(params: object)");
    auto* w = new RunWorker(env, block_, runParamsOf(env, info[0].As<Napi::Object>()));
    Napi::Promise promise = w->promise();
    w->Queue();
    return promise;
  }

  // residency(): where each region is (managed: where it was last prefetched, asked of the
  // driver; staged: pool or host), the plan's counters and the device memory measured.
  Napi::Value Residency(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    nna::Block& b = live(env);
    const nna::Residency* res = b.residency();
    if (!res) throwJs(env, "NOT_SUPPORTED", "a residency report needs an arena with a device budget (memory 'managed' or 'staged')");
    Napi::Object o = Napi::Object::New(env);
    auto num = [&](Napi::Object t, const char* k, uint64_t v) { t.Set(k, Napi::Number::New(env, static_cast<double>(v))); };
    guarded(env, [&] {
      std::lock_guard<std::mutex> lock(b.mutex());
      const bool staged = b.options().memory == nna::Memory::Staged;
      o.Set("placement", Napi::String::New(env, staged ? "staged" : b.options().scheduled ? "scheduler" : "on-demand"));
      num(o, "budget", b.options().budget);
      num(o, "granule", res->granule());
      const nna::DeviceMeter& m = b.meter();
      o.Set("measured", Napi::Boolean::New(env, m.hasBaseline && m.samples > 0));
      num(o, "baselineDeviceBytes", m.baseline);
      num(o, "peakDeviceInUse", m.peakInUse);
      // The arena's share of the device at the peak: what was in use beyond the baseline (the
      // staged pool is allocated with the arena, so it is in the baseline's complement).
      num(o, "peakDeviceBytes", m.hasBaseline && m.peakInUse > m.baseline ? m.peakInUse - m.baseline : 0);
      num(o, "samples", m.samples);
      num(o, "waitMicros", m.waitMicros);
      num(o, "fetchMicros", m.fetchMicros);
      num(o, "evictMicros", m.evictMicros);
      num(o, "scheduledBytes", res->used());
      o.Set("lastRun", countersObject(env, res->lastRun));
      o.Set("total", countersObject(env, res->total));
      const auto& regions = res->model().regions();
      Napi::Array list = Napi::Array::New(env, regions.size());
      for (uint32_t r = 0; r < regions.size(); ++r) {
        const nna::RegionInfo& ri = regions[r];
        Napi::Object e = Napi::Object::New(env);
        num(e, "layer", ri.layer);
        num(e, "kind", ri.kind);
        num(e, "offset", ri.offset);
        num(e, "bytes", ri.bytes);
        e.Set("resident", Napi::Boolean::New(env, res->state()[r].resident));
        if (staged) e.Set("location", Napi::String::New(env, ri.remote ? "host (read in place)" : res->state()[r].resident ? "device" : "host"));
        else e.Set("lastPrefetch", Napi::String::New(env, nna::managedLastPrefetch(b.device() + ri.offset, ri.bytes)));
        list.Set(r, e);
      }
      o.Set("regions", list);
    });
    return o;
  }

  std::shared_ptr<nna::Block> block_;
  nna::Stats finalStats_;
  std::vector<Napi::Reference<Napi::ArrayBuffer>> views_;
  uint32_t numLayers_ = 0;
  int64_t external_ = 0;
};


// ---- CopyBenchHandle: baselines for bench/transfers.ts --------------------------------------
class CopyBenchHandle : public Napi::ObjectWrap<CopyBenchHandle> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "CopyBench", {InstanceMethod<&CopyBenchHandle::Run>("run"), InstanceMethod<&CopyBenchHandle::Dispose>("dispose")});
  }
  // new CopyBench(cuda: boolean, sizes: number[], pinned: boolean)
  CopyBenchHandle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<CopyBenchHandle>(info) {
    Napi::Env env = info.Env();
    if (!info[1].IsArray()) throwJs(env, "BAD_ARGUMENT", "CopyBench(cuda, sizes[], pinned)");
    const Napi::Array a = info[1].As<Napi::Array>();
    std::vector<size_t> sizes;
    for (uint32_t i = 0; i < a.Length(); ++i) sizes.push_back(static_cast<size_t>(exactU64(env, a.Get(i), "size")));
    const bool cuda = info[0].ToBoolean(), pinned = info[2].ToBoolean();
    bench_ = guarded(env, [&] { return std::make_unique<nna::CopyBench>(cuda, sizes, pinned); });
  }

 private:
  Napi::Value Run(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!bench_) throwJs(env, "DISPOSED", "the copy bench was disposed");
    const bool toDevice = info[0].ToString().Utf8Value() == "toDevice";
    return Napi::Number::New(env, static_cast<double>(guarded(env, [&] { return bench_->run(toDevice ? nna::Dir::ToDevice : nna::Dir::ToHost); })));
  }
  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    bench_.reset();
    return info.Env().Undefined();
  }
  std::unique_ptr<nna::CopyBench> bench_;
};

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("ArenaHandle", ArenaHandle::Define(env));
  exports.Set("CopyBench", CopyBenchHandle::Define(env));
  exports.Set("decodeHeader", Napi::Function::New(env, DecodeHeader));
  exports.Set("validateHeader", Napi::Function::New(env, ValidateHeader));
  exports.Set("layoutInfo", Napi::Function::New(env, LayoutInfo));
  exports.Set("cudaInfo", Napi::Function::New(env, CudaInfo));
  exports.Set("crc32c", Napi::Function::New(env, Crc32c));
  exports.Set("minDeviceBudget", Napi::Function::New(env, MinDeviceBudget));
  exports.Set("replayResidency", Napi::Function::New(env, ReplayResidency));
  exports.Set("measureLink", Napi::Function::New(env, MeasureLink));
  return exports;
}

}  // namespace

NODE_API_MODULE(nn_arena, Init)
