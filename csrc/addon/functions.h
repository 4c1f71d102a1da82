// functions.h: registration of the addon's functions (the test- and bench-only ones are in
// another addon, test/native/).
#pragma once
#include <napi.h>

#include <initializer_list>
#include <utility>

namespace nna::addon {

// Sets each (name, function) on exports: every register* below is one such list.
inline void exportFunctions(Napi::Env env, Napi::Object exports, std::initializer_list<std::pair<const char*, Napi::Function::Callback>> fns) {
  for (const auto& [name, fn] : fns) exports.Set(name, Napi::Function::New(env, fn, name));
}

// cudaInfo, crc32c, minDeviceBudget, checkDeviceBudget, checkRun, checkLoss, checkGroup,
// validateHeader (functions.cc).
void registerFunctions(Napi::Env env, Napi::Object exports);
// JIT kernels (jit.cc): jitCompile, jitLaunch.
void registerJit(Napi::Env env, Napi::Object exports);
// Data parallelism (nccl.cc): ncclInfo, ncclUniqueId, ncclInitAll, ncclInitRank, ncclLeave,
// runReplicas, groupInfo.
void registerNccl(Napi::Env env, Napi::Object exports);
// The optimizer and schedule tables, lrAt, regionRules, stepPhases (descriptors.cc).
void registerDescriptors(Napi::Env env, Napi::Object exports);

}  // namespace nna::addon
