// check.cuh: every CUDA runtime call goes through CUDA_CHECK, which throws a Failure naming
// the call site, the CUDA error name and its message. Out-of-memory gets its own code.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "../core/failure.h"

namespace nna {

inline const char* cudaCode(cudaError_t e) {
  switch (e) {
    case cudaErrorMemoryAllocation: return "CUDA_OOM";
    case cudaErrorNoDevice: case cudaErrorInsufficientDriver: return "NO_DEVICE";
    default: return "CUDA_ERROR";
  }
}

inline void cudaCheck(cudaError_t e, const char* what, const char* file, int line) {
  if (e == cudaSuccess) return;
  fail(cudaCode(e), std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e), file, line);
}

}  // namespace nna

#define CUDA_CHECK(call) ::nna::cudaCheck((call), #call, __FILE__, __LINE__)
