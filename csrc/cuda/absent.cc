// absent.cc: linked instead of csrc/cuda/*.cu when nvcc was not found at build time.
#include "../core/backend.h"
#include "../core/failure.h"
#include "cuda_train.h"
#include "jit.h"

namespace nna {

CudaInfo cudaInfo() {
  CudaInfo i;
  i.why = "this nn-arena binary was built without CUDA (CPU only)";
  return i;
}
std::unique_ptr<Backend> makeCudaBackend(int) { NNA_FAIL("NO_DEVICE", cudaInfo().why); }
uint64_t deviceBytesInUse() { NNA_FAIL("NO_DEVICE", cudaInfo().why); }
const char* runCuda(void*, const void*, const RunParams&, LayerHooks*, GradSync*) { NNA_FAIL("NO_DEVICE", cudaInfo().why); }
bool productsUseBlas(const nna_header&, const std::vector<nna_layer>&) { return false; }

const char* jitTypeName(JitType) { return "?"; }
uint32_t jitKernel(const std::string&, const std::string&, const std::vector<JitType>&, const std::string&) {
  NNA_FAIL("NOT_SUPPORTED", "JIT kernels need CUDA: " + cudaInfo().why);
}
size_t jitCompileOnly(const std::string&, const std::string&, const std::vector<JitType>&, const std::string&, const std::string&) {
  NNA_FAIL("NOT_SUPPORTED", "JIT kernels need CUDA: " + cudaInfo().why);
}
const std::vector<JitType>* jitParams(uint32_t) { return nullptr; }
void jitLaunch(uint32_t, void*, JitDims, JitDims, uint32_t, const std::vector<JitValue>&) { NNA_FAIL("NOT_SUPPORTED", "JIT kernels need CUDA: " + cudaInfo().why); }

}  // namespace nna
