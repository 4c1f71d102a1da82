// promise_worker.h: the one shape of the addon's work off the JS thread (a run, a JIT launch, an
// NCCL join, a streaming upload, a file read): an AsyncWorker whose promise resolves with
// Result() or rejects with the coded error of what Run() threw (a Failure keeps its code, any
// other exception is INTERNAL). Ended(ok) runs first on the JS thread, either way. That thread
// may be shutting down (worker.terminate() during the work): settling then fails, and the
// failure ends here rather than abort the process.
#pragma once
#include <napi.h>

#include <exception>

#include "js_error.h"

namespace nna::addon {

class PromiseWorker : public Napi::AsyncWorker {
 public:
  Napi::Promise promise() { return deferred_.Promise(); }

 protected:
  PromiseWorker(Napi::Env env, const char* name) : Napi::AsyncWorker(env, name), deferred_(Napi::Promise::Deferred::New(env)) {}
  // Off the JS thread.
  virtual void Run() = 0;
  // On the JS thread, after a Run() that did not fail.
  virtual Napi::Value Result() { return Env().Undefined(); }
  virtual void Ended(bool ok) { (void)ok; }
  // Rejects with `f`: a failure Run() settles on without throwing.
  void fail(const Failure& f) {
    failure_ = f;
    SetError(f.what());
  }

 private:
  void Execute() final {
    try {
      Run();
    } catch (const Failure& e) { fail(e); } catch (const std::exception& e) {
      fail(Failure("INTERNAL", e.what()));
    }
  }
  void OnOK() final {
    Ended(true);
    try {
      deferred_.Resolve(Result());
    } catch (...) {}
  }
  void OnError(const Napi::Error&) final {
    Ended(false);
    try {
      deferred_.Reject(jsError(Env(), failure_).Value());
    } catch (...) {}
  }

  Napi::Promise::Deferred deferred_;
  Failure failure_{"INTERNAL", ""};
};

}  // namespace nna::addon
