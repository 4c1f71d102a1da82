// addon.cc: the module's JS surface. Addresses arrive as BigInts (arena.hostAddress /
// arena.deviceAddress) and become void* here; nothing else of the arena is passed.
#include <napi.h>

#include "decay.h"
#include "ema.h"

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

std::string nameOf(const Napi::Value& v) {
  if (!v.IsString()) throw Napi::TypeError::New(v.Env(), "the region name must be a string");
  return v.As<Napi::String>().Utf8Value();
}

double decayOf(const Napi::Value& v) {
  const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
  if (!(d >= 0 && d <= 1)) throw Napi::RangeError::New(v.Env(), "decay must be a number in [0, 1]");
  return d;
}

Napi::Value emaResult(Napi::Env env, int64_t n, const std::string& name) {
  if (n == -1) throw Napi::Error::New(env, "the arena has no user region named '" + name + "' (planLayout({ extra: [{ name: '" + name + "', like: 'w' }] }))");
  if (n == -2) throw Napi::Error::New(env, "the user region '" + name + "' is not shaped like the weights (like: 'w')");
  return Napi::Number::New(env, double(n));
}

// emaHost(address, name, decay): ema <- decay * ema + (1 - decay) * w in host memory, the user
// region found by name; the elements updated.
Napi::Value EmaHost(const Napi::CallbackInfo& info) {
  void* base = pointerOf(info[0]);
  const std::string name = nameOf(info[1]);
  const double decay = decayOf(info[2]);
  return emaResult(info.Env(), emaUpdateHost(base, name.c_str(), decay), name);
}

#if defined(WITH_CUDA)
// emaDevice(deviceAddress, name, decay): the same in device memory, complete when it returns.
Napi::Value EmaDevice(const Napi::CallbackInfo& info) {
  void* base = pointerOf(info[0]);
  const std::string name = nameOf(info[1]);
  const double decay = decayOf(info[2]);
  int64_t n = 0;
  const char* err = emaUpdateDevice(base, name.c_str(), decay, &n);
  if (*err) throw Napi::Error::New(info.Env(), std::string("emaDevice: ") + err);
  return emaResult(info.Env(), n, name);
}

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
  exports.Set("emaHost", Napi::Function::New(env, EmaHost));
#if defined(WITH_CUDA)
  exports.Set("decayDevice", Napi::Function::New(env, DecayDevice));
  exports.Set("emaDevice", Napi::Function::New(env, EmaDevice));
  exports.Set("cudaBuilt", Napi::Boolean::New(env, true));
#else
  exports.Set("cudaBuilt", Napi::Boolean::New(env, false));
#endif
  return exports;
}

}  // namespace

NODE_API_MODULE(custom_kernel, Init)
