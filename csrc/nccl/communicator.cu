// communicator.cu: NCCL communicators (one per rank and device), destroyed and aborted with
// the in-process ranks of their group (comm_group.h), and a run of one rank, with the gradient
// sync of the group when it reduces (nccl_sync.cuh).
#include "communicator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "../core/failure.h"
#include "../cuda/check.cuh"
#include "../cuda/cuda_train.h"
#include "../train/train.h"
#include "comm_group.h"
#include "nccl_loader.h"
#include "nccl_sync.cuh"

namespace nna {

NcclInfo ncclInfo() {
  NcclInfo i;
  const nccl::Api& a = nccl::api();
  i.available = a.status.empty();
  i.version = a.version;
  i.why = a.status;
  return i;
}

NcclId ncclUniqueId() {
  const nccl::Api& a = nccl::require();
  nccl::UniqueId id;
  nccl::check(a.getUniqueId(&id), "ncclGetUniqueId");
  NcclId out;
  std::memcpy(out.data(), id.internal, out.size());
  return out;
}

Communicator::Communicator(int rank, int world, int device, Wire wire) : rank_(rank), world_(world), device_(device), wire_(wire) {}

void* Communicator::wireScratch(uint64_t bytes) {
  if (bytes > scratchBytes_) {
    if (scratch_) CUDA_CHECK(cudaFree(scratch_));
    scratch_ = nullptr;
    scratchBytes_ = 0;
    CUDA_CHECK(cudaMalloc(&scratch_, bytes));
    scratchBytes_ = bytes;
  }
  return scratch_;
}

void Communicator::setUp() {
  DeviceScope scope(device_);
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  updates_ = s;
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  ready_ = e;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  reduced_ = e;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  free_ = e;
  for (void*& d : done_) {
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    d = e;
  }
  CUDA_CHECK(cudaMalloc(&saved_, 8 * sizeof(double)));
}

std::vector<std::shared_ptr<Communicator>> Communicator::createAll(const std::vector<int>& devices, Wire wire) {
  const nccl::Api& a = nccl::require();
  const int n = int(devices.size());
  if (n < 1) NNA_FAIL_FIELD("BAD_OPTION", "devices", "a group needs at least one device");
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < i; ++j)
      if (devices[i] == devices[j]) NNA_FAIL_FIELD("BAD_OPTION", "devices", "device " + std::to_string(devices[i]) + " is listed twice");
  std::vector<nccl::Comm> comms(size_t(n), nullptr);
  nccl::check(a.commInitAll(comms.data(), n, devices.data()), "ncclCommInitAll");
  auto group = std::make_shared<CommGroup>();
  std::vector<std::shared_ptr<Communicator>> out;
  for (int i = 0; i < n; ++i) {  // owned at once, so that a failure below destroys them all
    out.emplace_back(new Communicator(i, n, devices[size_t(i)], wire));
    out.back()->comm_ = comms[size_t(i)];
    out.back()->group_ = group;
    group->members.push_back(out.back().get());
    group->comms.push_back(comms[size_t(i)]);
  }
  group->quiet.assign(size_t(n), true);
  group->released.assign(size_t(n), false);
  for (auto& c : out) c->setUp();
  return out;
}

std::shared_ptr<Communicator> Communicator::createRank(const NcclId& id, int world, int rank, int device, Wire wire) {
  const nccl::Api& a = nccl::require();
  if (world < 1 || rank < 0 || rank >= world) NNA_FAIL_FIELD("BAD_OPTION", "rank", "rank " + std::to_string(rank) + " outside [0, " + std::to_string(world) + ")");
  DeviceScope scope(device);
  nccl::UniqueId u;
  std::memcpy(u.internal, id.data(), id.size());
  nccl::Comm comm = nullptr;
  nccl::check(a.commInitRank(&comm, world, u, rank), "ncclCommInitRank");
  std::shared_ptr<Communicator> c(new Communicator(rank, world, device, wire));
  c->comm_ = comm;
  c->group_ = std::make_shared<CommGroup>();
  c->group_->members.push_back(c.get());
  c->group_->comms.push_back(comm);
  c->group_->quiet.assign(1, true);
  c->group_->released.assign(1, false);
  c->setUp();
  return c;
}

Communicator::~Communicator() {
  DeviceScope scope(device_, std::nothrow);
  if (group_) {
    std::lock_guard<std::mutex> lock(group_->mutex);
    const size_t i = group_->indexOf(this);
    if (i < group_->released.size()) group_->released[i] = true;
    // The last rank of the group released: destroy every rank's communicator in one group.
    if (std::find(group_->released.begin(), group_->released.end(), false) == group_->released.end()) {
      const nccl::Api& a = nccl::api();
      a.groupStart();
      for (void*& c : group_->comms)
        if (c) {
          a.commDestroy(static_cast<nccl::Comm>(c));
          c = nullptr;
        }
      a.groupEnd();
    }
  }
  if (ready_) cudaEventDestroy(static_cast<cudaEvent_t>(ready_));
  if (reduced_) cudaEventDestroy(static_cast<cudaEvent_t>(reduced_));
  if (free_) cudaEventDestroy(static_cast<cudaEvent_t>(free_));
  for (void* d : done_)
    if (d) cudaEventDestroy(static_cast<cudaEvent_t>(d));
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  if (updates_) cudaStreamDestroy(static_cast<cudaStream_t>(updates_));
  if (saved_) cudaFree(saved_);
  if (scratch_) cudaFree(scratch_);
}

void Communicator::runStarting() {
  std::lock_guard<std::mutex> lock(group_->mutex);
  group_->quiet[group_->indexOf(this)] = false;
}

void Communicator::runEnded() {
  std::lock_guard<std::mutex> lock(group_->mutex);
  group_->quiet[group_->indexOf(this)] = true;
  group_->abortIfQuiet();
}

void Communicator::fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(group_->mutex);
  if (!group_->failed) {
    group_->failed = true;
    group_->why = why;
  }
  group_->cv.notify_all();
  group_->abortIfQuiet();
}

void Communicator::park() {
  std::unique_lock<std::mutex> lock(group_->mutex);
  group_->quiet[group_->indexOf(this)] = true;
  group_->abortIfQuiet();
  group_->cv.wait(lock, [&] { return group_->aborted; });
}

void Communicator::parkAndThrow() {
  park();
  NNA_FAIL("NCCL_ERROR", "run stopped: " + brokenWhy());
}

std::string Communicator::brokenWhy() const {
  std::lock_guard<std::mutex> lock(group_->mutex);
  return group_->failed ? group_->why : std::string();
}

const char* Communicator::run(void* devBase, const void* header, const RunParams& p) {
  struct Running {  // this rank is not quiet while its run may call NCCL
    Communicator& c;
    explicit Running(Communicator& x) : c(x) { c.runStarting(); }
    ~Running() { c.runEnded(); }
  } running(*this);
  if (!p.reduce) return runCuda(devBase, header, p);
  checkRun(header, p);  // before the sync reads the gradient ranges (a compact arena has none to reduce)
  NcclSync sync(*this, devBase, header);
  return runCuda(devBase, header, p, nullptr, &sync);
}

}  // namespace nna
