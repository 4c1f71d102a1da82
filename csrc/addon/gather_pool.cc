#include "gather_pool.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "../core/env.h"
#include "../core/failure.h"
#include "js_error.h"

namespace nna::addon {

void GatherTask::fail(const char* code, const std::string& message) {
  std::lock_guard<std::mutex> lock(m_);
  if (failed_.load(std::memory_order_relaxed)) return;
  code_ = code;
  message_ = message;
  failed_.store(true, std::memory_order_release);
}

namespace {

// Threads that live as long as the process (never joined: they only wait on the queue), grown
// to the largest size asked for.
class Pool {
 public:
  // Grows to n threads; false when not even one could start.
  bool ensure(size_t n) {
    std::lock_guard<std::mutex> lock(m_);
    try {
      for (; threads_ < n; ++threads_) std::thread([this] { loop(); }).detach();
    } catch (...) {  // no more threads: the ones there are do the work
    }
    return threads_ > 0;
  }
  void submit(std::function<void()> f) {
    {
      std::lock_guard<std::mutex> lock(m_);
      q_.push_back(std::move(f));
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> f;
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [this] { return !q_.empty(); });
        f = std::move(q_.front());
        q_.pop_front();
      }
      f();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  size_t threads_ = 0;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: its threads outlive static destructors
  return *p;
}

// The JS side of a task: settled and freed on the JS thread.
struct Settle {
  Napi::Promise::Deferred deferred;
  std::vector<Napi::Reference<Napi::Value>> kept;
  std::shared_ptr<GatherTask> task;
};

void settle(Napi::Env env, Napi::Function, std::nullptr_t*, Settle* s) {
  if (static_cast<napi_env>(env) == nullptr) {  // the environment is going away: nothing to call
    s->task->settled();
    for (auto& r : s->kept) r.SuppressDestruct();
    delete s;
    return;
  }
  std::unique_ptr<Settle> own(s);
  s->task->settled();
  try {
    if (s->task->failed())
      s->deferred.Reject(jsError(env, s->task->code(), s->task->message()).Value());
    else
      s->deferred.Resolve(Napi::Number::New(env, s->task->result()));
  } catch (...) {}
}
using Tsfn = Napi::TypedThreadSafeFunction<std::nullptr_t, Settle, settle>;

struct Run : std::enable_shared_from_this<Run> {
  std::shared_ptr<GatherTask> task;
  Settle* js = nullptr;
  Tsfn tsfn;
  size_t threads = 1, phase = 0;
  std::atomic<size_t> left{0};

  void part(size_t ph, size_t from, size_t to) {
    try {
      task->run(ph, from, to);
    } catch (const Failure& e) { task->fail(e.code.c_str(), e.what()); } catch (const std::bad_alloc&) {
      task->fail("HOST_OOM", "out of host memory");
    } catch (const std::exception& e) { task->fail("INTERNAL", e.what()); }
    if (left.fetch_sub(1, std::memory_order_acq_rel) == 1) next();
  }
  // The next phase with items, or the end: called once the previous phase's parts all ended.
  void next() {
    while (phase < task->phases() && !task->failed()) {
      const size_t ph = phase++, n = task->items(ph);
      if (n == 0) continue;
      const size_t parts = std::clamp<size_t>(n / std::max<size_t>(1, task->grain(ph)), 1, threads);
      left.store(parts, std::memory_order_release);
      auto self = shared_from_this();
      for (size_t p = 0; p < parts; ++p) {
        const size_t from = n * p / parts, to = n * (p + 1) / parts;
        try {
          pool().submit([self, ph, from, to] { self->part(ph, from, to); });
        } catch (...) {  // no room in the queue: this thread does the part
          part(ph, from, to);
        }
      }
      return;
    }
    task.reset();              // the JS side's is the last: what the task holds (a mapped file) goes there
    tsfn.NonBlockingCall(js);  // the queue is unbounded: only a closing environment refuses
    tsfn.Release();
  }
};

}  // namespace

size_t gatherThreads(Napi::Env env) {
  const long cores = std::max<long>(1, long(std::thread::hardware_concurrency()));
  try {
    return size_t(knobInt(Knob::GatherThreads, std::min<long>(cores, 12), 1, 256));
  } catch (const Failure& e) { throw jsError(env, e.code, e.what(), "", knobName(Knob::GatherThreads)); }
}

Napi::Promise startTask(Napi::Env env, std::shared_ptr<GatherTask> task, std::initializer_list<Napi::Value> keep) {
  auto run = std::make_shared<Run>();
  run->threads = gatherThreads(env);
  if (!pool().ensure(run->threads)) throwJs(env, "HOST_OOM", "no thread could be started to read the window's rows");
  auto* s = new Settle{Napi::Promise::Deferred::New(env), {}, task};
  for (const Napi::Value& v : keep) s->kept.push_back(Napi::Persistent(v));
  Napi::Promise p = s->deferred.Promise();
  run->task = std::move(task);
  run->js = s;
  run->tsfn = Tsfn::New(env, "nn-arena:gather", 0, 1);
  run->next();
  return p;
}

}  // namespace nna::addon
