#include "arena_handle.h"

#include <cstring>
#include <mutex>

#include "../budget/budgeted_block.h"
#include "addon_data.h"
#include "convert.h"
#include "inline_run.h"
#include "checked_copy.h"
#include "js_error.h"
#include "../train/run_outputs.h"

namespace nna::addon {

Napi::Function ArenaHandle::Define(Napi::Env env) {
  return DefineClass(
      env, "ArenaHandle",
      {InstanceMethod<&ArenaHandle::Transfer>("transfer"), InstanceMethod<&ArenaHandle::TransferAll>("transferAll"), InstanceMethod<&ArenaHandle::Prefetch>("prefetch"),
       InstanceMethod<&ArenaHandle::Advise>("advise"), InstanceMethod<&ArenaHandle::View>("view"), InstanceMethod<&ArenaHandle::Stats>("stats"),
       InstanceMethod<&ArenaHandle::Dispose>("dispose"), InstanceMethod<&ArenaHandle::Addresses>("addresses"), InstanceMethod<&ArenaHandle::Run>("run"),
       InstanceMethod<&ArenaHandle::RunQueued>("runQueued"), InstanceMethod<&ArenaHandle::RunInline>("runInline"), InstanceMethod<&ArenaHandle::PredictRows>("predictRows"),
       InstanceMethod<&ArenaHandle::Residency>("residency"), InstanceMethod<&ArenaHandle::GradNorms>("gradNorms"), InstanceMethod<&ArenaHandle::LossScaleState>("lossScale"),
       InstanceMethod<&ArenaHandle::GraphSteps>("graphSteps"), InstanceMethod<&ArenaHandle::Epilogues>("epilogues"), InstanceMethod<&ArenaHandle::Synchronize>("synchronize")});
}

ArenaHandle::ArenaHandle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ArenaHandle>(info) {
  Napi::Env env = info.Env();
  std::vector<uint8_t> header = validatedHeader(env, info[0]);
  BlockOptions options;
  Budget budget;
  arenaOptionsOf(env, info[1], &options, &budget);
  nna_header h;
  std::memcpy(&h, header.data(), sizeof h);
  block_ = guarded(env, [&] { return BudgetedBlock::create(std::move(header), options, budget); });
  numLayers_ = h.num_layers;
  external_ = static_cast<int64_t>(h.total_bytes);
  Napi::MemoryManagement::AdjustExternalMemory(env, external_);
}

void ArenaHandle::Finalize(Napi::BasicEnv env) {
  block_.reset();  // freed now unless a run still holds it
  comm_.reset();
  releaseExternal(env);
}

void ArenaHandle::Finalize(Napi::Env) {}

void ArenaHandle::releaseExternal(Napi::BasicEnv env) {
  if (external_) Napi::MemoryManagement::AdjustExternalMemory(env, -external_);
  external_ = 0;
}

// The symbol under which a view holds its handle (one per environment: addon_data.h).
Napi::Symbol ArenaHandle::owner(Napi::Env env) { return env.GetInstanceData<AddonData>()->viewOwner.Value(); }

// On the JS thread, from a run's (or launch's) OnOK / OnError.
void ArenaHandle::runEnded() {
  if (--runsInFlight_ || idleWaiters_.empty()) return;
  std::vector<Napi::Promise::Deferred> waiters = std::move(idleWaiters_);
  idleWaiters_.clear();
  for (auto& d : waiters) {
    try {
      d.Resolve(d.Env().Undefined());
    } catch (...) {  // the environment is shutting down
    }
  }
}

// synchronize(): a promise resolved once no run or launch is in flight on this arena. Nothing
// else can be pending then: a run drains its stream before it resolves and transfers are
// synchronous, so the arena leaves no device work queued behind an idle handle. Waiting is
// allowed after dispose() (the run in flight still ends); nothing in flight resolves at once.
Napi::Value ArenaHandle::Synchronize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Promise::Deferred d = Napi::Promise::Deferred::New(env);
  if (runsInFlight_ == 0)
    d.Resolve(env.Undefined());
  else
    idleWaiters_.push_back(d);
  return d.Promise();
}

