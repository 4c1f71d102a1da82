#include "copy_bench.h"

#include <cstring>

namespace nna {

CopyBench::CopyBench(bool cuda, const std::vector<size_t>& sizes, bool pinned) : backend_(cuda ? makeCudaBackend() : makeCpuBackend()), pinned_(pinned), sizes_(sizes) {
  try {
    for (size_t s : sizes_) {
      host_.push_back(backend_->allocHost(s, pinned_));
      std::memset(host_.back(), 1, s);  // touch the pages, as an arena's host side is
      device_.push_back(backend_->allocDevice(s, Memory::Device));
      backend_->zeroDevice(device_.back(), s);
    }
  } catch (...) {
    release();
    throw;
  }
}

CopyBench::~CopyBench() { release(); }

void CopyBench::release() {
  for (size_t i = 0; i < device_.size(); ++i) try {
      backend_->freeDevice(device_[i], sizes_[i], Memory::Device);
    } catch (...) {}
  for (size_t i = 0; i < host_.size(); ++i) try {
      backend_->freeHost(host_[i], sizes_[i], pinned_);
    } catch (...) {}
  device_.clear();
  host_.clear();
}

size_t CopyBench::run(Dir dir) {
  for (size_t i = 0; i < device_.size(); ++i) {
    if (dir == Dir::ToDevice)
      backend_->copy(device_[i], host_[i], sizes_[i], dir);
    else
      backend_->copy(host_[i], device_[i], sizes_[i], dir);
  }
  return device_.size();
}

}  // namespace nna
