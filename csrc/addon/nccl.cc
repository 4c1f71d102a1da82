// nccl.cc: the addon's data-parallel surface (src/parallel/): NCCL's availability, a unique id
// (rank 0 of a multi-process group), the communicators of a group in one process or of this
// process's rank, and a run of every replica of an in-process group at once.
#include <napi.h>

#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "../budget/budgeted_block.h"
#include "../nccl/communicator.h"
#include "addon_data.h"
#include "arena_handle.h"
#include "convert.h"
#include "functions.h"
#include "js_error.h"
#include "promise_worker.h"
#include "run_worker.h"

namespace nna::addon {

namespace {

ArenaHandle* handleArg(Napi::Env env, const Napi::Value& v) {
  if (!v.IsObject() || !v.As<Napi::Object>().InstanceOf(env.GetInstanceData<AddonData>()->arenaClass.Value())) throwJs(env, "BAD_ARGUMENT", "expected an arena handle");
  return ArenaHandle::Unwrap(v.As<Napi::Object>());
}

std::vector<ArenaHandle*> handlesArg(Napi::Env env, const Napi::Value& v) {
  if (!v.IsArray() || v.As<Napi::Array>().Length() == 0) throwJs(env, "BAD_ARGUMENT", "expected a non-empty array of arena handles");
  const Napi::Array a = v.As<Napi::Array>();
  std::vector<ArenaHandle*> out;
  for (uint32_t i = 0; i < a.Length(); ++i) out.push_back(handleArg(env, a.Get(i)));
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (out[i] == out[j]) throwJs(env, "BAD_ARGUMENT", "an arena is listed twice");
  return out;
}

// An arena that may become a rank: CUDA, plain device memory, idle, in no group yet.
std::shared_ptr<Block> rankArena(Napi::Env env, ArenaHandle* h) {
  std::shared_ptr<Block> b = h->live(env, true);
  if (!b->options().cuda) throwJs(env, "NOT_SUPPORTED", "data parallelism needs the CUDA backend; this arena uses the CPU backend");
  if (dynamic_cast<BudgetedBlock*>(b.get()) || b->options().memory != Memory::Device)
    throwJs(env, "NOT_SUPPORTED", "a data-parallel replica needs plain device memory (memory: 'device', no deviceBudget)");
  if (h->comm()) throwJs(env, "BUSY", "this arena is already a rank of a data-parallel group");
  return b;
}

Napi::Value NcclInfoJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const NcclInfo n = ncclInfo();
  Napi::Object o = Napi::Object::New(env);
  o.Set("available", Napi::Boolean::New(env, n.available));
  o.Set("version", Napi::Number::New(env, n.version));
  o.Set("why", Napi::String::New(env, n.why));
  return o;
}

Napi::Value NcclUniqueIdJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const NcclId id = guarded(env, [] { return ncclUniqueId(); });
  Napi::Uint8Array out = Napi::Uint8Array::New(env, id.size());
  std::copy(id.begin(), id.end(), out.Data());
  return out;
}

// The wire of a group: 'full' (absent) or 'bf16' (DataParallelOptions.gradients, checked in JS).
Wire wireArg(Napi::Env env, const Napi::Value& v) {
  if (v.IsUndefined() || (v.IsString() && v.As<Napi::String>().Utf8Value() == "full")) return Wire::Full;
  if (v.IsString() && v.As<Napi::String>().Utf8Value() == "bf16") return Wire::Bf16;
  throwJs(env, "BAD_ARGUMENT", "gradients must be 'full' or 'bf16'");
}

// ncclInitAll(handles): one communicator per arena, each on its arena's device (ncclCommInitAll).
Napi::Value NcclInitAll(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::vector<ArenaHandle*> hs = handlesArg(env, info[0]);
  std::vector<int> devices;
  for (ArenaHandle* h : hs) devices.push_back(rankArena(env, h)->backend().device());
  const Wire wire = wireArg(env, info[1]);
  std::vector<std::shared_ptr<Communicator>> comms = guarded(env, [&] { return Communicator::createAll(devices, wire); });
  for (size_t i = 0; i < hs.size(); ++i) hs[i]->setComm(comms[i]);
  return env.Undefined();
}