std::shared_ptr<Block> ArenaHandle::live(Napi::Env env, bool idle) const {
  if (!block_ || block_->released()) throwJs(env, "DISPOSED", "the arena was disposed");
  if (idle && runsInFlight_) throwJs(env, "BUSY", "a run is in flight on this arena; await it before transferring or inspecting");
  return block_;
}

Napi::Value ArenaHandle::Transfer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Dir dir = dirOf(env, info[0]);
  const std::vector<Range> ranges = rangesOf(env, info[1]);
  const std::shared_ptr<Block> b = live(env, true);
  return Napi::Number::New(env, static_cast<double>(guarded(env, [&] { return b->transfer(ranges, dir); })));
}

// transferAll(dir): the whole arena as one transfer, without marshalling a range list.
Napi::Value ArenaHandle::TransferAll(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Dir dir = dirOf(env, info[0]);
  const std::shared_ptr<Block> b = live(env, true);
  const std::vector<Range> all{{0, b->total()}};
  return Napi::Number::New(env, static_cast<double>(guarded(env, [&] { return b->transfer(all, dir); })));
}

Napi::Value ArenaHandle::Prefetch(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::vector<Range> ranges = rangesOf(env, info[0]);
  const Where where = whereOf(env, info[1]);
  const std::shared_ptr<Block> b = live(env, true);
  guarded(env, [&] { b->prefetch(ranges, where); });
  return env.Undefined();
}

Napi::Value ArenaHandle::Advise(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::vector<Range> ranges = rangesOf(env, info[0]);
  const Advice advice = adviceOf(env, info[1]);
  const Where where = whereOf(env, info[2]);
  const bool unset = boolean(env, info[3], "unset");
  const std::shared_ptr<Block> b = live(env, true);
  guarded(env, [&] { b->advise(ranges, advice, where, unset); });
  return env.Undefined();
}

// An ArrayBuffer over [offset, offset+bytes) of the host allocation, detached by dispose(). It
// keeps this handle reachable (a hidden property), so a live view keeps the memory: the handle's
// finalizer, which frees it, runs only once no view can reach it either. Allowed during a run:
// runs never write the host side.
Napi::Value ArenaHandle::View(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint64_t offset = exactU64(env, info[0], "offset"), bytes = exactU64(env, info[1], "bytes");
  const std::shared_ptr<Block> b = live(env, false);
  if (offset > b->total() || bytes > b->total() - offset) throwJs(env, "OUT_OF_RANGE", "view outside the arena");
  if (bytes > (uint64_t(1) << 32) - 1)
    throwJs(env, "VIEW_TOO_LARGE", "a view of " + std::to_string(bytes) + " bytes exceeds the 4 GiB limit of one ArrayBuffer; view a smaller region");
  Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(env, b->host() + offset, static_cast<size_t>(bytes), [](Napi::Env, void*) {});
  ab.Set(owner(env), Value());
  // Drop references to views the GC already collected, then remember this one (weakly).
  std::vector<Napi::Reference<Napi::ArrayBuffer>> alive;
  for (auto& r : views_)
    if (!r.Value().IsEmpty()) alive.push_back(std::move(r));
  views_ = std::move(alive);
  views_.push_back(Napi::Reference<Napi::ArrayBuffer>::New(ab, 0));
  return ab;
}

// Never waits: the counters have a lock of their own, apart from the one a run holds.
Napi::Value ArenaHandle::Stats(const Napi::CallbackInfo& info) { return statsObject(info.Env(), block_ ? block_->stats() : finalStats_); }

// Detaches every view and frees both allocations, at once; while a run holds the block, as
// soon as it ends (BlockWorker). Returns at once either way.
Napi::Value ArenaHandle::Dispose(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!block_ || block_->released()) return Napi::Boolean::New(env, false);
  for (auto& r : views_) {
    Napi::Value v = r.Value();
    if (!v.IsEmpty() && v.IsArrayBuffer() && !v.As<Napi::ArrayBuffer>().IsDetached()) v.As<Napi::ArrayBuffer>().Detach();
  }
  views_.clear();
  guarded(env, [&] { block_->releaseSoon(); });
  releaseExternal(env);
  // The counters as they will stand once the memory is freed (a run in flight frees it later).
  finalStats_ = block_->stats();
  if (finalStats_.hostFrees == 0) {
    finalStats_.hostFrees++;
    finalStats_.deviceFrees++;
  }
  block_.reset();
  comm_.reset();  // the communicator goes once no run holds it
  return Napi::Boolean::New(env, true);
}

