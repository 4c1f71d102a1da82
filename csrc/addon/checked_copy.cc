// checked_copy.cc: see checked_copy.h.
#include "checked_copy.h"

#include <optional>

#include "../core/checked_copy.h"
#include "convert.h"
#include "js_error.h"

namespace nna::addon {
namespace {

std::optional<SrcType> srcType(napi_typedarray_type t) {
  switch (t) {
    case napi_int8_array: return SrcType::I8;
    case napi_uint8_array:
    case napi_uint8_clamped_array: return SrcType::U8;
    case napi_int16_array: return SrcType::I16;
    case napi_uint16_array: return SrcType::U16;
    case napi_int32_array: return SrcType::I32;
    case napi_uint32_array: return SrcType::U32;
    case napi_float32_array: return SrcType::F32;
    case napi_float64_array: return SrcType::F64;
    default: return std::nullopt;
  }
}

struct Typed {
  void* data;
  size_t length;
  napi_typedarray_type type;
};

Typed typed(Napi::Env env, const Napi::Value& v, const char* what) {
  if (!v.IsTypedArray()) throwJs(env, "BAD_ARGUMENT", std::string(what) + " must be a typed array");
  // The raw call without the buffer object: a SharedArrayBuffer's typed array has no
  // ArrayBuffer to give (Napi::TypedArray::ArrayBuffer() fails on it); `data` is already at the
  // array's byte offset.
  napi_typedarray_type type;
  size_t length = 0;
  void* data = nullptr;
  if (napi_get_typedarray_info(env, v, &type, &length, &data, nullptr, nullptr) != napi_ok) throwJs(env, "BAD_ARGUMENT", std::string(what) + " could not be read");
  return {data, length, type};
}

// Whether the copy changed the destination's bits, where every element was good (no array to
// make on a call's common path); else [the first bad index, its value, 1 where it is finite but
// not a class].
Napi::Value result(Napi::Env env, const CheckedCopy& r) {
  if (r.bad < 0) return Napi::Boolean::New(env, r.changed);
  Napi::Array a = Napi::Array::New(env, 3);
  a.Set(0u, Napi::Number::New(env, double(r.bad)));
  a.Set(1u, Napi::Number::New(env, r.value));
  a.Set(2u, Napi::Number::New(env, r.label));
  return a;
}

}  // namespace

TypedDestination typedDestination(Napi::Env env, const Napi::Value& v, const char* what) {
  const Typed d = typed(env, v, what);
  if (d.type != napi_float32_array && d.type != napi_float64_array) throwJs(env, "BAD_ARGUMENT", std::string(what) + " must be a Float32Array or a Float64Array");
  return {d.data, d.length, d.type == napi_float64_array};
}

std::optional<TypedSource> typedSource(Napi::Env env, const Napi::Value& v, const char* what) {
  const Typed t = typed(env, v, what);
  const std::optional<SrcType> type = srcType(t.type);
  if (!type) return std::nullopt;
  return TypedSource{t.data, t.length, *type};
}

Napi::Value CheckedCopyJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const TypedDestination d = typedDestination(env, info[0], "dst");
  const Typed s = typed(env, info[1], "src");
  const bool compare = boolean(env, info[2], "compare");
  const std::optional<SrcType> t = srcType(s.type);
  if (!t) return env.Null();
  if (s.length > d.length) throwJs(env, "BAD_ARGUMENT", "checkedCopy: dst is shorter than src");
  return result(env, checkedCopy(d.data, d.f64, s.data, *t, s.length, compare));
}

Napi::Value OneHotJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const TypedDestination d = typedDestination(env, info[0], "dst");
  const Typed s = typed(env, info[1], "labels");
  const uint64_t outputs = exactU64(env, info[2], "outputs");
  const bool compare = boolean(env, info[3], "compare");
  const std::optional<SrcType> t = srcType(s.type);
  if (!t) return env.Null();
  if (outputs == 0 || s.length > d.length / outputs) throwJs(env, "BAD_ARGUMENT", "oneHot: dst is shorter than labels x outputs");
  return result(env, oneHotRows(d.data, d.f64, s.data, *t, s.length, outputs, compare));
}

}  // namespace nna::addon
