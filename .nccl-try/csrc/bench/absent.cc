// absent.cc: linked instead of csrc/bench/*.cu when nvcc was not found at build time.
#include "../core/backend.h"
#include "../core/failure.h"
#include "link_bench.h"

namespace nna {

LinkRates measureLink(size_t) { NNA_FAIL("NO_DEVICE", cudaInfo().why); }

}  // namespace nna