Napi::Value ArenaHandle::Addresses(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::shared_ptr<Block> b = live(env, false);
  Napi::Object o = Napi::Object::New(env);
  o.Set("host", Napi::BigInt::New(env, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(b->host()))));
  o.Set("device", Napi::BigInt::New(env, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(b->device()))));
  return o;
}

// run(params): one training / evaluation run; resolves when the device work is complete.
// Runs on one arena never overlap: a second while one is in flight is BUSY (the Trainer
// queues its runs in call order, src/train/).
Napi::Value ArenaHandle::Run(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const RunParams p = runParamsOf(env, info[0]);
  const std::shared_ptr<Block> b = live(env, true);
  return startRun(env, b, comm_, p, this, Value());
}

// runInline(base, params, into?, back?): run()'s work on the calling (JS) thread, returning its path:
// for runs so short that handing them to a libuv worker and back costs more than the work (a step
// or a forward pass of a small batch; the Trainer decides, src/train/runner.ts). `into` / `back`:
// ranges [offset, bytes, ...] uploaded before the run and read back after it, each counted as one
// transfer as transfer() counts them; on plain device memory they are queued on the run's stream,
// so that the upload, the run and the read-back end in one wait. `base` and `params`: the run's
// parameters (convert.h's runParamsOf: the frozen base is read once). BUSY while anything is in flight;
// not for a data-parallel group's arenas or a budgeted arena (their runs wait on other ranks or on
// page migration).
Napi::Value ArenaHandle::RunInline(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RunParams p = runParamsOf(env, info[0], info[1], params_);
  const std::vector<Range> into = info.Length() > 2 && !info[2].IsUndefined() ? rangesOf(env, info[2]) : std::vector<Range>{};
  const std::vector<Range> back = info.Length() > 3 && !info[3].IsUndefined() ? rangesOf(env, info[3]) : std::vector<Range>{};
  const std::shared_ptr<Block> b = inlineBlock(env);
  return Napi::String::New(env, guarded(env, [&] { return runWithCopies(*b, p, into, back); }));
}

// The block of an idle arena that may run on the JS thread: not a data-parallel group's (its
// runs wait on other ranks) nor a budgeted one's (they wait on page migration).
std::shared_ptr<Block> ArenaHandle::inlineBlock(Napi::Env env) const {
  std::shared_ptr<Block> b = live(env, true);
  if (comm_) throwJs(env, "NOT_SUPPORTED", "an inline run on an arena of a data-parallel group");
  if (dynamic_cast<BudgetedBlock*>(b.get())) throwJs(env, "NOT_SUPPORTED", "an inline run on an arena with a device budget");
  return b;
}

