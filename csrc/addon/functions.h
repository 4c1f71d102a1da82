// functions.h: registration of the addon's plain functions (functions.cc) and of its internal,
// test- and bench-only ones (internal.cc).
#pragma once
#include <napi.h>

namespace nna::addon {

void registerFunctions(Napi::Env env, Napi::Object exports);
// Under exports.internal: not part of the library's API (src/internal.ts, tests, bench/).
void registerInternal(Napi::Env env, Napi::Object exports);
// readRows (read_rows.cc): a shuffled streaming window's rows read from a file in parallel.
void registerReadRows(Napi::Env env, Napi::Object exports);
// JIT kernels (jit.cc): jitCompile, jitLaunch.
void registerJit(Napi::Env env, Napi::Object exports);
// Data parallelism (nccl.cc): ncclInfo, ncclUniqueId, ncclInitAll, ncclInitRank, ncclLeave,
// runReplicas, groupInfo.
void registerNccl(Napi::Env env, Napi::Object exports);
// The optimizer and schedule tables, lrAt, checkRun (descriptors.cc).
void registerDescriptors(Napi::Env env, Napi::Object exports);
// internal.jitCompileOnly (jit.cc): a compile without a device, for tests.
Napi::Value JitCompileOnly(const Napi::CallbackInfo& info);

}  // namespace nna::addon
