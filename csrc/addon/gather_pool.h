// gather_pool.h: parallel row copies off the JS thread for streamed windows (read_rows.cc,
// shuffle_pool.cc). A process-wide pool of its own threads, not libuv's: there a window's rows
// would wait behind a run or an upload (UV_THREADPOOL_SIZE would set the pace). A task runs in
// phases (a barrier between them), each split into parts over the pool; its promise settles on
// the JS thread (a thread-safe function) when the last part ends.
#pragma once
#include <napi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace nna::addon {

class GatherTask {
 public:
  virtual ~GatherTask() = default;
  virtual size_t phases() const { return 1; }
  // Items of a phase, and the fewest a part gets (a part is worth a thread only past it).
  virtual size_t items(size_t phase) const = 0;
  virtual size_t grain(size_t phase) const { return 256; }
  // Items [from, to) of `phase`, on a pool thread; a failure goes through fail().
  virtual void run(size_t phase, size_t from, size_t to) = 0;
  // What the promise resolves with; on the JS thread, as it settles.
  virtual double result() const { return 0; }
  // On the JS thread as it settles (the owner's busy flag).
  virtual void settled() {}
  // The first failure is kept: the promise rejects with it (later phases are skipped).
  void fail(const char* code, const std::string& message);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  const std::string& code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  std::mutex m_;
  std::atomic<bool> failed_{false};
  std::string code_, message_;
};

// The pool's threads for the next task: NN_ARENA_GATHER_THREADS, else the cores up to 12 (with
// 12 a streamed M step runs close to its resident one; with 8 it waited on its windows).
size_t gatherThreads(Napi::Env env);
// Starts `task` on the pool; `keep` (buffers it reads or writes) stay alive until it settles.
// A promise of task->result(), or a rejection with its failure's code.
Napi::Promise startTask(Napi::Env env, std::shared_ptr<GatherTask> task, std::initializer_list<Napi::Value> keep);

}  // namespace nna::addon