// ncclInitRank(handle, id, rank, world): resolves once every rank of the group joined.
class InitRankWorker : public PromiseWorker {
 public:
  InitRankWorker(Napi::Env env, ArenaHandle* h, Napi::Object self, std::shared_ptr<Block> b, NcclId id, int rank, int world, Wire wire)
      : PromiseWorker(env, "nn-arena:nccl-init"), h_(h), self_(Napi::Persistent(self)), block_(std::move(b)), id_(id), rank_(rank), world_(world), wire_(wire) {}
  Napi::Promise start() {
    h_->runStarted();
    Queue();
    return promise();
  }

 private:
  void Run() override { comm_ = Communicator::createRank(id_, world_, rank_, block_->backend().device(), wire_); }
  void Ended(bool ok) override {
    if (ok) h_->setComm(comm_);
    h_->runEnded();
  }

  ArenaHandle* h_;
  Napi::ObjectReference self_;
  std::shared_ptr<Block> block_;
  NcclId id_;
  int rank_, world_;
  Wire wire_;
  std::shared_ptr<Communicator> comm_;
};

Napi::Value NcclInitRank(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ArenaHandle* h = handleArg(env, info[0]);
  const std::vector<uint8_t> bytes = bytesOf(env, info[1], "id");
  const uint64_t rank = exactU64(env, info[2], "rank"), world = exactU64(env, info[3], "world");
  if (bytes.size() != NcclId().size()) throwJs(env, "BAD_ARGUMENT", "an NCCL unique id is 128 bytes");
  if (world < 1 || world > 65536 || rank >= world) throwJs(env, "BAD_ARGUMENT", "rank " + std::to_string(rank) + " outside [0, world " + std::to_string(world) + ")");
  std::shared_ptr<Block> b = rankArena(env, h);
  NcclId id;
  std::copy(bytes.begin(), bytes.end(), id.begin());
  auto* w = new InitRankWorker(env, h, info[0].As<Napi::Object>(), std::move(b), id, int(rank), int(world), wireArg(env, info[4]));
  return w->start();
}

// ncclLeave(handle): the arena leaves its group (the communicator goes once no run holds it).
Napi::Value NcclLeave(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ArenaHandle* h = handleArg(env, info[0]);
  if (h->busy()) throwJs(env, "BUSY", "a run is in flight on this arena; await it before leaving the group");
  h->setComm(nullptr);
  return env.Undefined();
}

// runReplicas(handles, params): one run of every replica of an in-process group, each on a
// thread of its own (the ranks of a collective must run at once; libuv's pool of 4 would
// deadlock 8 of them), resolved when all have ended. A failure of one aborts the others (their
// NCCL calls would otherwise wait forever) and rejects with the first cause.
class ReplicasWorker : public PromiseWorker {
 public:
  struct Replica {
    ArenaHandle* handle;
    Napi::ObjectReference self;
    std::shared_ptr<Block> block;
    std::shared_ptr<Communicator> comm;
    RunParams params;
  };
  ReplicasWorker(Napi::Env env, std::vector<Replica> rs) : PromiseWorker(env, "nn-arena:replicas"), rs_(std::move(rs)) {}
  Napi::Promise start() {
    for (Replica& r : rs_) r.handle->runStarted();
    Queue();
    return promise();
  }

