// cpu_train.h: one training / evaluation run on the CPU backend (cpu_train.cc).
#pragma once
#include "../train/train.h"

namespace nna {

// Throws Failure on bad parameters; the header at `base` was validated when the arena was made.
void runCpu(void* base, const RunParams& p);

}  // namespace nna
