#include "run_worker.h"

#include <cstring>
#include <mutex>

#include "../budget/budgeted_block.h"
#include "../cpu/cpu_train.h"
#include "../cuda/cuda_train.h"
#include "../train/run_outputs.h"

namespace nna::addon {

BlockWorker::BlockWorker(Napi::Env env, const char* name, std::shared_ptr<Block> block, RunOwner* owner, Napi::Object self, Work work, std::shared_ptr<RunTurns> turns, Shape shape)
    : PromiseWorker(env, name),
      block_(std::move(block)),
      owner_(owner),
      self_(Napi::Persistent(self)),
      work_(std::move(work)),
      turns_(std::move(turns)),
      shape_(std::move(shape)) {}

Napi::Promise BlockWorker::start() {
  Napi::Promise p = promise();
  if (turns_) {
    std::lock_guard<std::mutex> lock(turns_->m);
    ticket_ = turns_->issued++;
  }
  owner_->runStarted();
  Queue();
  return p;
}

void BlockWorker::Run() {
  // The turn ends however the work ends (the next one waits for it), before the block's mutex
  // is taken (the work before holds it).
  struct Turn {
    RunTurns* t;
    ~Turn() {
      if (!t) return;
      {
        std::lock_guard<std::mutex> lock(t->m);
        ++t->ended;
      }
      t->cv.notify_all();
    }
  } turn{turns_.get()};
  if (turns_) {
    std::unique_lock<std::mutex> wait(turns_->m);
    turns_->cv.wait(wait, [&] { return turns_->ended == ticket_; });
  }
  std::lock_guard<std::mutex> lock(block_->mutex());
  if (block_->released()) NNA_FAIL("DISPOSED", "the arena was disposed");
  try {
    block_->backend().activate();  // a libuv worker thread: the arena's device, every time
    result_ = work_(*block_);
  } catch (...) {
    block_->releaseIfAsked();
    throw;
  }
  block_->releaseIfAsked();  // dispose() during the work: the memory goes now
}

Napi::Value BlockWorker::Result() {
  if (shape_) return shape_(Env(), result_);
  return result_.empty() ? Env().Undefined() : Napi::String::New(Env(), result_);
}

void BlockWorker::Ended(bool) { owner_->runEnded(); }

// The run dispatch: a budgeted arena's scheduler, a data-parallel rank, the CUDA paths, or the
// CPU backend.
std::string runReplica(Block& b, Communicator* comm, const RunParams& params) {
  RunParams p = params;
  RunOutputs& out = runOutputsOf(b);
  p.gradNorms = &out.gradNorms;
  p.gradNorms->clear();
  p.lossScaleOut = &out.lossScale;
  p.graphSteps = &out.graphSteps;
  *p.graphSteps = 0;
  p.epilogues = &out.epilogues;
  *p.epilogues = 0;
  p.runCache = &b.runCache();
  if (auto* budgeted = dynamic_cast<BudgetedBlock*>(&b)) return runBudgeted(*budgeted, p);
  if (comm) return comm->run(b.device(), b.header(), p);
  if (b.options().cuda) return runCuda(b.device(), b.header(), p);
  runCpu(b.device(), p);
  return "cpu";
}

std::string runAndReadBack(Block& blk, RunParams p, bool first, uint64_t statsOffset, Readback& out) {
  const RunOutputs& last = runOutputsOf(blk);
  if (p.lossScale.active() && !first) {
    p.lossScale.scale = last.lossScale.scale;
    p.lossScale.good = last.lossScale.good;
  }
  std::string path = runReplica(blk, nullptr, p);
  out.gradNorms = last.gradNorms;
  const LossScale& ls = last.lossScale;
  out.lossScale[0] = ls.scale, out.lossScale[1] = double(ls.good), out.lossScale[2] = double(ls.skipped);
  if (!out.stats.empty()) blk.readHeld(out.stats.data(), statsOffset, out.stats.size());
  return path;
}

void setReadback(Napi::Env env, Napi::Object o, const Readback& r, bool ran) {
  Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(env, ran ? r.stats.size() : 0);
  if (ran && !r.stats.empty()) std::memcpy(ab.Data(), r.stats.data(), r.stats.size());
  o.Set("stats", ab);
  Napi::Float64Array norms = Napi::Float64Array::New(env, r.gradNorms.size());
  if (!r.gradNorms.empty()) std::memcpy(norms.Data(), r.gradNorms.data(), r.gradNorms.size() * sizeof(double));
  o.Set("gradNorms", norms);
  Napi::Float64Array scale = Napi::Float64Array::New(env, 3);
  for (size_t k = 0; k < 3; ++k) scale[k] = r.lossScale[k];
  o.Set("lossScale", scale);
}

Napi::Promise startRun(Napi::Env env, std::shared_ptr<Block> block, std::shared_ptr<Communicator> comm, const RunParams& p, RunOwner* owner, Napi::Object self) {
  auto* w = new BlockWorker(env, "nn-arena:run", std::move(block), owner, self, [p, comm](Block& b) -> std::string { return runReplica(b, comm.get(), p); });
  return w->start();
}

}  // namespace nna::addon
