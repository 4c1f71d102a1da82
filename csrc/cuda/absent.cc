// absent.cc: linked instead of csrc/cuda/*.cu when nvcc was not found at build time.
#include "../core/backend.h"
#include "../core/failure.h"
#include "cuda_train.h"

namespace nna {

CudaInfo cudaInfo() {
  CudaInfo i;
  i.why = "this nn-arena binary was built without CUDA (CPU only)";
  return i;
}
std::unique_ptr<Backend> makeCudaBackend() { NNA_FAIL("NO_DEVICE", cudaInfo().why); }
void cudaProbeBind(void*, uint32_t, uint64_t*) { NNA_FAIL("NO_DEVICE", cudaInfo().why); }
uint64_t deviceBytesInUse() { NNA_FAIL("NO_DEVICE", cudaInfo().why); }
const char* runCuda(void*, const void*, const RunParams&, LayerHooks*) { NNA_FAIL("NO_DEVICE", cudaInfo().why); }
bool productsUseBlas(const nna_header&, const std::vector<nna_layer>&) { return false; }

}  // namespace nna
