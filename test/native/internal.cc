// internal.cc: the test addon (nn_arena_test, built from test/native/ into build/Release/test/;
// never shipped): native functions that only tests and benchmarks call, typed and loaded by
// src/internal.ts. The native decoder (the header read through the C structs, for the round trip
// of what the TS encoder writes), the residency replay, the phase table of a header, probes of an arena's device side
// (from its address, as a user's module sees it), JIT compiles without a device, and the bench
// baselines. It links the library sources it calls (scripts/sources.cjs TEST_USES).
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../csrc/addon/convert.h"
#include "../../csrc/addon/fault_guard.h"
#include "../../csrc/addon/functions.h"
#include "../../csrc/addon/js_error.h"
#include "../../csrc/addon/phases_js.h"
#include "../../csrc/budget/residency_check.h"
#include "../../csrc/core/validate.h"
#include "../../csrc/cuda/jit.h"
#include "../../csrc/include/nn_arena.h"
#include "../../csrc/train/aliasing.h"
#include "../../csrc/train/phases.h"
#include "../../csrc/train/run_modes.h"
#include "copy_bench.h"
#include "device_probe.h"
#include "link_bench.h"

namespace nna::addon {

namespace {

Napi::Value decodeHeaderAt(Napi::Env env, const uint8_t* p, size_t readable) {
  const std::string why = validateArena(p, readable, SIZE_MAX);
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
  o.Set("flags", big(h.flags));
  o.Set("models", big(h.models));
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
  // The kind table, read through the public header's functions (what a user's module calls).
  const uint32_t n = nna_extra_count(p);
  Napi::Array extras = Napi::Array::New(env, n);
  for (uint32_t i = 0; i < n; ++i) {
    const nna_extra* e = nna_extra_at(p, i);
    Napi::Object eo = Napi::Object::New(env);
    eo.Set("name", Napi::String::New(env, nna_extra_name(p, i)));
    eo.Set("found", Napi::Number::New(env, nna_extra_find(p, nna_extra_name(p, i))));
    eo.Set("rule", Napi::Number::New(env, e->rule));
    eo.Set("like", Napi::Number::New(env, e->like));
    eo.Set("elemBytes", Napi::Number::New(env, e->elem_bytes));
    Napi::Array regions = Napi::Array::New(env, e->entries);
    for (uint32_t l = 0; l < e->entries; ++l) {
      const nna_region* r = nna_extra_region(p, i, l);
      Napi::Array ra = Napi::Array::New(env, 2);
      ra.Set(0u, big(r->offset));
      ra.Set(1u, big(nna_extra_elems(p, i, l)));
      regions.Set(l, ra);
    }
    eo.Set("regions", regions);
    extras.Set(i, eo);
  }
  o.Set("extras", extras);
  return o;
}

Napi::Value DecodeHeader(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::vector<uint8_t> bytes = bytesOf(env, info[0], "header");
  return decodeHeaderAt(env, bytes.data(), bytes.size());
}

// replayResidency(header, placement, budget, runs[]): the plan of those runs replayed against
// a model of where every region's bytes are valid (csrc/budget/residency_check.cc).
Napi::Value ReplayResidency(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::vector<uint8_t> h = validatedHeader(env, info[0]);
  const Placement placement = placementOf(env, info[1]);
  const uint64_t budget = exactU64(env, info[2], "budget");
  if (!info[3].IsArray()) throwJs(env, "BAD_ARGUMENT", "runs must be an array of run parameters");
  const Napi::Array a = info[3].As<Napi::Array>();
  std::vector<RunParams> runs;
  for (uint32_t i = 0; i < a.Length(); ++i) runs.push_back(runParamsOf(env, a.Get(i)));
  return guarded(env, [&] {
    for (const RunParams& p : runs) checkRun(h.data(), p);
    const ResidencyReplay r = replayResidency(h.data(), placement, budget, runs);
    Napi::Object o = Napi::Object::New(env);
    o.Set("error", Napi::String::New(env, r.error));
    o.Set("phases", Napi::Number::New(env, static_cast<double>(r.phases)));
    o.Set("counters", countersObject(env, r.counters));
    return o;
  });
}

// headerPhases(header, op, resident, fused): the phase table (phases.h) of a planned header, which
// test/compact.test.ts compares with the shipped addon's stepPhases of the spec's shape (what the
// planner reads); the same conversion (phases_js.h).
Napi::Value HeaderPhases(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::vector<uint8_t> h = validatedHeader(env, info[0]);
  return phasesOf(env, h.data(), info);
}

// runModes(inputs): the per-layer CUDA path's modes (csrc/train/run_modes.h) for an object of
// RunModeInputs' fields (precision by name, op by code; an absent field keeps its default).
Napi::Value RunModesOf(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsObject()) throwJs(env, "BAD_ARGUMENT", "inputs must be an object");
  const Napi::Object o = info[0].As<Napi::Object>();
  RunModeInputs in;
  auto flag = [&](const char* k, bool& v) {
    if (o.Has(k)) v = o.Get(k).ToBoolean().Value();
  };
  auto count = [&](const char* k, auto& v) {
    if (o.Has(k)) v = static_cast<std::remove_reference_t<decltype(v)>>(exactU64(env, o.Get(k), k));
  };
  flag("floatRun", in.floatRun);
  if (o.Has("precision")) {
    const std::string name = o.Get("precision").ToString().Utf8Value();
    const PrecisionInfo* row = nullptr;
    for (const PrecisionInfo& r : kPrecisions)
      if (name == r.name) row = &r;
    if (!row) throwJs(env, "BAD_ARGUMENT", "unknown precision " + name);
    in.precision = row->code;
  }
  if (o.Has("op")) in.op = static_cast<Op>(exactU64(env, o.Get("op"), "op"));
  count("models", in.models);
  count("layers", in.layers);
  count("outputUnits", in.outputUnits);
  count("numBatches", in.numBatches);
  for (auto [k, v] : {std::pair<const char*, bool*>{"blas", &in.blas},
                      {"ops", &in.ops},
                      {"compact", &in.compact},
                      {"hooks", &in.hooks},
                      {"sync", &in.sync},
                      {"syncGraphs", &in.syncGraphs},
                      {"cache", &in.cache},
                      {"lossScale", &in.lossScale},
                      {"sideStream", &in.sideStream},
                      {"ltAvailable", &in.ltAvailable},
                      {"cublasLtOn", &in.cublasLtOn},
                      {"sideStreamKnob", &in.sideStreamKnob},
                      {"cudaGraphKnob", &in.cudaGraphKnob}})
    flag(k, *v);
  if (o.Has("cublasLt")) in.cublasLt = o.Get("cublasLt").ToString().Utf8Value();
  const RunModes m = resolveRunModes(in);
  Napi::Object r = Napi::Object::New(env);
  for (auto [k, v] : {std::pair<const char*, bool>{"half", m.half},
                      {"crossBias", m.crossBias},
                      {"crossPhase", m.crossPhase},
                      {"stepsTogether", m.stepsTogether},
                      {"lt", m.lt},
                      {"ltForward", m.ltForward},
                      {"besides", m.besides},
                      {"head", m.head},
                      {"headFused", m.headFused},
                      {"scaling", m.scaling},
                      {"headRounds", m.headRounds},
                      {"biasInOutput", m.biasInOutput},
                      {"graphs", m.graphs}})
    r.Set(k, Napi::Boolean::New(env, v));
  return r;
}

Napi::Value MeasureLink(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint64_t bytes = exactU64(env, info[0], "bytes");
  const LinkRates r = guarded(env, [&] { return measureLink(size_t(bytes)); });
  Napi::Object o = Napi::Object::New(env);
  auto n = [&](const char* k, double v) { o.Set(k, Napi::Number::New(env, v)); };
  n("bytes", double(bytes));
  n("copyToDevice", r.copyToDevice);
  n("copyToHost", r.copyToHost);
  n("prefetchToDevice", r.prefetchToDevice);
  n("prefetchToHost", r.prefetchToHost);
  n("prefetchToHost4", r.prefetchToHost4);
  n("prefetchRetainedBytes", double(r.prefetchRetainedBytes));
  n("discardToHost", r.discardToHost);
  n("discardToDevice", r.discardToDevice);
  n("discardOnly", r.discardOnly);
  n("discardFreedBytes", double(r.discardFreedBytes));
  o.Set("discard", Napi::String::New(env, r.discard));
  return o;
}

void* addressOf(Napi::Env env, const Napi::Value& v) {
  bool lossless = false;
  const uint64_t a = v.IsBigInt() ? v.As<Napi::BigInt>().Uint64Value(&lossless) : 0;
  if (!lossless || a == 0) throwJs(env, "BAD_ARGUMENT", "address must be a non-zero BigInt (arena.deviceAddress)");
  return reinterpret_cast<void*>(uintptr_t(a));
}

// probeBind(deviceAddress, layers, cuda): the offsets that binding code computes from the device
// side's base alone (a kernel on CUDA; nna_bind on the CPU backend's stand-in device buffer).
Napi::Value ProbeBind(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  void* base = addressOf(env, info[0]);
  const uint64_t layers = exactU64(env, info[1], "layers");
  if (layers > NNA_MAX_LAYERS) throwJs(env, "BAD_ARGUMENT", "layers above NNA_MAX_LAYERS");
  const bool cuda = boolean(env, info[2], "cuda");
  Napi::BigUint64Array out = Napi::BigUint64Array::New(env, size_t(layers) * NNA_KIND_COUNT);
  guarded(env, [&] {
    if (cuda) return probeBindOnDevice(base, uint32_t(layers), out.Data());
    for (uint32_t l = 0; l < layers; ++l) {
      const nna_bound_layer<float> p = nna_bind<float>(base, l);
      float* ptrs[NNA_KIND_COUNT] = {p.z, p.b, p.w, p.d, p.db, p.dw, p.mw, p.mb, p.vw, p.vb, p.y, p.xdata, p.ydata, p.stats};
      for (uint32_t k = 0; k < NNA_KIND_COUNT; ++k)
        out.Data()[l * NNA_KIND_COUNT + k] = ptrs[k] ? uint64_t(reinterpret_cast<char*>(ptrs[k]) - reinterpret_cast<char*>(base)) : ~uint64_t(0);
    }
  });
  return out;
}

// deviceHeader(deviceAddress, totalBytes, cuda): the header as it stands on the device side,
// decoded: proof the device holds what the TS encoder wrote (nothing of the arena is touched).
Napi::Value DeviceHeader(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const void* base = addressOf(env, info[0]);
  const uint64_t total = exactU64(env, info[1], "totalBytes");
  const bool cuda = boolean(env, info[2], "cuda");
  std::vector<uint8_t> bytes;
  guarded(env, [&] {
    auto read = [&](void* dst, size_t n) {
      if (cuda)
        copyFromDevice(dst, base, n);
      else
        std::memcpy(dst, base, n);
    };
    nna_header h;
    read(&h, sizeof h);
    if (h.header_bytes > total || h.header_bytes < sizeof h) NNA_FAIL("BAD_HEADER", "device header is not initialised (call toDevice first)");
    bytes.resize(size_t(h.header_bytes));
    read(bytes.data(), bytes.size());
  });
  return decodeHeaderAt(env, bytes.data(), bytes.size());
}

// jitCompileOnly(source, name, params, header, arch): the CUBIN's size; no device needed.
Napi::Value JitCompileOnly(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::string source = string(env, info[0], "source"), name = string(env, info[1], "name");
  const std::vector<JitType> params = typesOf(env, info[2]);
  const std::string header = string(env, info[3], "header"), arch = string(env, info[4], "arch");
  return Napi::Number::New(env, double(guarded(env, [&] { return jitCompileOnly(source, name, params, header, arch); })));
}

// mappedReadAfterCut(path): maps the file's first two pages, cuts the file to nothing, then
// copies the mapping inside guardMappedReads (which must return false: the pages are past the
// file's end) and once more outside a fault (an empty guarded read: true). [guarded, after].
Napi::Value MappedReadAfterCut(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::string path = string(env, info[0], "path");
  const int fd = open(path.c_str(), O_RDWR);
  if (fd < 0) throwJs(env, "BAD_FILE", "cannot open the probe file");
  const size_t bytes = size_t(2 * sysconf(_SC_PAGESIZE));
  void* m = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    close(fd);
    throwJs(env, "BAD_FILE", "cannot map the probe file");
  }
  std::vector<char> out(bytes);
  const bool cut = ftruncate(fd, 0) == 0;
  const bool first = guardMappedReads([&] { std::memcpy(out.data(), m, bytes); });
  const bool second = guardMappedReads([] {});
  munmap(m, bytes);
  close(fd);
  if (!cut) throwJs(env, "BAD_FILE", "cannot cut the probe file");
  Napi::Array r = Napi::Array::New(env, 2);
  r.Set(uint32_t(0), Napi::Boolean::New(env, first));
  r.Set(uint32_t(1), Napi::Boolean::New(env, second));
  return r;
}

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
    const bool cuda = boolean(env, info[0], "cuda"), pinned = boolean(env, info[2], "pinned");
    bench_ = guarded(env, [&] { return std::make_unique<CopyBench>(cuda, sizes, pinned); });
  }

 private:
  Napi::Value Run(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!bench_) throwJs(env, "DISPOSED", "the copy bench was disposed");
    const Dir dir = dirOf(env, info[0]);
    return Napi::Number::New(env, static_cast<double>(guarded(env, [&] { return bench_->run(dir); })));
  }
  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    bench_.reset();
    return info.Env().Undefined();
  }
  std::unique_ptr<CopyBench> bench_;
};

}  // namespace

Napi::Object Init(Napi::Env env, Napi::Object o) {
  exportFunctions(env, o,
                  {{"decodeHeader", DecodeHeader},
                   {"replayResidency", ReplayResidency},
                   {"measureLink", MeasureLink},
                   {"headerPhases", HeaderPhases},
                   {"runModes", RunModesOf},
                   {"probeBind", ProbeBind},
                   {"jitCompileOnly", JitCompileOnly},
                   {"deviceHeader", DeviceHeader},
                   {"mappedReadAfterCut", MappedReadAfterCut}});
  o.Set("CopyBench", CopyBenchHandle::Define(env));
  return o;
}

}  // namespace nna::addon

namespace {
Napi::Object Init(Napi::Env env, Napi::Object exports) { return nna::addon::Init(env, exports); }
}  // namespace

NODE_API_MODULE(nn_arena_test, Init)