// predictRows(base, params, x, count, out, [z0Offset, zOutOffset, inputs, outputs, batch]): predict()'s
// batches on the JS thread in one call (inline_run.h): x's rows read natively into z[0] batch by
// batch, each run forward with its copies, the outputs into `out` (the arena's dtype). Returns
// { path, batches, bad, value } (bad >= 0: x[bad] is not finite, nothing from its batch on ran), or
// null for an x it does not read (the caller goes batch by batch itself). As runInline: one
// arena of its own, not budgeted, nothing in flight.
Napi::Value ArenaHandle::PredictRows(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RunParams p = runParamsOf(env, info[0], info[1], params_);
  const std::optional<TypedSource> x = typedSource(env, info[2], "x");
  const uint64_t count = exactU64(env, info[3], "count");
  const TypedDestination out = typedDestination(env, info[4], "out");
  if (!info[5].IsArray() || info[5].As<Napi::Array>().Length() != 5) throwJs(env, "BAD_ARGUMENT", "predictRows: shape must be [z0Offset, zOutOffset, inputs, outputs, batch]");
  const Napi::Array g = info[5].As<Napi::Array>();
  PredictShape s;
  s.z0 = exactU64(env, g.Get(0u), "z0Offset");
  s.zOut = exactU64(env, g.Get(1u), "zOutOffset");
  s.inputs = exactU64(env, g.Get(2u), "inputs");
  s.outputs = exactU64(env, g.Get(3u), "outputs");
  s.batch = exactU64(env, g.Get(4u), "batch");
  const std::shared_ptr<Block> b = inlineBlock(env);
  if (!x) return env.Null();
  nna_header h;
  std::memcpy(&h, b->header(), sizeof h);
  const uint64_t bpe = h.dtype == NNA_FLOAT64 ? 8 : 4;
  if (s.batch == 0 || s.batch > h.batch || s.inputs == 0 || s.outputs == 0)
    throwJs(env, "BAD_ARGUMENT", "predictRows: batch, inputs and outputs must be positive, batch at most the plan's");
  if (out.f64 != (bpe == 8)) throwJs(env, "BAD_ARGUMENT", "predictRows: out must be of the arena's dtype");
  if (x->length / s.inputs < count || out.length / s.outputs < count) throwJs(env, "BAD_ARGUMENT", "predictRows: x or out holds fewer than count rows");
  for (const Range& r : {Range{s.z0, s.batch * s.inputs * bpe}, Range{s.zOut, s.batch * s.outputs * bpe}})
    if (r.offset > b->total() || r.bytes > b->total() - r.offset) throwJs(env, "OUT_OF_RANGE", "predictRows: a region outside the arena");
  const nna::addon::PredictRows r = guarded(env, [&] { return predictRows(*b, p, *x, count, static_cast<uint8_t*>(out.data), s); });
  Napi::Object o = Napi::Object::New(env);
  o.Set("path", Napi::String::New(env, r.path));
  o.Set("batches", Napi::Number::New(env, double(r.batches)));
  o.Set("bad", Napi::Number::New(env, double(r.bad)));
  o.Set("value", Napi::Number::New(env, r.value));
  return o;
}

// runQueued(params, statsOffset, statsBytes, first): a run (params as run()'s) that may be
// queued while this arena's earlier queued runs are in flight; it starts when they have ended
// (RunTurns), so the device goes from one to the next without waiting for the JS thread. Its
// worker reads back what the next run would change (Readback: statsBytes of stats from
// statsOffset, one counted transfer). Resolves with
//   { path, stats: ArrayBuffer, gradNorms: Float64Array, lossScale: Float64Array, skipped };
// skipped (nothing ran, stats empty): a run queued after one that failed or found its one model
// diverged, until a fit's `first` run. Not for a data-parallel group's arenas.
Napi::Value ArenaHandle::RunQueued(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const RunParams p = runParamsOf(env, info[0]);
  const uint64_t statsOffset = exactU64(env, info[1], "statsOffset"), statsBytes = exactU64(env, info[2], "statsBytes");
  const bool first = boolean(env, info[3], "first");
  const std::shared_ptr<Block> b = live(env, false);
  if (comm_) throwJs(env, "NOT_SUPPORTED", "a queued run on an arena of a data-parallel group");
  if (statsOffset > b->total() || statsBytes > b->total() - statsOffset) throwJs(env, "OUT_OF_RANGE", "stats outside the arena");
  nna_header h;
  std::memcpy(&h, b->header(), sizeof h);
  // One model's divergence ends its fit (several models go on: each stops on its own).
  const bool stopOnDivergence = nna_models(&h) == 1 && statsBytes >= (NNA_STAT_BAD_STEP + 1) * (h.dtype == NNA_FLOAT64 ? 8u : 4u);
  const bool f64 = h.dtype == NNA_FLOAT64;
  auto out = std::make_shared<Readback>();
  out->stats.resize(statsBytes);
  auto ran = std::make_shared<bool>(false);
  const std::shared_ptr<RunTurns> turns = turns_;
  auto work = [p, statsOffset, first, stopOnDivergence, f64, out, ran, turns](Block& blk) -> std::string {
    if (first) turns->stopped = false;
    if (turns->stopped) return "";
    std::string path;
    try {
      path = runAndReadBack(blk, p, first, statsOffset, *out);
    } catch (...) {
      turns->stopped = true;
      throw;
    }
    *ran = true;
    if (stopOnDivergence) {
      if (valueAt(out->stats.data() + NNA_STAT_BAD_STEP * (f64 ? 8 : 4), f64) >= 0) turns->stopped = true;
    }
    return path;
  };
  auto shape = [out, ran](Napi::Env e, const std::string& path) -> Napi::Value {
    Napi::Object o = Napi::Object::New(e);
    o.Set("path", Napi::String::New(e, path));
    setReadback(e, o, *out, *ran);
    o.Set("skipped", Napi::Boolean::New(e, !*ran));
    return o;
  };
  auto* w = new BlockWorker(env, "nn-arena:run", b, this, Value(), work, turns_, shape);
  return w->start();
}

