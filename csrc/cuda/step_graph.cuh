// step_graph.cuh: one training step of the per-layer path captured as a CUDA graph and replayed
// for the run's later steps. The arena's addresses never move, so a step differs from the next
// only in a few scalar arguments (the rows it gathers, the step index, Adam's bias corrections,
// a scheduled lr). Every launch of a step goes through StepGraph::launch:
//   Direct   launched as usual (graphs off, the run's first step where no earlier run left a
//            graph, a step that cannot replay);
//   Capture  launched into the stream's capture; its graph node is remembered;
//   Replay   launched nowhere: its arguments are compared with the node's, and the nodes whose
//            arguments changed get the new ones (cudaGraphExecKernelNodeSetParams) before the
//            step's one cudaGraphLaunch.
// A cuBLAS product cannot take new arguments in place: external() records its arguments, and a
// replay whose products differ (the last step of fewer rows) is not launched; the caller runs
// that step directly. (A folded update's scheduled lr reaches cuBLAS through device memory,
// written by a kernel: FoldScalars, run_buffers.cuh.) Same kernels, same arguments, same order:
// a graphed run gives the bits of a direct one. Launches may go to a second stream that forks
// from the run's and joins it again within the step (follow): the graph then has branches.
// The graph outlives its run (the arena keeps it: Block::runCache): a later run's steps replay it
// as they would their own, every argument compared first; a run whose first replay differs drops
// it and captures its own.
#pragma once

#include <cuda_runtime.h>

#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "check.cuh"

namespace nna {

class StepGraph {
 public:
  enum class Mode { Direct, Capture, Replay };

  StepGraph() = default;
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;
  ~StepGraph() { drop(); }

  Mode mode() const { return mode_; }
  bool ready() const { return exec_ != nullptr; }

  // A new run: its counts start again; a graph left by an earlier run may serve it.
  void beginRun() {
    replayed_ = 0;
    tentative_ = 0;
    misses_ = 0;
    disabled_ = false;
    inherited_ = ready();
  }

  // Kernel k<<<grid, block, 0, s>>>(a...), or its capture, or its comparison with the graph's.
  template <typename... P, typename... A> void launch(cudaStream_t s, void (*k)(P...), dim3 grid, dim3 block, A&&... a) {
    Record r = pack<P...>(reinterpret_cast<const void*>(k), grid, block, std::forward<A>(a)...);
    if (mode_ == Mode::Replay) return compare(std::move(r));
    std::vector<void*> args = r.args();
    CUDA_CHECK(cudaLaunchKernel(r.func, grid, block, args.data(), 0, s));
    if (mode_ == Mode::Capture) {
      cudaStreamCaptureStatus status;
      const cudaGraphNode_t* deps = nullptr;
      size_t n = 0;
      CUDA_CHECK(cudaStreamGetCaptureInfo(s, &status, nullptr, nullptr, &deps, nullptr, &n));
      if (n != 1) NNA_FAIL("CUDA_ERROR", "a captured step is not one chain of launches");
      r.node = deps[0];
      records_.push_back(std::move(r));
    }
  }

  // Work the graph cannot update in place (a cuBLAS product, a memset), identified by its
  // arguments. Returns whether the caller issues it: not in a replay, where it only compares.
  template <typename... A> bool external(A... a) {
    Record r = pack<A...>(nullptr, dim3(), dim3(), a...);
    if (mode_ == Mode::Replay) {
      compare(std::move(r));
      return false;
    }
    if (mode_ == Mode::Capture) records_.push_back(std::move(r));
    return true;
  }

  // Work issued on `to` from now on waits for what `from` has been given so far: a fork from the
  // run's stream to its side stream, or the join back (LayerRun, layer_run.cuh). In a capture the edge
  // becomes the graph's (the side stream's launches are its branch); in a replay it is compared
  // like the launches, so that a step with other edges does not replay.
  void follow(cudaStream_t from, cudaStream_t to, cudaEvent_t ev) {
    if (!external(from, to)) return;
    CUDA_CHECK(cudaEventRecord(ev, from));
    CUDA_CHECK(cudaStreamWaitEvent(to, ev, 0));
  }

  // Captures what `step` launches on s, instantiates it and launches it once. False (nothing
  // ran, the graph off for good) where the step cannot be captured; the caller runs it directly.
  template <typename F> bool capture(cudaStream_t s, F&& step) {
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      (void)cudaGetLastError();
      return off();
    }
    mode_ = Mode::Capture;
    try {
      step();
    } catch (...) {
      mode_ = Mode::Direct;
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(s, &g);
      if (g) cudaGraphDestroy(g);
      (void)cudaGetLastError();
      return off();
    }
    mode_ = Mode::Direct;
    CUDA_CHECK(cudaStreamEndCapture(s, &graph_));
    if (cudaGraphInstantiate(&exec_, graph_, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      return off();
    }
    CUDA_CHECK(cudaGraphLaunch(exec_, s));
    ++replayed_;
    return true;
  }

