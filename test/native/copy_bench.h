// copy_bench.h: the baselines an arena transfer is measured against (bench/transfers.ts):
// one buffer pair per size, copied one by one with the backend's plain copy. One size gives
// the raw cudaMemcpy/memcpy limit; the plan's region sizes give the fragmented design (one
// host and one device allocation per region) that the arena replaces.
#pragma once
#include <memory>
#include <vector>

#include "../../csrc/core/backend.h"

namespace nna {

class CopyBench {
 public:
  CopyBench(bool cuda, const std::vector<size_t>& sizes, bool pinned);
  ~CopyBench();
  CopyBench(const CopyBench&) = delete;
  CopyBench& operator=(const CopyBench&) = delete;
  // Copies every buffer once in `dir`; returns the number of copies made.
  size_t run(Dir dir);
  size_t allocations() const { return host_.size() + device_.size(); }

 private:
  void release();
  std::unique_ptr<Backend> backend_;
  bool pinned_;
  std::vector<size_t> sizes_;
  std::vector<void*> host_, device_;
};

}  // namespace nna
