// absent.cc: linked instead of test/native/*.cu when nvcc was not found at build time.
#include "../../csrc/core/backend.h"
#include "../../csrc/core/failure.h"
#include "device_probe.h"
#include "link_bench.h"

namespace nna {

LinkRates measureLink(size_t) { NNA_FAIL("NO_DEVICE", cudaInfo().why); }
void probeBindOnDevice(void*, uint32_t, uint64_t*) { NNA_FAIL("NO_DEVICE", cudaInfo().why); }
void copyFromDevice(void*, const void*, size_t) { NNA_FAIL("NO_DEVICE", cudaInfo().why); }

}  // namespace nna
