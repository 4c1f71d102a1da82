#include "run_worker.h"

#include <mutex>

#include "../budget/budgeted_block.h"
#include "../cpu/cpu_train.h"
#include "../cuda/cuda_train.h"
#include "js_error.h"

namespace nna::addon {

RunWorker::RunWorker(Napi::Env env, std::shared_ptr<Block> block, const RunParams& p, RunOwner* owner, Napi::Object self)
    : Napi::AsyncWorker(env, "nn-arena:run"), block_(std::move(block)), p_(p), owner_(owner),
      self_(Napi::Persistent(self)), deferred_(Napi::Promise::Deferred::New(env)) {}

// The run dispatch: a budgeted arena's scheduler, the CUDA paths, or the CPU backend.
void RunWorker::Execute() {
  try {
    std::lock_guard<std::mutex> lock(block_->mutex());
    if (block_->released()) NNA_FAIL("DISPOSED", "the arena was disposed");
    try {
      if (auto* budgeted = dynamic_cast<BudgetedBlock*>(block_.get())) path_ = runBudgeted(*budgeted, p_);
      else if (block_->options().cuda) path_ = runCuda(block_->device(), block_->header(), p_);
      else runCpu(block_->device(), p_);
    } catch (...) {
      block_->releaseIfAsked();
      throw;
    }
    block_->releaseIfAsked();  // dispose() during the run: the memory goes now
  } catch (const Failure& e) {
    failure_ = e;
    SetError(e.what());
  } catch (const std::exception& e) {
    failure_ = Failure("INTERNAL", e.what());
    SetError(e.what());
  }
}

// Both ends run on the JS thread, which may be shutting down (worker.terminate() during a run):
// then every call into JS fails, and such a failure must end here, not abort the process.
void RunWorker::OnOK() {
  owner_->runEnded();
  try {
    deferred_.Resolve(Napi::String::New(Env(), path_));
  } catch (...) {
  }
}

void RunWorker::OnError(const Napi::Error&) {
  owner_->runEnded();
  try {
    deferred_.Reject(jsError(Env(), failure_).Value());
  } catch (...) {
  }
}

}  // namespace nna::addon
