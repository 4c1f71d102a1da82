#include "device_meter.h"

#include <algorithm>
#include <chrono>

#include "../cuda/check.cuh"

namespace nna {

MeterThread::MeterThread(DeviceMeter& meter) : meter_(meter) {
  CUDA_CHECK(cudaGetDevice(&device_));
  meter_.peakInUse = 0;
  meter_.samples = 0;
  meter_.waitMicros = meter_.fetchMicros = meter_.evictMicros = 0;
  sample();
  thread_ = std::thread([this] {
    // A thread starts without a current device: use the run's. Errors end the sampling only
    // (the run itself reports its own); the samples taken so far stay.
    if (cudaSetDevice(device_) != cudaSuccess) return;
    while (running_.load()) {
      size_t freeB = 0, totalB = 0;
      if (cudaMemGetInfo(&freeB, &totalB) != cudaSuccess) return;
      meter_.peakInUse = std::max<uint64_t>(meter_.peakInUse, totalB - freeB);
      meter_.samples++;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
}

void MeterThread::sample() {
  meter_.peakInUse = std::max(meter_.peakInUse, deviceBytesInUse());
  meter_.samples++;
}

void MeterThread::stop() {
  if (!thread_.joinable()) return;
  running_ = false;
  thread_.join();
  sample();
}

}  // namespace nna
