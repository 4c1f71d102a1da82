// device_meter.h: samples the device memory in use (cudaMemGetInfo) on a thread for the length
// of a budgeted run, so the residency report gives the peak the device really reached rather
// than a scheduler's own count of what it placed.
#pragma once
#include <atomic>
#include <thread>

#include "budgeted_block.h"

namespace nna {

class MeterThread {
 public:
  // Starts sampling into `meter` (its peak and sample count restart).
  explicit MeterThread(DeviceMeter& meter);
  ~MeterThread() { stop(); }
  MeterThread(const MeterThread&) = delete;
  MeterThread& operator=(const MeterThread&) = delete;
  void stop();  // takes a last sample and joins; safe to call twice

 private:
  void sample();
  DeviceMeter& meter_;
  int device_ = 0;
  std::atomic<bool> running_{true};
  std::thread thread_;
};

}  // namespace nna