// gradNorms(): the global gradient norm of each step of the last run (step s, model m at
// s * models + m), a Float64Array; empty when that run did not clip.
Napi::Value ArenaHandle::GradNorms(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::shared_ptr<Block> b = live(env, true);
  const std::vector<double>& n = runOutputsOf(*b).gradNorms;
  Napi::Float64Array out = Napi::Float64Array::New(env, n.size());
  std::copy(n.begin(), n.end(), out.Data());
  return out;
}

// lossScale(): [scale, good steps, steps skipped] after the last run that scaled its loss
// (precision 'fp16'); the scale is 0 before any.
Napi::Value ArenaHandle::LossScaleState(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const LossScale& s = runOutputsOf(*live(env, true)).lossScale;
  Napi::Float64Array out = Napi::Float64Array::New(env, 3);
  out[0] = s.scale, out[1] = double(s.good), out[2] = double(s.skipped);
  return out;
}

// graphSteps(): how many steps of the last run ran as a CUDA graph launch (0: none, or no
// CUDA per-layer run).
Napi::Value ArenaHandle::GraphSteps(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Napi::Number::New(env, double(runOutputsOf(*live(env, true)).graphSteps));
}

// epilogues(): how many products of the last run's first step carried a fused cuBLASLt epilogue
// (bias, activation or their gradients; 0: none, or no CUDA per-layer run). For tests.
Napi::Value ArenaHandle::Epilogues(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Napi::Number::New(env, double(runOutputsOf(*live(env, true)).epilogues));
}

// residency(): where each region is (managed: where it was last prefetched, asked of the
// driver; staged: pool or host), the plan's counters and the device memory measured.
Napi::Value ArenaHandle::Residency(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::shared_ptr<Block> held = live(env, true);
  auto* b = dynamic_cast<BudgetedBlock*>(held.get());
  if (!b) throwJs(env, "NOT_SUPPORTED", "a residency report needs an arena with a device budget (memory 'managed' or 'staged')");
  Napi::Object o = Napi::Object::New(env);
  auto num = [&](Napi::Object t, const char* k, uint64_t v) { t.Set(k, Napi::Number::New(env, static_cast<double>(v))); };
  guarded(env, [&] {
    std::lock_guard<std::mutex> lock(b->mutex());
    const nna::Residency& res = b->residency();
    const bool staged = b->options().memory == Memory::Staged;
    o.Set("placement", Napi::String::New(env, staged ? "staged" : b->budget().scheduled ? "scheduler" : "on-demand"));
    num(o, "budget", b->budget().bytes);
    num(o, "granule", res.granule());
    const DeviceMeter& m = b->meter();
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
    num(o, "scheduledBytes", res.used());
    o.Set("lastRun", countersObject(env, res.lastRun));
    o.Set("total", countersObject(env, res.total));
    const auto& regions = res.model().regions();
    Napi::Array list = Napi::Array::New(env, regions.size());
    for (uint32_t r = 0; r < regions.size(); ++r) {
      const RegionInfo& ri = regions[r];
      Napi::Object e = Napi::Object::New(env);
      num(e, "layer", ri.layer);
      num(e, "kind", ri.kind);
      num(e, "offset", ri.offset);
      num(e, "bytes", ri.bytes);
      e.Set("resident", Napi::Boolean::New(env, res.state()[r].resident));
      if (staged)
        e.Set("location", Napi::String::New(env, ri.remote ? "host (read in place)" : res.state()[r].resident ? "device" : "host"));
      else
        e.Set("lastPrefetch", Napi::String::New(env, managedLastPrefetch(b->device() + ri.offset, ri.bytes)));
      list.Set(r, e);
    }
    o.Set("regions", list);
  });
  return o;
}

}  // namespace nna::addon
