// functions.cc: the addon's plain functions that the library itself calls: what the CUDA side
// can do here, CRC-32C for checkpoints, the smallest device budget of a plan, and the native
// checks on their own (budget, run, loss), so that a call is refused before any work.
#include "functions.h"

#include <optional>

#include "../budget/budgeted_block.h"
#include "../budget/residency.h"
#include "../core/backend.h"
#include "../core/crc32c.h"
#include "../train/aliasing.h"
#include "../train/train.h"
#include "convert.h"
#include "js_error.h"

namespace nna::addon {

namespace {

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
  o.Set("cublasLt", Napi::String::New(env, c.cublasLt));
  o.Set("archs", Napi::String::New(env, c.archs));
  o.Set("noKernelImage", Napi::Boolean::New(env, c.noKernelImage));
  return o;
}

// crc32c(bytes: Uint8Array, crc = 0): CRC-32C continued over bytes.
Napi::Value Crc32c(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint64_t crc = info.Length() > 1 ? exactU64(env, info[1], "crc") : 0;
  if (crc > 0xffffffffu) throwJs(env, "BAD_ARGUMENT", "crc must be a 32-bit value");
  if (!info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) throwJs(env, "BAD_ARGUMENT", "crc32c expects a Uint8Array");
  const Napi::Uint8Array u = info[0].As<Napi::Uint8Array>();
  return Napi::Number::New(env, crc32c(uint32_t(crc), u.Data(), u.ByteLength()));
}

// minDeviceBudget(header, placement): { bytes, stage, layer } of the smallest usable budget.
Napi::Value MinDeviceBudget(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::vector<uint8_t> h = validatedHeader(env, info[0]);
  const Placement placement = placementOf(env, info[1]);
  return guarded(env, [&] {
    const StepModel m(h.data());
    PhaseInfo which{};
    const uint64_t bytes = Residency::minBudget(m, placement, &which);
    Napi::Object o = Napi::Object::New(env);
    o.Set("bytes", Napi::Number::New(env, static_cast<double>(bytes)));
    o.Set("stage", Napi::String::New(env, stageName(which.stage)));
    o.Set("layer", Napi::Number::New(env, which.layer));
    return o;
  });
}

// checkDeviceBudget(header, memory, budget?): the budget rules (BudgetedBlock::check) before any
// allocation or backend choice, so a bad budget is reported the same on every machine.
Napi::Value CheckDeviceBudget(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::vector<uint8_t> h = validatedHeader(env, info[0]);
  const Memory memory = memoryOf(env, info[1]);
  const Budget budget = budgetOf(env, info[2], Napi::Boolean::New(env, true));
  guarded(env, [&] { BudgetedBlock::check(h.data(), memory, budget); });
  return env.Undefined();
}

// checkRun(header, params, target?) and checkLoss(header, { loss, labelSmoothing }): the run
// checks of check.cc without a run (the Trainer refuses a combination, or a bad loss, at
// construction with the native message); target { cuda, budgeted }: also what the run needs of
// the arena it would run on (checkTarget). They throw their coded error.
template <void (*Check)(const void*, const RunParams&)> Napi::Value RunCheck(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::vector<uint8_t> h = validatedHeader(env, info[0]);
  const RunParams p = runParamsOf(env, info[1]);
  std::optional<RunTarget> target;
  if (info.Length() > 2 && !info[2].IsUndefined()) {
    if (!info[2].IsObject()) throwJs(env, "BAD_ARGUMENT", "target must be an object { cuda, budgeted }");
    const Napi::Object t = info[2].As<Napi::Object>();
    target = RunTarget{boolean(env, t.Get("cuda"), "cuda"), boolean(env, t.Get("budgeted"), "budgeted")};
  }
  guarded(env, [&] {
    Check(h.data(), p);
    if (target) checkTarget(h.data(), p, *target);
  });
  return env.Undefined();
}

// checkGroup(header): what a data-parallel group needs of its plan (check.cc), before any arena.
Napi::Value CheckGroup(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::vector<uint8_t> h = validatedHeader(env, info[0]);
  guarded(env, [&] { checkGroup(h.data()); });
  return env.Undefined();
}

// validateHeader(bytes, available): "" when the header is sound for an arena of `available`
// bytes (the validator and the aliasing replay, as Arena.create runs them), else why not.
Napi::Value ValidateHeader(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::vector<uint8_t> bytes = bytesOf(env, info[0], "header");
  const uint64_t available = exactU64(env, info[1], "available");
  return Napi::String::New(env, guarded(env, [&] { return validateArena(bytes.data(), bytes.size(), size_t(available)); }));
}

}  // namespace

void registerFunctions(Napi::Env env, Napi::Object exports) {
  exportFunctions(env, exports,
                  {{"cudaInfo", CudaInfo},
                   {"crc32c", Crc32c},
                   {"minDeviceBudget", MinDeviceBudget},
                   {"checkDeviceBudget", CheckDeviceBudget},
                   {"checkRun", RunCheck<checkRun>},
                   {"checkLoss", RunCheck<checkLoss>},
                   {"checkGroup", CheckGroup},
                   {"validateHeader", ValidateHeader}});
}

}  // namespace nna::addon
