// addon.cc: the Node-API entry point. It only registers: the arena handle (arena_handle.h), the
// streaming window buffers and sources (window_stager.h, read_rows.h, shuffle_pool.h,
// copy_bytes.h, decode_values.h), the
// library's functions (functions.cc),
// JIT kernels (jit.cc), data parallelism (nccl.cc). Test- and bench-only functions are another
// addon's (test/native/internal.cc), never shipped.
// Conversions live in convert.h, runs in run_worker.h, error shaping in js_error.h.
#include <napi.h>

#include "addon_data.h"
#include "arena_handle.h"
#include "checked_copy.h"
#include "copy_bytes.h"
#include "decode_values.h"
#include "functions.h"
#include "read_rows.h"
#include "shuffle_pool.h"
#include "window_stager.h"

namespace {

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  Napi::Function arena = nna::addon::ArenaHandle::Define(env);
  env.SetInstanceData(new nna::addon::AddonData{Napi::Persistent(arena), Napi::Persistent(Napi::Symbol::New(env, "nn-arena arena"))});
  exports.Set("ArenaHandle", arena);
  exports.Set("WindowStager", nna::addon::WindowStager::Define(env));
  exports.Set("RowFile", nna::addon::RowFile::Define(env));
  exports.Set("ShufflePool", nna::addon::ShufflePool::Define(env));
  exports.Set("decodeValues", Napi::Function::New(env, nna::addon::DecodeValues, "decodeValues"));
  exports.Set("copyBytes", Napi::Function::New(env, nna::addon::CopyBytes, "copyBytes"));
  exports.Set("checkedCopy", Napi::Function::New(env, nna::addon::CheckedCopyJs, "checkedCopy"));
  exports.Set("oneHot", Napi::Function::New(env, nna::addon::OneHotJs, "oneHot"));
  nna::addon::registerFunctions(env, exports);
  nna::addon::registerDescriptors(env, exports);
  nna::addon::registerJit(env, exports);
  nna::addon::registerNccl(env, exports);
  return exports;
}

}  // namespace

NODE_API_MODULE(nn_arena, Init)
