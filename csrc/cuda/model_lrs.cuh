// model_lrs.cuh: a run's per-model learning rates (RunParams::lrs, K-model arenas) on the
// device for the length of the run; null when every model uses RunParams::lr. Kernels convert
// lrs[m] to T exactly as hyperAt converts lr, so model m rounds as a run of it alone.
#pragma once
#include <cuda_runtime.h>

#include <vector>

#include "check.cuh"

namespace nna {

class DeviceLrs {
 public:
  DeviceLrs(const std::vector<double>& lrs, cudaStream_t stream) {
    if (lrs.empty()) return;
    CUDA_CHECK(cudaMalloc(&p_, lrs.size() * sizeof(double)));
    try {
      CUDA_CHECK(cudaMemcpyAsync(p_, lrs.data(), lrs.size() * sizeof(double), cudaMemcpyHostToDevice, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));  // the host vector may go before the kernels run
    } catch (...) {
      cudaFree(p_);
      throw;
    }
  }
  ~DeviceLrs() {
    if (p_) cudaFree(p_);
  }
  DeviceLrs(const DeviceLrs&) = delete;
  DeviceLrs& operator=(const DeviceLrs&) = delete;
  const double* get() const { return p_; }

 private:
  double* p_ = nullptr;
};

}  // namespace nna
