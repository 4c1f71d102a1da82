// convert.h: JS values to the core's types, and back. Every native entry converts ALL of its
// arguments with these before it touches an arena: a conversion may run user JS (a getter, a
// Proxy), and that JS may dispose the arena, so nothing may be held across it. Conversions are
// strict: a wrong type is BAD_ARGUMENT, never coerced (coercion would call toString/valueOf).
#pragma once
#include <napi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../budget/budgeted_block.h"
#include "../budget/residency.h"
#include "../core/backend.h"
#include "../core/block.h"
#include "../cuda/jit.h"
#include "../train/train.h"

namespace nna::addon {

// An exact integer in [0, 2^53) (or a lossless BigInt), else BAD_ARGUMENT naming `what`.
uint64_t exactU64(Napi::Env env, const Napi::Value& v, const char* what);
bool boolean(Napi::Env env, const Napi::Value& v, const char* what);
std::string string(Napi::Env env, const Napi::Value& v, const char* what);
// A Uint8Array argument itself (its bytes not copied: buffers a task writes or reads in place).
Napi::Uint8Array uint8Array(Napi::Env env, const Napi::Value& v, const char* what);
// A copy of a Uint8Array's bytes, taken once: a SharedArrayBuffer another thread writes can
// change under a second read, so validation and use both work on this copy.
std::vector<uint8_t> bytesOf(Napi::Env env, const Napi::Value& v, const char* what);
// The copy of a header, validated (BAD_HEADER otherwise), cut to its header_bytes.
std::vector<uint8_t> validatedHeader(Napi::Env env, const Napi::Value& v);

std::vector<Range> rangesOf(Napi::Env env, const Napi::Value& v);
Dir dirOf(Napi::Env env, const Napi::Value& v);
Where whereOf(Napi::Env env, const Napi::Value& v);
Advice adviceOf(Napi::Env env, const Napi::Value& v);
Placement placementOf(Napi::Env env, const Napi::Value& v);
// A JIT kernel's parameter types (["f32", "u64", ...]).
std::vector<JitType> typesOf(Napi::Env env, const Napi::Value& v);
// src/native/addon.ts RunParams: every key known, every value of its type.
Schedule scheduleOf(Napi::Env env, const Napi::Value& v);
RunParams runParamsOf(Napi::Env env, const Napi::Value& v);
// The same from two objects: `base`, frozen and passed again unchanged call after call (what
// every run of a Trainer shares), read once for as long as it is the same object, then `own` (the
// call's keys) over it. Reading some thirty keys through Node-API costs more than a small run's
// launch, so a step() reads only its own few.
struct ParamsCache {
  Napi::ObjectReference base;
  RunParams parsed;
};
RunParams runParamsOf(Napi::Env env, const Napi::Value& base, const Napi::Value& own, ParamsCache& cache);
// A device budget in bytes: undefined is none, else a positive safe integer (BAD_BUDGET, field
// deviceBudget).
Budget budgetOf(Napi::Env env, const Napi::Value& bytes, const Napi::Value& scheduled);
Memory memoryOf(Napi::Env env, const Napi::Value& v);
// src/native/addon.ts NativeArenaOptions.
void arenaOptionsOf(Napi::Env env, const Napi::Value& v, BlockOptions* options, Budget* budget);

Napi::Object statsObject(Napi::Env env, const Stats& s);
Napi::Object countersObject(Napi::Env env, const ResidencyCounters& c);

}  // namespace nna::addon
