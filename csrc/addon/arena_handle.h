// arena_handle.h: the JS object behind an Arena (src/arena/arena.ts). It owns the block through a
// shared_ptr that views and runs share, so memory is never freed under a view or a run; it
// refuses transfers while a run holds the block (BUSY) instead of blocking the JS thread, and
// dispose() returns at once (a run in flight frees the memory as it ends).
#pragma once
#include <napi.h>

#include <memory>
#include <vector>

#include "../core/block.h"
#include "../nccl/communicator.h"
#include "convert.h"
#include "run_worker.h"

namespace nna::addon {

class ArenaHandle : public Napi::ObjectWrap<ArenaHandle>, public RunOwner {
 public:
  static Napi::Function Define(Napi::Env env);
  // new ArenaHandle(header: Uint8Array, options: NativeArenaOptions)
  explicit ArenaHandle(const Napi::CallbackInfo& info);
  // During garbage collection itself (a pure finalizer: no JS): drops the handle's share of the
  // block, so a forgotten arena's memory goes back even while a synchronous loop never yields.
  void Finalize(Napi::BasicEnv env) override;
  // Later, on the event loop: nothing more to do, but defining it defers the deletion of this
  // object (and of its JS references) out of the collection.
  void Finalize(Napi::Env env) override;
  void runEnded() override;
  // Another run-like job (a JIT launch, addon/jit.cc) was queued on this arena: transfers are
  // BUSY and synchronize() waits until it ends too.
  void runStarted() override { ++runsInFlight_; }

  // The block, for a call whose arguments are all converted: DISPOSED once disposed; with
  // `idle`, BUSY while a run holds it.
  std::shared_ptr<Block> live(Napi::Env env, bool idle) const;
  // live(env, true) for a run on the JS thread (runInline, predictRows): NOT_SUPPORTED for a
  // data-parallel group's or a budgeted arena.
  std::shared_ptr<Block> inlineBlock(Napi::Env env) const;
  uint32_t numLayers() const { return numLayers_; }
  // The data-parallel group this arena is a rank of (nccl.cc); null when none.
  const std::shared_ptr<Communicator>& comm() const { return comm_; }
  void setComm(std::shared_ptr<Communicator> c) { comm_ = std::move(c); }
  bool busy() const { return runsInFlight_ > 0; }
  // The order of runs queued while others are in flight (runQueued, window_stager.cc's run).
  const std::shared_ptr<RunTurns>& turns() const { return turns_; }

 private:
  Napi::Value Transfer(const Napi::CallbackInfo& info);
  Napi::Value TransferAll(const Napi::CallbackInfo& info);
  Napi::Value Prefetch(const Napi::CallbackInfo& info);
  Napi::Value Advise(const Napi::CallbackInfo& info);
  Napi::Value View(const Napi::CallbackInfo& info);
  Napi::Value Stats(const Napi::CallbackInfo& info);
  Napi::Value Dispose(const Napi::CallbackInfo& info);
  Napi::Value Addresses(const Napi::CallbackInfo& info);
  Napi::Value Run(const Napi::CallbackInfo& info);
  Napi::Value RunQueued(const Napi::CallbackInfo& info);
  Napi::Value RunInline(const Napi::CallbackInfo& info);
  Napi::Value PredictRows(const Napi::CallbackInfo& info);
  Napi::Value Residency(const Napi::CallbackInfo& info);
  Napi::Value GradNorms(const Napi::CallbackInfo& info);
  Napi::Value LossScaleState(const Napi::CallbackInfo& info);
  Napi::Value GraphSteps(const Napi::CallbackInfo& info);
  Napi::Value Epilogues(const Napi::CallbackInfo& info);
  Napi::Value Synchronize(const Napi::CallbackInfo& info);
  void releaseExternal(Napi::BasicEnv env);
  static Napi::Symbol owner(Napi::Env env);

  std::shared_ptr<Block> block_;
  std::shared_ptr<Communicator> comm_;  // runs in flight hold it too
  ParamsCache params_;                  // runInline's and predictRows' base parameters, read once
  nna::Stats finalStats_;               // after dispose(): the counters it ended with
  std::vector<Napi::Reference<Napi::ArrayBuffer>> views_;
  uint32_t numLayers_ = 0;
  uint32_t runsInFlight_ = 0;
  std::vector<Napi::Promise::Deferred> idleWaiters_;  // synchronize() calls, resolved at idle
  int64_t external_ = 0;
  std::shared_ptr<RunTurns> turns_ = std::make_shared<RunTurns>();
};

}  // namespace nna::addon
