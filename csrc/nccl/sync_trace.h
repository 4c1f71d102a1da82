// sync_trace.h: where a data-parallel step's time goes on the device (NN_ARENA_SYNC_TRACE=1).
// Timed events on both streams of a replica: the step's start on the compute stream, then for
// each gradient range its hand-over (the backward of its layers queued before it has run), the
// end of its all-reduce and of its layers' updates on the communicator's stream, and the step's
// end (the compute stream has waited for all of it). At the end of the run one line a replica
// on stderr: the means over the run's steps but the first, in microseconds from the step's start.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../core/env.h"
#include "../cuda/check.cuh"

namespace nna {

class SyncTrace {
 public:
  // `pieces`: the gradient ranges' byte counts, in the order the sync holds them.
  SyncTrace(int device, std::vector<uint64_t> pieces) : on_(knobOn(Knob::SyncTrace)), device_(device), bytes_(std::move(pieces)) {}
  ~SyncTrace() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  SyncTrace(const SyncTrace&) = delete;
  SyncTrace& operator=(const SyncTrace&) = delete;

  bool on() const { return on_; }
  void stepStart(cudaStream_t s) { mark(s, Kind::Start, 0); }
  void ready(uint32_t piece, cudaStream_t s) { mark(s, Kind::Ready, piece); }
  void reduced(uint32_t piece, cudaStream_t s) { mark(s, Kind::Reduced, piece); }
  void updated(uint32_t piece, cudaStream_t s) { mark(s, Kind::Updated, piece); }
  void stepEnd(cudaStream_t s) { mark(s, Kind::End, 0); }

  // After the run's last wait: everything recorded has completed.
  void report() {
    if (!on_ || marks_.empty()) return;
    const size_t n = bytes_.size();
    std::vector<double> ready(n), reduced(n), updated(n);
    double end = 0;
    uint64_t steps = 0;
    cudaEvent_t start = nullptr;
    uint64_t seen = 0;  // steps started
    for (size_t i = 0; i < marks_.size(); ++i) {
      const Mark& m = marks_[i];
      if (m.kind == Kind::Start) {
        start = events_[i];
        ++seen;
        continue;
      }
      if (!start || seen < 2) continue;  // the first step: warm-up of whatever the run does first
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, start, events_[i]));
      const double us = double(ms) * 1e3;
      if (m.kind == Kind::Ready) ready[m.piece] += us;
      if (m.kind == Kind::Reduced) reduced[m.piece] += us;
      if (m.kind == Kind::Updated) updated[m.piece] += us;
      if (m.kind == Kind::End) {
        end += us;
        ++steps;
      }
    }
    if (!steps) return;
    std::string line =
        "nn-arena sync trace: device " + std::to_string(device_) + ", " + std::to_string(steps) + " steps, means in us from the step's start: end " + fmt(end / double(steps));
    for (size_t p = 0; p < n; ++p)
      line += "; range " + std::to_string(p) + " (" + std::to_string(bytes_[p]) + " bytes): handed over " + fmt(ready[p] / double(steps)) + ", reduced " +
              fmt(reduced[p] / double(steps)) + ", updated " + fmt(updated[p] / double(steps));
    std::fprintf(stderr, "%s\n", line.c_str());
  }

 private:
  enum class Kind { Start, Ready, Reduced, Updated, End };
  struct Mark {
    Kind kind;
    uint32_t piece;
  };
  void mark(cudaStream_t s, Kind k, uint32_t piece) {
    if (!on_) return;
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
    marks_.push_back({k, piece});
    CUDA_CHECK(cudaEventRecord(e, s));
  }
  static std::string fmt(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", v);
    return b;
  }
  bool on_;
  int device_;
  std::vector<uint64_t> bytes_;
  std::vector<cudaEvent_t> events_;
  std::vector<Mark> marks_;
};

}  // namespace nna
