// jit.cc: the addon surface of JIT kernels (csrc/cuda/jit.h): compile on the JS thread, launch
// off it as a run of the arena (counted like one: transfers are BUSY and synchronize() waits
// while it is in flight). src/arena/jit.ts is the only caller.
#include <limits>
#include <mutex>
#include <type_traits>

#include "../cuda/jit.h"
#include "addon_data.h"
#include "arena_handle.h"
#include "convert.h"
#include "functions.h"
#include "js_error.h"

namespace nna::addon {

namespace {

ArenaHandle* arenaOf(Napi::Env env, const Napi::Value& v) {
  if (!v.IsObject() || !v.As<Napi::Object>().InstanceOf(env.GetInstanceData<AddonData>()->arenaClass.Value())) throwJs(env, "BAD_ARGUMENT", "expected an arena handle");
  return ArenaHandle::Unwrap(v.As<Napi::Object>());
}

// The arena a kernel may run on: CUDA, with its whole device side addressable by a kernel.
std::shared_ptr<Block> jitArena(Napi::Env env, ArenaHandle* h, bool idle) {
  std::shared_ptr<Block> b = h->live(env, idle);
  if (!b->options().cuda) throwJs(env, "NOT_SUPPORTED", "JIT kernels need the CUDA backend; this arena uses the CPU backend");
  if (b->options().memory == Memory::Staged)
    throwJs(env, "NOT_SUPPORTED", "JIT kernels cannot run on staged memory (only a pool of the arena is on the device); use device or managed memory");
  return b;
}

// An integer argument of its type's range: a Number that is an exact integer, or a BigInt.
template <typename T> T integerOf(Napi::Env env, const Napi::Value& v, size_t i) {
  const std::string what = "argument " + std::to_string(i);
  if (v.IsBigInt()) {
    bool lossless = false;
    if (std::is_signed<T>::value) {
      const int64_t x = v.As<Napi::BigInt>().Int64Value(&lossless);
      if (lossless && x >= int64_t(std::numeric_limits<T>::min()) && x <= int64_t(std::numeric_limits<T>::max())) return T(x);
    } else {
      const uint64_t x = v.As<Napi::BigInt>().Uint64Value(&lossless);
      if (lossless && x <= uint64_t(std::numeric_limits<T>::max())) return T(x);
    }
  } else if (v.IsNumber()) {
    const double x = v.As<Napi::Number>().DoubleValue();
    if (x == double(int64_t(x)) && x >= double(std::numeric_limits<T>::min()) && x <= double(std::numeric_limits<T>::max()) && x >= -9007199254740991.0 && x <= 9007199254740991.0)
      return T(int64_t(x));
  }
  throwJs(env, "BAD_ARGUMENT", what + " must be an integer in the range of its type (a number or a bigint)");
}

std::vector<JitValue> argsOf(Napi::Env env, const Napi::Value& v, const std::vector<JitType>& types) {
  if (!v.IsArray()) throwJs(env, "BAD_ARGUMENT", "args must be an array");
  const Napi::Array a = v.As<Napi::Array>();
  if (a.Length() != types.size())
    throwJs(env, "BAD_ARGUMENT", "the kernel takes " + std::to_string(types.size()) + " argument(s) after the base pointer, got " + std::to_string(a.Length()));
  std::vector<JitValue> out(types.size());
  for (uint32_t i = 0; i < a.Length(); ++i) {
    const Napi::Value x = a.Get(i);
    JitValue& r = out[i];
    r.u64 = 0;
    r.type = types[i];
    switch (types[i]) {
      case JitType::F32:
      case JitType::F64: {
        if (!x.IsNumber()) throwJs(env, "BAD_ARGUMENT", "argument " + std::to_string(i) + " must be a number");
        const double d = x.As<Napi::Number>().DoubleValue();
        if (types[i] == JitType::F32)
          r.f32 = float(d);
        else
          r.f64 = d;
        break;
      }
      case JitType::I32: r.i32 = integerOf<int32_t>(env, x, i); break;
      case JitType::U32: r.u32 = integerOf<uint32_t>(env, x, i); break;
      case JitType::I64: r.i64 = integerOf<int64_t>(env, x, i); break;
      case JitType::U64: r.u64 = integerOf<uint64_t>(env, x, i); break;
    }
  }
  return out;
}

JitDims dimsOf(Napi::Env env, const Napi::Value& v, const char* what) {
  if (!v.IsArray() || v.As<Napi::Array>().Length() != 3) throwJs(env, "BAD_ARGUMENT", std::string(what) + " must be [x, y, z]");
  const Napi::Array a = v.As<Napi::Array>();
  uint32_t d[3];
  for (uint32_t i = 0; i < 3; ++i) {
    const uint64_t x = exactU64(env, a.Get(i), what);
    if (x < 1 || x > 0x7fffffffu) throwJs(env, "BAD_ARGUMENT", std::string(what) + " dimensions must be integers in [1, 2^31 - 1]");
    d[i] = uint32_t(x);
  }
  return JitDims{d[0], d[1], d[2]};
}

// jitCompile(handle, source, name, params, header): the kernel's id (compiled or cached).
Napi::Value JitCompile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ArenaHandle* h = arenaOf(env, info[0]);
  const std::string source = string(env, info[1], "source"), name = string(env, info[2], "name");
  const std::vector<JitType> params = typesOf(env, info[3]);
  const std::string header = string(env, info[4], "header");
  const std::shared_ptr<Block> b = jitArena(env, h, false);
  // Compiled for, and loaded on, the arena's device (jitKernel reads the current one).
  return Napi::Number::New(env, guarded(env, [&] {
                             b->backend().activate();
                             return jitKernel(source, name, params, header);
                           }));
}

// jitLaunch(handle, id, grid, block, sharedBytes, args): resolves once the kernel completed.
Napi::Value JitLaunch(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ArenaHandle* h = arenaOf(env, info[0]);
  const uint64_t id = exactU64(env, info[1], "kernel");
  const std::vector<JitType>* types = id <= 0xffffffffu ? jitParams(uint32_t(id)) : nullptr;
  if (!types) throwJs(env, "BAD_ARGUMENT", "not a compiled kernel");
  const JitDims grid = dimsOf(env, info[2], "grid"), block = dimsOf(env, info[3], "block");
  const uint64_t shared = exactU64(env, info[4], "sharedBytes");
  if (shared > 0xffffffffu) throwJs(env, "BAD_ARGUMENT", "sharedBytes is too large");
  std::vector<JitValue> args = argsOf(env, info[5], *types);
  std::shared_ptr<Block> b = jitArena(env, h, true);
  // Off the JS thread, under the arena's mutex (so never beside a run).
  auto* w = new BlockWorker(env, "nn-arena:launch", std::move(b), h, info[0].As<Napi::Object>(),
                            [id = uint32_t(id), grid, block, shared = uint32_t(shared), args = std::move(args)](Block& blk) {
                              jitLaunch(id, blk.device(), grid, block, shared, args);
                              return std::string();
                            });
  return w->start();
}

}  // namespace

void registerJit(Napi::Env env, Napi::Object exports) { exportFunctions(env, exports, {{"jitCompile", JitCompile}, {"jitLaunch", JitLaunch}}); }

}  // namespace nna::addon
