// communicator.h: one rank of a data-parallel group on one CUDA device (an NCCL communicator,
// its stream and events), and the gradient sync a run of that rank's arena uses
// (csrc/cuda/grad_sync.h). In one process the ranks of a group come from ncclCommInitAll; across
// processes each from ncclCommInitRank with the unique id rank 0 handed out (src/parallel/).
// A CPU-only build links absent.cc: every entry fails with NCCL_UNAVAILABLE.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../train/train.h"

namespace nna {

struct NcclInfo {
  bool available = false;
  int version = 0;  // NCCL_VERSION_CODE of the library found (22805: 2.28.5)
  std::string why;  // why not available
};
NcclInfo ncclInfo();

using NcclId = std::array<uint8_t, 128>;
// ncclGetUniqueId on rank 0 (initialises the network bootstrap; the id names its address).
NcclId ncclUniqueId();

struct CommGroup;  // the in-process ranks of a group: destroyed and aborted together

// What crosses the link: the gradients in the arena's dtype, or rounded to bfloat16 (float32
// arenas; the sums widened back into the arena's gradients: DataParallelOptions.gradients).
enum class Wire { Full, Bf16 };

class Communicator {
 public:
  // One communicator per device of `devices` (distinct), all in this process (ncclCommInitAll).
  static std::vector<std::shared_ptr<Communicator>> createAll(const std::vector<int>& devices, Wire wire);
  // Rank `rank` of `world` on `device`, joining the group of `id` (blocks until every rank joins).
  static std::shared_ptr<Communicator> createRank(const NcclId& id, int world, int rank, int device, Wire wire);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  int device() const { return device_; }
  // One run of the arena at devBase (its validated header) as this rank: runCuda with the
  // group's gradient sync when p.reduce. The caller has made this rank's device current.
  const char* run(void* devBase, const void* header, const RunParams& p);
  // A run of this rank failed: the group is marked, and once every rank of this process is
  // quiet (parked in a wait for its peers, or done with its run) all of them are aborted in
  // one grouped call (ncclCommAbort and ncclCommDestroy are intra-node collectives: ranks
  // driven by one thread must be grouped). The communicators cannot be used again.
  void fail(const std::string& why);
  // Starts a run of every rank of the in-process group (runReplicas) / one rank's run ended.
  void runStarting();
  void runEnded();
  // "" while usable, else why not.
  std::string brokenWhy() const;

 private:
  Communicator(int rank, int world, int device, Wire wire);
  // The bf16 wire's device scratch of at least `bytes` (kept, grown; on this rank's device).
  void* wireScratch(uint64_t bytes);
  void setUp();
  // The group failed: this rank is quiet until every rank is aborted (then, throws).
  void park();
  [[noreturn]] void parkAndThrow();
  friend class NcclSync;
  friend struct CommGroup;
  int rank_, world_, device_;
  Wire wire_;
  void* scratch_ = nullptr;  // Wire::Bf16: a range's gradients in bfloat16 while they are reduced
  uint64_t scratchBytes_ = 0;
  void* comm_ = nullptr;                // ncclComm_t (the group frees it: destroyed or aborted with its peers)
  void* stream_ = nullptr;              // cudaStream_t: reductions (and, NN_ARENA_SYNC_OVERLAP=0, updates)
  void* updates_ = nullptr;             // cudaStream_t: the layers' optimizer steps, each after its reduction
  void* ready_ = nullptr;               // cudaEvent_t: compute -> stream
  void* reduced_ = nullptr;             // cudaEvent_t: stream -> updates (a layer's reduction queued)
  void* free_ = nullptr;                // cudaEvent_t: compute -> updates (a layer's weights read for the step)
  void* done_[2] = {nullptr, nullptr};  // cudaEvent_t: stream -> compute, even and odd steps
  double* saved_ = nullptr;             // device scratch: the stats before a run (8 values)
  // Destroys the graph (of this rank's arena) that holds collectives of comm_; set by a graphed
  // run (GradSync::graphOwner), called under the group's mutex before an abort.
  std::function<void()> releaseGraph_;
  // The steps' collectives (NcclSync::collectives_) that ran directly on comm_, each once: a step
  // with the same ones may be captured (GradSync::capturable). Only this rank's runs touch it.
  std::vector<std::vector<uint64_t>> connected_;
  std::shared_ptr<CommGroup> group_;
};

}  // namespace nna