 private:
  void Run() override {
    std::vector<std::string> paths(rs_.size());
    std::vector<Failure> failures(rs_.size(), Failure("", ""));
    auto one = [&](size_t i) {
      Replica& r = rs_[i];
      try {
        std::lock_guard<std::mutex> lock(r.block->mutex());
        if (r.block->released()) NNA_FAIL("DISPOSED", "a replica's arena was disposed");
        try {
          r.block->backend().activate();
          paths[i] = runReplica(*r.block, r.comm.get(), r.params);
        } catch (...) {
          r.block->releaseIfAsked();
          throw;
        }
        r.block->releaseIfAsked();
      } catch (const Failure& e) { failures[i] = e; } catch (const std::exception& e) {
        failures[i] = Failure("INTERNAL", e.what());
      }
      // A replica that failed before its sync existed (a disposed arena, a bad parameter) must
      // still release the peers that wait for it.
      if (!failures[i].code.empty() && r.comm) r.comm->fail("replica " + std::to_string(i) + " failed: " + failures[i].what());
    };
    std::vector<std::thread> threads;
    try {
      for (size_t i = 1; i < rs_.size(); ++i) threads.emplace_back(one, i);
    } catch (const std::exception& e) {  // no thread: nothing can run; the started ones are released
      for (Replica& r : rs_)
        if (r.comm) r.comm->fail("could not start a replica thread");
      for (std::thread& t : threads) t.join();
      return fail(Failure("INTERNAL", std::string("could not start a replica thread: ") + e.what()));
    }
    one(0);
    for (std::thread& t : threads) t.join();
    // The first cause: a failure that is not a replica stopped because of another's.
    const Failure* first = nullptr;
    for (const Failure& f : failures)
      if (!f.code.empty() && (!first || (std::string(first->what()).rfind("run stopped:", 0) == 0 && std::string(f.what()).rfind("run stopped:", 0) != 0))) first = &f;
    if (first) return fail(*first);
    result_ = paths[0];
  }
  Napi::Value Result() override { return Napi::String::New(Env(), result_); }
  void Ended(bool) override {
    for (Replica& r : rs_) r.handle->runEnded();
  }

  std::vector<Replica> rs_;
  std::string result_;
};

Napi::Value RunReplicas(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::vector<ArenaHandle*> hs = handlesArg(env, info[0]);
  if (!info[1].IsArray() || info[1].As<Napi::Array>().Length() != hs.size()) throwJs(env, "BAD_ARGUMENT", "expected one run parameter object per replica");
  std::vector<RunParams> ps;
  for (uint32_t i = 0; i < hs.size(); ++i) ps.push_back(runParamsOf(env, info[1].As<Napi::Array>().Get(i)));
  // Every argument converted: now the arenas.
  std::vector<ReplicasWorker::Replica> rs;
  for (size_t i = 0; i < hs.size(); ++i) {
    std::shared_ptr<Block> b = hs[i]->live(env, true);
    if (ps[i].reduce && (!hs[i]->comm() || hs[i]->comm()->world() != int(hs.size())))
      throwJs(env, "NOT_SUPPORTED", "replica " + std::to_string(i) + " is not a rank of a group of " + std::to_string(hs.size()));
    rs.push_back({hs[i], Napi::Persistent(info[0].As<Napi::Array>().Get(uint32_t(i)).As<Napi::Object>()), std::move(b), hs[i]->comm(), ps[i]});
  }
  auto* w = new ReplicasWorker(env, std::move(rs));
  return w->start();
}

// groupInfo(handle): { rank, world, device } of the arena's group, or undefined.
Napi::Value GroupInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ArenaHandle* h = handleArg(env, info[0]);
  if (!h->comm()) return env.Undefined();
  Napi::Object o = Napi::Object::New(env);
  o.Set("rank", Napi::Number::New(env, h->comm()->rank()));
  o.Set("world", Napi::Number::New(env, h->comm()->world()));
  o.Set("device", Napi::Number::New(env, h->comm()->device()));
  return o;
}

}  // namespace

void registerNccl(Napi::Env env, Napi::Object exports) {
  exportFunctions(env, exports,
                  {{"ncclInfo", NcclInfoJs},
                   {"ncclUniqueId", NcclUniqueIdJs},
                   {"ncclInitAll", NcclInitAll},
                   {"ncclInitRank", NcclInitRank},
                   {"ncclLeave", NcclLeave},
                   {"runReplicas", RunReplicas},
                   {"groupInfo", GroupInfo}});
}

}  // namespace nna::addon
