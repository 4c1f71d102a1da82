#include "decode_values.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "convert.h"
#include "gather_pool.h"
#include "js_error.h"

namespace nna::addon {
namespace {

// The value of S at `p` (its bytes swapped first where the file's byte order is not the host's,
// which nn-arena builds only little-endian: nn_arena.h).
template <typename S> S load(const uint8_t* p, bool swap) {
  uint8_t b[sizeof(S)];
  std::memcpy(b, p, sizeof(S));
  if (swap)
    for (size_t i = 0; i < sizeof(S) / 2; ++i) std::swap(b[i], b[sizeof(S) - 1 - i]);
  S v;
  std::memcpy(&v, b, sizeof(S));
  return v;
}

class DecodeTask : public GatherTask {
 public:
  using Fn = void (*)(const uint8_t*, bool, void*, size_t, size_t);
  DecodeTask(Fn fn, const uint8_t* src, bool swap, void* out, uint64_t count) : fn_(fn), src_(src), swap_(swap), out_(out), count_(count) {}
  size_t items(size_t) const override { return count_; }
  size_t grain(size_t) const override { return 1 << 16; }
  void run(size_t, size_t from, size_t to) override { fn_(src_, swap_, out_, from, to); }
  double result() const override { return double(count_); }

 private:
  Fn fn_;
  const uint8_t* src_;
  bool swap_;
  void* out_;
  uint64_t count_;
};

// S -> double (a JS Number: int64 rounds here, as Number(BigInt) does) -> O (a Float32Array's
// store rounds once more, as here).
template <typename S, typename O> void decode(const uint8_t* src, bool swap, void* out, size_t from, size_t to) {
  O* o = static_cast<O*>(out);
  for (size_t i = from; i < to; ++i) o[i] = O(double(load<S>(src + i * sizeof(S), swap)));
}

template <typename O> DecodeTask::Fn pick(const std::string& type, size_t* bytes) {
#define NNA_DECODE_TYPE(name, S) \
  if (type == name) {            \
    *bytes = sizeof(S);          \
    return &decode<S, O>;        \
  }
  NNA_DECODE_TYPE("int8", int8_t);
  NNA_DECODE_TYPE("uint8", uint8_t);
  NNA_DECODE_TYPE("bool", uint8_t);
  NNA_DECODE_TYPE("int16", int16_t);
  NNA_DECODE_TYPE("uint16", uint16_t);
  NNA_DECODE_TYPE("int32", int32_t);
  NNA_DECODE_TYPE("uint32", uint32_t);
  NNA_DECODE_TYPE("int64", int64_t);
  NNA_DECODE_TYPE("uint64", uint64_t);
  NNA_DECODE_TYPE("float32", float);
  NNA_DECODE_TYPE("float64", double);
#undef NNA_DECODE_TYPE
  return nullptr;
}

}  // namespace

Napi::Value DecodeValues(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Uint8Array src = uint8Array(env, info[0], "src");
  if (!info[1].IsString()) throwJs(env, "BAD_ARGUMENT", "type must be a string");
  if (!info[2].IsBoolean()) throwJs(env, "BAD_ARGUMENT", "littleEndian must be a boolean");
  if (!info[3].IsTypedArray()) throwJs(env, "BAD_ARGUMENT", "out must be a Float32Array or a Float64Array");
  const std::string type = info[1].As<Napi::String>().Utf8Value();
  const bool swap = !info[2].As<Napi::Boolean>().Value();
  Napi::TypedArray out = info[3].As<Napi::TypedArray>();
  const uint64_t count = exactU64(env, info[4], "count");
  const napi_typedarray_type ot = out.TypedArrayType();
  if (ot != napi_float32_array && ot != napi_float64_array) throwJs(env, "BAD_ARGUMENT", "out must be a Float32Array or a Float64Array");
  size_t bytes = 0;
  const DecodeTask::Fn fn = ot == napi_float32_array ? pick<float>(type, &bytes) : pick<double>(type, &bytes);
  if (!fn) throwJs(env, "BAD_ARGUMENT", "decodeValues: unknown type '" + type + "'");
  if (count > src.ByteLength() / bytes || count > out.ElementLength()) throwJs(env, "BAD_ARGUMENT", "decodeValues: count beyond src or out");
  uint8_t* outData = static_cast<uint8_t*>(out.ArrayBuffer().Data()) + out.ByteOffset();
  auto task = std::make_shared<DecodeTask>(fn, src.Data(), swap, outData, count);
  return startTask(env, task, {src, out});
}

}  // namespace nna::addon
