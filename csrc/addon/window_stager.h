// window_stager.h: the buffers through which fit() streams a data source (src/train/stream.ts).
// Windows of rows are written by JS into host slots (pinned on CUDA) and copied by a worker
// thread to the slot's own device staging buffer while a run trains on the arena. run() trains
// on a staged window: its worker copies it into the arena's data regions, checking it for
// non-finite values in the same pass (device to device; the host reads a window's bytes once),
// runs, and reads the stats back, so nothing waits on the JS thread between two windows; it may
// be queued while the run before it trains (RunTurns keep the order). A staging buffer per
// slot lets the window after next go up while the next one waits in its buffer (an epoch's
// short last window otherwise leaves the device idle while the next epoch's first one uploads). The arena itself is touched only by run().
#pragma once
#include <napi.h>

#include <atomic>
#include <memory>
#include <vector>

#include "../core/block.h"

namespace nna::addon {

class ArenaHandle;

class WindowStager : public Napi::ObjectWrap<WindowStager> {
 public:
  static Napi::Function Define(Napi::Env env);
  // new WindowStager(handle, xOffset, xCapacity, yOffset, yCapacity, f64, slots)
  explicit WindowStager(const Napi::CallbackInfo& info);
  void Finalize(Napi::BasicEnv env) override;

  // The memory, shared with an upload in flight: freed when both let go.
  struct Buffers {
    std::shared_ptr<Block> block;
    std::vector<uint8_t*> slots;
    std::vector<uint8_t*> staged;  // slot i's device staging buffer
    uint64_t bytes = 0;            // of a slot, and of a staging buffer
    bool pinned = false;
    std::atomic<int> runsQueued[4] = {};  // runs of slot i's staged window not yet past its copy: no upload into it
    ~Buffers();
  };

 private:
  Napi::Value Slot(const Napi::CallbackInfo& info);
  Napi::Value Upload(const Napi::CallbackInfo& info);
  Napi::Value Run(const Napi::CallbackInfo& info);
  Napi::Value Dispose(const Napi::CallbackInfo& info);
  std::shared_ptr<Buffers> live(Napi::Env env) const;

  std::shared_ptr<Buffers> buffers_;
  Napi::ObjectReference handle_;  // the arena's handle: run() goes through its checks
  ArenaHandle* arena_ = nullptr;
  uint64_t xOffset_ = 0, xCapacity_ = 0, yOffset_ = 0, yCapacity_ = 0;
  bool f64_ = false;
  int64_t uploading_ = -1;  // the slot whose upload is in flight, or -1
  std::vector<Napi::Reference<Napi::ArrayBuffer>> views_;
};

}  // namespace nna::addon
