// shuffle_pool.h: ShufflePool, the rows of a shuffled iterable's shuffle buffer
// (src/train/shuffle-buffer.ts) in native memory: draws made here with the fit's generator,
// rows copied in and out in parallel on the gather pool (shuffle_pool.cc).
#pragma once
#include <napi.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace nna::addon {

class ShufflePool : public Napi::ObjectWrap<ShufflePool> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit ShufflePool(const Napi::CallbackInfo& info);
  void Finalize(Napi::BasicEnv env) override;

  // The held rows, shared with a copy in flight.
  struct Rows {
    std::unique_ptr<uint8_t[]> x, y;
    uint64_t xb = 0, yb = 0;  // bytes of a row
  };

 private:
  Napi::Value Push(const Napi::CallbackInfo& info);
  Napi::Value Drain(const Napi::CallbackInfo& info);
  Napi::Value Reset(const Napi::CallbackInfo& info);
  Napi::Value Dispose(const Napi::CallbackInfo& info);
  void check(Napi::Env env) const;

  std::shared_ptr<Rows> rows_;
  std::shared_ptr<bool> busy_ = std::make_shared<bool>(false);  // a copy in flight (JS thread only)
  uint64_t size_ = 0, count_ = 0;
  std::vector<uint32_t> phys_;            // slot -> row of Rows (the drained last slot moves by index)
  std::vector<double> batch_, row_;       // each held row's batch and row in it, for errors
  std::vector<uint32_t> stamp_, writer_;  // per push: the incoming row a held row took last
  uint32_t pushes_ = 0;
};

}  // namespace nna::addon