  // A replay: runs `step` comparing its launches with the graph's; where only kernel arguments
  // changed, updates those nodes and launches the graph. False (nothing ran) where the step
  // differs in anything else; after two such steps the graph is dropped for the run. A
  // `tentative` replay that differs changes nothing (a run's first step, which may differ from
  // the graph kept from the run before where the steps after it will not).
  template <typename F> bool replay(cudaStream_t s, F&& step, bool tentative = false) {
    mode_ = Mode::Replay;
    next_ = 0;
    differs_ = false;
    changed_.clear();
    try {
      step();
    } catch (...) {
      mode_ = Mode::Direct;
      throw;
    }
    mode_ = Mode::Direct;
    if (differs_ || next_ != records_.size()) {
      if (tentative) return false;
      if (inherited_ && replayed_ == tentative_)
        drop();  // an earlier run's step: this run captures its own
      else if (++misses_ >= 2)
        off();
      inherited_ = false;
      return false;
    }
    for (Record& r : changed_) {
      Record& old = records_[r.index];
      std::vector<void*> args = r.args();
      cudaKernelNodeParams kp{};
      kp.func = const_cast<void*>(r.func);
      kp.gridDim = r.grid;
      kp.blockDim = r.block;
      kp.kernelParams = args.data();
      CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec_, old.node, &kp));
      r.node = old.node;
      old = std::move(r);
    }
    CUDA_CHECK(cudaGraphLaunch(exec_, s));
    ++replayed_;
    if (tentative) ++tentative_;
    return true;
  }

  // The graph launched again as it stands, nothing compared: for a caller that knows the step is
  // the one the graph last ran (a fed run's batches after the first: runFeed). False where there
  // is no graph.
  bool relaunch(cudaStream_t s) {
    if (!exec_) return false;
    CUDA_CHECK(cudaGraphLaunch(exec_, s));
    ++replayed_;
    return true;
  }

  // Destroys the graph; the next run captures again. From another thread only while the run
  // that owns it is not launching, and not while it is in flight: destroying it then waits for
  // it to finish (CommGroup::abortIfQuiet, comm_group.h, drains the device first).
  void release() { drop(); }

  // Steps that ran as a graph launch (the captured one included).
  uint64_t replayed() const { return replayed_; }
  // Whether the graph was dropped for the run (capture failed, or replays kept differing).
  bool disabled() const { return disabled_; }

 private:
  // One launch's identity: the kernel (null: external work), its shape and its arguments' bytes.
  struct Record {
    const void* func = nullptr;
    dim3 grid, block;
    std::vector<unsigned char> bytes;
    std::vector<size_t> at;  // each argument's offset in bytes
    cudaGraphNode_t node = nullptr;
    size_t index = 0;
    void add(const void* p, size_t n, size_t align) {
      const size_t o = (bytes.size() + align - 1) / align * align;
      bytes.resize(o + n);
      std::memcpy(bytes.data() + o, p, n);
      at.push_back(o);
    }
    std::vector<void*> args() {
      std::vector<void*> v;
      for (size_t o : at) v.push_back(bytes.data() + o);
      return v;
    }
    bool same(const Record& o) const {
      return func == o.func && grid.x == o.grid.x && grid.y == o.grid.y && grid.z == o.grid.z && block.x == o.block.x && block.y == o.block.y && block.z == o.block.z &&
             bytes == o.bytes;
    }
  };

  // The arguments converted to the kernel's parameter types, as the launch would pass them.
  template <typename... P, typename... A> static Record pack(const void* func, dim3 grid, dim3 block, A&&... a) {
    Record r;
    r.func = func;
    r.grid = grid;
    r.block = block;
    std::tuple<std::decay_t<P>...> t(std::forward<A>(a)...);
    std::apply([&r](const auto&... v) { (r.add(&v, sizeof(v), alignof(std::decay_t<decltype(v)>)), ...); }, t);
    return r;
  }

  void compare(Record r) {
    if (next_ >= records_.size()) {
      differs_ = true;
      return;
    }
    const Record& old = records_[next_];
    r.index = next_++;
    if (old.same(r)) return;
    if (!r.func || r.func != old.func) {
      differs_ = true;
      return;
    }
    changed_.push_back(std::move(r));
  }

  bool off() {
    drop();
    disabled_ = true;
    return false;
  }
  void drop() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
    records_.clear();
  }

  Mode mode_ = Mode::Direct;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::vector<Record> records_, changed_;
  size_t next_ = 0;
  bool differs_ = false, disabled_ = false, inherited_ = false;
  unsigned misses_ = 0;
  uint64_t replayed_ = 0;
  uint64_t tentative_ = 0;  // of those, tentative replays
};

}  // namespace nna
