// run_copies.cuh: a run's own host <-> device copies (RunParams::copies), queued on the run's
// stream so that the upload, the kernels and the read-back end in the run's one wait. The host
// side is page-locked (an arena's pinned host allocation), so each copy is asynchronous.
#pragma once
#include <cuda_runtime.h>

#include "../train/train.h"
#include "check.cuh"

namespace nna {

// `in` (host -> device) before the run's first kernel, or `out` (device -> host) after its last;
// each span that `issue(span)` accepts (a graphed step compares a span with its graph's node
// instead of queuing it: step_graph.cuh, external).
template <typename Issue> void queueRunCopies(void* devBase, const RunParams& p, bool in, cudaStream_t s, Issue&& issue) {
  if (!p.copies) return;
  uint8_t* dev = static_cast<uint8_t*>(devBase);
  for (const RunCopies::Span& c : in ? p.copies->in : p.copies->out) {
    if (!c.bytes || !issue(c)) continue;
    if (in)
      CUDA_CHECK(cudaMemcpyAsync(dev + c.offset, p.copies->host + c.offset, c.bytes, cudaMemcpyHostToDevice, s));
    else
      CUDA_CHECK(cudaMemcpyAsync(p.copies->host + c.offset, dev + c.offset, c.bytes, cudaMemcpyDeviceToHost, s));
  }
}

inline void queueRunCopies(void* devBase, const RunParams& p, bool in, cudaStream_t s) {
  queueRunCopies(devBase, p, in, s, [](const RunCopies::Span&) { return true; });
}

}  // namespace nna
