// copy_bytes.cc: see copy_bytes.h.
#include "copy_bytes.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "convert.h"
#include "gather_pool.h"
#include "js_error.h"

namespace nna::addon {

namespace {

// Both copies as one run of 1 MiB pieces (a piece is worth a thread).
class CopyTask : public GatherTask {
 public:
  CopyTask(uint8_t* d0, const uint8_t* s0, size_t n0, uint8_t* d1, const uint8_t* s1, size_t n1) : d_{d0, d1}, s_{s0, s1}, n_{n0, n1} {}
  size_t items(size_t) const override { return pieces(0) + pieces(1); }
  size_t grain(size_t) const override { return 1; }
  void run(size_t, size_t from, size_t to) override {
    for (size_t i = from; i < to; ++i) {
      const int k = i < pieces(0) ? 0 : 1;
      const size_t at = (k == 0 ? i : i - pieces(0)) * kPiece, len = std::min(kPiece, n_[k] - at);
      std::memcpy(d_[k] + at, s_[k] + at, len);
    }
  }

 private:
  static constexpr size_t kPiece = size_t(1) << 20;
  size_t pieces(int k) const { return (n_[k] + kPiece - 1) / kPiece; }
  uint8_t* d_[2];
  const uint8_t* s_[2];
  size_t n_[2];
};

}  // namespace

Napi::Value CopyBytes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Uint8Array d0 = uint8Array(env, info[0], "dst"), s0 = uint8Array(env, info[1], "src"), d1 = uint8Array(env, info[2], "dst2"), s1 = uint8Array(env, info[3], "src2");
  if (d0.ByteLength() != s0.ByteLength() || d1.ByteLength() != s1.ByteLength()) throwJs(env, "BAD_ARGUMENT", "copyBytes: a destination and its source differ in length");
  auto task = std::make_shared<CopyTask>(d0.Data(), s0.Data(), s0.ByteLength(), d1.Data(), s1.Data(), s1.ByteLength());
  return startTask(env, task, {d0, s0, d1, s1});
}

}  // namespace nna::addon
