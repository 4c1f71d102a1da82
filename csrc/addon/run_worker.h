// run_worker.h: one training / evaluation run off the JS thread, resolved as a promise. The
// worker shares ownership of the block, so the arena's memory outlives a dispose() or a
// forgotten handle until the run ends; it reports its end to `owner` on the JS thread.
#pragma once
#include <napi.h>

#include <memory>
#include <string>

#include "../core/block.h"
#include "../core/failure.h"
#include "../train/train.h"

namespace nna::addon {

// What a run reports back to: the arena handle that queued it (arena_handle.h).
struct RunOwner {
  virtual ~RunOwner() = default;
  virtual void runEnded() = 0;
};

class RunWorker : public Napi::AsyncWorker {
 public:
  // `self`: the owner's JS object, kept alive until the run has reported its end.
  RunWorker(Napi::Env env, std::shared_ptr<Block> block, const RunParams& p, RunOwner* owner, Napi::Object self);
  Napi::Promise promise() { return deferred_.Promise(); }

  void Execute() override;
  void OnOK() override;
  void OnError(const Napi::Error& e) override;

 private:
  std::shared_ptr<Block> block_;
  RunParams p_;
  RunOwner* owner_;
  Napi::ObjectReference self_;
  Napi::Promise::Deferred deferred_;
  Failure failure_{"", ""};
  std::string path_ = "cpu";  // which kernel path ran (resolved to JS)
};

}  // namespace nna::addon
