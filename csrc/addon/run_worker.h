// run_worker.h: work on an arena's memory off the JS thread (a training run, a JIT launch),
// resolved as a promise. The worker shares ownership of the block, so the arena's memory
// outlives a dispose() or a forgotten handle until the work ends; it holds the block's mutex
// while it works (never beside another run or a transfer) and reports its end to `owner` on
// the JS thread.
#pragma once
#include <napi.h>

#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../core/block.h"
#include "../core/failure.h"
#include "../nccl/communicator.h"
#include "../train/train.h"
#include "promise_worker.h"

namespace nna::addon {

// What work reports back to: the arena handle that queued it (arena_handle.h).
struct RunOwner {
  virtual ~RunOwner() = default;
  virtual void runStarted() = 0;
  virtual void runEnded() = 0;
};

// Work queued behind other work of an arena in call order (a streamed fit queues a window's run
// while the one before trains): each takes a ticket when queued and starts once every earlier
// ticket has ended, whichever of libuv's threads picks it up first.
// `stopped`: a fit's run failed, found its one model diverged or was refused its window: the
// runs queued after it do nothing until a fit's first run (read and set by the work in turn).
struct RunTurns {
  std::mutex m;
  std::condition_variable cv;
  uint64_t issued = 0, ended = 0;
  bool stopped = false;
};

class BlockWorker : public PromiseWorker {
 public:
  // `work` runs off the JS thread with the block's mutex held; what it returns resolves the
  // promise: `shape` of it where given, else the string (undefined when empty). `self`: the
  // owner's JS object, kept alive until the work has reported its end. `turns`: work that
  // waits its turn (RunTurns), or null.
  using Work = std::function<std::string(Block&)>;
  using Shape = std::function<Napi::Value(Napi::Env, const std::string&)>;
  BlockWorker(Napi::Env env, const char* name, std::shared_ptr<Block> block, RunOwner* owner, Napi::Object self, Work work, std::shared_ptr<RunTurns> turns = nullptr,
              Shape shape = nullptr);
  // Queues the work and returns its promise.
  Napi::Promise start();

 private:
  void Run() override;
  Napi::Value Result() override;
  void Ended(bool) override;

  std::shared_ptr<Block> block_;
  RunOwner* owner_;
  Napi::ObjectReference self_;
  Work work_;
  std::shared_ptr<RunTurns> turns_;
  uint64_t ticket_ = 0;
  Shape shape_;
  std::string result_;
};

// One training / evaluation run: resolves with the path that ran ("cpu", "fused", ...). `comm`:
// the arena's data-parallel group, or null.
Napi::Promise startRun(Napi::Env env, std::shared_ptr<Block> block, std::shared_ptr<Communicator> comm, const RunParams& p, RunOwner* owner, Napi::Object self);
// The run of one replica, on the calling thread (block mutex held, device current).
std::string runReplica(Block& b, Communicator* comm, const RunParams& p);

// What a run queued behind another brings back, read by its worker before the next run can
// change it: the stats bytes, clipping's norms, fp16's loss scale [scale, good, skipped].
struct Readback {
  std::vector<uint8_t> stats;
  std::vector<double> gradNorms;
  double lossScale[3] = {0, 0, 0};
};
// Runs p on the block (one replica) and fills `out`: out.stats.size() bytes of stats from
// `statsOffset` (one counted transfer). Under fp16 a run that is not its fit's `first` goes on
// from the loss scale the run before it left (the block's), which its parameters could not
// know when it was queued.
std::string runAndReadBack(Block& b, RunParams p, bool first, uint64_t statsOffset, Readback& out);
// Sets `stats` (an ArrayBuffer, empty where the run did not run), `gradNorms` and `lossScale` on o.
void setReadback(Napi::Env env, Napi::Object o, const Readback& r, bool ran);
// The arena value at `bytes` (a float64 where `f64`, else a float32), as a double.
inline double valueAt(const uint8_t* bytes, bool f64) {
  if (f64) {
    double d;
    std::memcpy(&d, bytes, sizeof d);
    return d;
  }
  float f;
  std::memcpy(&f, bytes, sizeof f);
  return f;
}

}  // namespace nna::addon
