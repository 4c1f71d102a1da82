// addon.cc: the module's JS surface. Addresses arrive as BigInts (arena.hostAddress /
// arena.deviceAddress) and become void* here; nothing else of the arena is passed.
#include <napi.h>

#include "decay.h"

namespace {

void* pointerOf(const Napi::Value& v) {
  bool lossless = false;
  const uint64_t a = v.IsBigInt() ? v.As<Napi::BigInt>().Uint64Value(&lossless) : 0;
  if (!lossless || a == 0) throw Napi::TypeError::New(v.Env(), "expected an arena address (a non-zero bigint)");
  return reinterpret_cast<void*>(static_cast<uintptr_t>(a));
}

double rateOf(const Napi::Value& v) {
  const double r = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
  if (!(r >= 0 && r <= 1)) throw Napi::RangeError::New(v.Env(), "rate must be a number in [0, 1]");
  return r;
}

// decayHost(address, rate): w <- (1 - rate) w in host memory; the weights scaled.
Napi::Value DecayHost(const Napi::CallbackInfo& info) {
  void* base = pointerOf(info[0]);
  const double rate = rateOf(info[1]);
  return Napi::Number::New(info.Env(), double(decayHost(base, rate)));
}

#if defined(WITH_CUDA)
// decayDevice(deviceAddress, rate): the same in device memory, complete when it returns.
Napi::Value DecayDevice(const Napi::CallbackInfo& info) {
  void* base = pointerOf(info[0]);
  const double rate = rateOf(info[1]);
  uint64_t n = 0;
  const char* err = decayDevice(base, rate, &n);
  if (*err) throw Napi::Error::New(info.Env(), std::string("decayDevice: ") + err);
  return Napi::Number::New(info.Env(), double(n));
}
#endif

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("decayHost", Napi::Function::New(env, DecayHost));
#if defined(WITH_CUDA)
  exports.Set("decayDevice", Napi::Function::New(env, DecayDevice));
  exports.Set("cudaBuilt", Napi::Boolean::New(env, true));
#else
  exports.Set("cudaBuilt", Napi::Boolean::New(env, false));
#endif
  return exports;
}

}  // namespace

NODE_API_MODULE(custom_kernel, Init)
