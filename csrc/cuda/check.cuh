// check.cuh: every CUDA runtime call goes through CUDA_CHECK, which throws a Failure naming
// the call site, the CUDA error name and its message. Out-of-memory gets its own code.
#pragma once
#include <cuda_runtime.h>

#include <new>
#include <string>

#include "../core/failure.h"

namespace nna {

inline const char* cudaCode(cudaError_t e) {
  switch (e) {
    case cudaErrorMemoryAllocation: return "CUDA_OOM";
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver: return "NO_DEVICE";
    default: return "CUDA_ERROR";
  }
}

inline void cudaCheck(cudaError_t e, const char* what, const char* file, int line) {
  if (e == cudaSuccess) return;
  fail(cudaCode(e), std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e), file, line);
}

}  // namespace nna

#define CUDA_CHECK(call) ::nna::cudaCheck((call), #call, __FILE__, __LINE__)

namespace nna {

// Makes `device` current for one call on the calling thread and puts the previous one back,
// so that an arena on device 1 leaves the JS thread's current device as it was.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device)
      CUDA_CHECK(cudaSetDevice(device));
    else
      previous_ = -1;
  }
  // Quiet, for destructors and failure paths: a CUDA error does not throw (where the current
  // device cannot be read, `device` is made current and nothing is put back).
  DeviceScope(int device, const std::nothrow_t&) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device)
      cudaSetDevice(device);
    else
      previous_ = -1;
  }
  ~DeviceScope() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace nna
