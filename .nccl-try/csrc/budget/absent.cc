// absent.cc: linked instead of csrc/budget/*.cu when nvcc was not found at build time (a budget
// needs the CUDA backend, which such a build does not have).
#include "../core/failure.h"
#include "budgeted_block.h"

namespace nna {

const char* runBudgeted(BudgetedBlock&, const RunParams&) { NNA_FAIL("NO_DEVICE", cudaInfo().why); }
const char* managedLastPrefetch(const void*, size_t) { NNA_FAIL("NO_DEVICE", cudaInfo().why); }

}  // namespace nna
