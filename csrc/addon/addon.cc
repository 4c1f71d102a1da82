// addon.cc: the Node-API entry point. It only registers: the arena handle (arena_handle.h), the
// streaming window buffers (window_stager.h), the library's functions (functions.cc, read_rows.cc),
// JIT kernels (jit.cc), data parallelism (nccl.cc). Test- and bench-only functions are another
// addon's (test/native/internal.cc), never shipped.
// Conversions live in convert.h, runs in run_worker.h, error shaping in js_error.h.
#include <napi.h>

#include "addon_data.h"
#include "arena_handle.h"
#include "functions.h"
#include "window_stager.h"

namespace {

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  Napi::Function arena = nna::addon::ArenaHandle::Define(env);
  env.SetInstanceData(new nna::addon::AddonData{Napi::Persistent(arena), Napi::Persistent(Napi::Symbol::New(env, "nn-arena arena"))});
  exports.Set("ArenaHandle", arena);
  exports.Set("WindowStager", nna::addon::WindowStager::Define(env));
  nna::addon::registerFunctions(env, exports);
  nna::addon::registerReadRows(env, exports);
  nna::addon::registerDescriptors(env, exports);
  nna::addon::registerJit(env, exports);
  nna::addon::registerNccl(env, exports);
  return exports;
}

}  // namespace

NODE_API_MODULE(nn_arena, Init)
