// absent.cc: linked instead of csrc/nccl/*.cu and nccl_loader.cc in a CPU-only build.
#include "../core/failure.h"
#include "communicator.h"

namespace nna {

namespace {
const char* kWhy = "this nn-arena binary was built without CUDA (CPU only): data parallelism needs CUDA and NCCL";
}

NcclInfo ncclInfo() {
  NcclInfo i;
  i.why = kWhy;
  return i;
}
NcclId ncclUniqueId() { NNA_FAIL("NCCL_UNAVAILABLE", kWhy); }
std::vector<std::shared_ptr<Communicator>> Communicator::createAll(const std::vector<int>&, Wire) { NNA_FAIL("NCCL_UNAVAILABLE", kWhy); }
std::shared_ptr<Communicator> Communicator::createRank(const NcclId&, int, int, int, Wire) { NNA_FAIL("NCCL_UNAVAILABLE", kWhy); }
Communicator::~Communicator() = default;
const char* Communicator::run(void*, const void*, const RunParams&) { NNA_FAIL("NCCL_UNAVAILABLE", kWhy); }
void Communicator::fail(const std::string&) {}
void Communicator::runStarting() {}
void Communicator::runEnded() {}
void Communicator::park() {}
void Communicator::parkAndThrow() { NNA_FAIL("NCCL_UNAVAILABLE", kWhy); }
std::string Communicator::brokenWhy() const { return kWhy; }

}  // namespace nna
