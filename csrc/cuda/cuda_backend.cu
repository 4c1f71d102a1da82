// cuda_backend.cu: the arena's allocations and transfers on a CUDA device.
// Pinned host memory (cudaMallocHost) by default, device memory from cudaMalloc or, for
// 'managed', cudaMallocManaged: never more than 90% of the free device memory, because
// oversubscribed managed memory can stall the whole GPU for every process on it.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "../core/backend.h"
#include "../core/host_memory.h"
#include "check.cuh"
#include "cublas_loader.h"
#include "cublaslt_loader.h"

namespace nna {
namespace {

cudaMemLocation locationOf(Where where) {
  cudaMemLocation loc{};
  if (where == Where::Device) {
    loc.type = cudaMemLocationTypeDevice;
    CUDA_CHECK(cudaGetDevice(&loc.id));
  } else {
    loc.type = cudaMemLocationTypeHost;
    loc.id = 0;
  }
  return loc;
}

// Copies n values from src to dst (16 bytes a load where both are aligned to 16) and folds the
// least index i < n whose value has every exponent bit set (NaN or an infinity), plus `base`,
// into *first by atomicMin (it starts at ~0: none). Grid-stride: a warp's loads are coalesced,
// and a thread's later indices are larger, so it stops at its first.
template <typename U> __global__ void copyCheckedKernel(U* dst, const U* src, uint64_t n, uint64_t base, unsigned long long* first) {
  constexpr U exp = sizeof(U) == 4 ? U(0x7f800000u) : U(0x7ff0000000000000ull);
  constexpr uint64_t per = 16 / sizeof(U);
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x, t = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool wide = ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) == 0;
  const uint64_t chunks = wide ? n / per : 0;
  bool found = false;  // the copy goes on, unchecked, once this thread found one
  for (uint64_t c = t; c < chunks; c += stride) {
    const uint4 v = reinterpret_cast<const uint4*>(src)[c];
    reinterpret_cast<uint4*>(dst)[c] = v;
    const U* u = reinterpret_cast<const U*>(&v);
    for (uint64_t j = 0; j < per && !found; ++j)
      if ((u[j] & exp) == exp) {
        atomicMin(first, (unsigned long long)(base + c * per + j));
        found = true;
      }
  }
  for (uint64_t i = chunks * per + t; i < n; i += stride) {
    const U v = src[i];
    dst[i] = v;
    if (!found && (v & exp) == exp) {
      atomicMin(first, (unsigned long long)(base + i));
      found = true;
    }
  }
}

struct CudaBackend final : Backend {
  explicit CudaBackend(int device) : device_(device) {}
  const char* name() const override { return "cuda"; }
  int device() const override { return device_; }
  void activate() override { CUDA_CHECK(cudaSetDevice(device_)); }

  void* allocHost(size_t bytes, bool pinned) override {
    DeviceScope scope(device_);
    void* p = nullptr;
    if (pinned) {
      CUDA_CHECK(cudaMallocHost(&p, bytes ? bytes : 1));
      return p;
    }
    return hostAlloc(bytes, "host");
  }
  void freeHost(void* p, size_t bytes, bool pinned) override {
    DeviceScope scope(device_);
    if (pinned)
      CUDA_CHECK(cudaFreeHost(p));
    else
      hostFree(p, bytes);
  }

  void* allocDevice(size_t bytes, Memory memory) override {
    DeviceScope scope(device_);
    size_t freeB = 0, totalB = 0;
    CUDA_CHECK(cudaMemGetInfo(&freeB, &totalB));
    void* p = nullptr;
    if (memory == Memory::Managed) {
      if (bytes > freeB / 10 * 9)
        NNA_FAIL("MANAGED_LIMIT", "managed allocation of " + std::to_string(bytes) + " bytes refused: above 90% of the " + std::to_string(freeB) + " bytes of free device memory");
      CUDA_CHECK(cudaMallocManaged(&p, bytes ? bytes : 1, cudaMemAttachGlobal));
      return p;
    }
    // Staged: the device side is a pinned host image (copied to and from the device pool with
    // cudaMemcpyAsync, which needs page-locked memory to be asynchronous).
    if (memory == Memory::Staged) {
      CUDA_CHECK(cudaMallocHost(&p, bytes ? bytes : 1));
      return p;
    }
    const cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: clear it so the process goes on
      NNA_FAIL("CUDA_OOM", "cudaMalloc of " + std::to_string(bytes) + " bytes failed: " + std::to_string(freeB) + " of " + std::to_string(totalB) + " bytes free on the device");
    }
    CUDA_CHECK(e);
    return p;
  }
  void freeDevice(void* p, size_t, Memory memory) override {
    DeviceScope scope(device_);
    if (memory == Memory::Staged)
      CUDA_CHECK(cudaFreeHost(p));
    else
      CUDA_CHECK(cudaFree(p));
  }
  void zeroDevice(void* p, size_t bytes) override {
    DeviceScope scope(device_);
    CUDA_CHECK(cudaMemset(p, 0, bytes));
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  void copy(void* dst, const void* src, size_t bytes, Dir dir) override {
    DeviceScope scope(device_);
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, dir == Dir::ToDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost));
  }

  // A non-blocking stream of the backend's own: it neither waits for nor delays a run's stream (a
  // blocking cudaMemcpy on the legacy default stream would serialise with it). One per kind,
  // made on first use and kept (a stream made and destroyed per call added its making to every
  // streamed window's commit): uploads come from a worker thread and commits from the JS thread, and
  // they may overlap; each kind has one caller at a time (window_stager.cc).
  void copyAside(const Copy* c, size_t n, Dir dir, bool onDevice) override {
    DeviceScope scope(device_);
    const cudaMemcpyKind kind = onDevice ? cudaMemcpyDeviceToDevice : dir == Dir::ToDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    cudaStream_t s = asideStream(onDevice ? 2 : dir == Dir::ToDevice ? 0 : 1);
    cudaError_t e = cudaSuccess;
    for (size_t i = 0; i < n && e == cudaSuccess; ++i) e = cudaMemcpyAsync(c[i].dst, c[i].src, c[i].bytes, kind, s);
    const cudaError_t w = cudaStreamSynchronize(s);  // also after a failed enqueue: nothing left in flight
    CUDA_CHECK(e);
    CUDA_CHECK(w);
  }

  // On the device -> device aside stream (a window's copy into the data regions runs while no
  // run does: window_stager.cc).
  int64_t copyCheckedOnDevice(const Copy* c, size_t n, bool f64) override {
    DeviceScope scope(device_);
    cudaStream_t s = asideStream(2);
    std::lock_guard<std::mutex> lock(checkMutex_);
    if (!first_) CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&first_), sizeof *first_));
    CUDA_CHECK(cudaMemsetAsync(first_, 0xff, sizeof *first_, s));  // ~0: none found
    const uint64_t size = f64 ? 8 : 4;
    uint64_t base = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t count = c[i].bytes / size;
      if (count == 0) continue;
      const unsigned blocks = unsigned(std::min<uint64_t>(2048, (count / (16 / size) + 255) / 256 + 1));
      if (f64)
        copyCheckedKernel<<<blocks, 256, 0, s>>>(static_cast<uint64_t*>(c[i].dst), static_cast<const uint64_t*>(c[i].src), count, base, first_);
      else
        copyCheckedKernel<<<blocks, 256, 0, s>>>(static_cast<uint32_t*>(c[i].dst), static_cast<const uint32_t*>(c[i].src), count, base, first_);
      CUDA_CHECK(cudaGetLastError());
      base += count;
    }
    unsigned long long found = 0;
    CUDA_CHECK(cudaMemcpyAsync(&found, first_, sizeof found, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    return found == ~0ull ? -1 : int64_t(found);
  }

  ~CudaBackend() override {
    if (first_) {
      cudaSetDevice(device_);
      cudaFree(first_);  // at process exit the runtime may be gone: nothing to check
    }
    for (cudaStream_t s : aside_)
      if (s) {
        cudaSetDevice(device_);
        cudaStreamDestroy(s);  // at process exit the runtime may be gone: nothing to check
      }
  }

  void prefetch(void* p, size_t bytes, Where where) override {
    DeviceScope scope(device_);
    CUDA_CHECK(cudaMemPrefetchAsync(p, bytes, locationOf(where), 0, 0));
    CUDA_CHECK(cudaStreamSynchronize(0));
  }

  void advise(void* p, size_t bytes, Advice advice, Where where, bool unset) override {
    DeviceScope scope(device_);
    cudaMemoryAdvise a;
    switch (advice) {
      case Advice::ReadMostly: a = unset ? cudaMemAdviseUnsetReadMostly : cudaMemAdviseSetReadMostly; break;
      case Advice::PreferredLocation: a = unset ? cudaMemAdviseUnsetPreferredLocation : cudaMemAdviseSetPreferredLocation; break;
      default: a = unset ? cudaMemAdviseUnsetAccessedBy : cudaMemAdviseSetAccessedBy; break;
    }
    CUDA_CHECK(cudaMemAdvise(p, bytes, a, locationOf(where)));
  }

  void synchronize() override {
    DeviceScope scope(device_);
    CUDA_CHECK(cudaDeviceSynchronize());
  }

 private:
  cudaStream_t asideStream(int k) {
    std::lock_guard<std::mutex> lock(asideMutex_);
    if (!aside_[k]) CUDA_CHECK(cudaStreamCreateWithFlags(&aside_[k], cudaStreamNonBlocking));
    return aside_[k];
  }

  int device_;
  std::mutex asideMutex_;
  cudaStream_t aside_[3] = {nullptr, nullptr, nullptr};  // host -> device, device -> host, device -> device
  std::mutex checkMutex_;
  unsigned long long* first_ = nullptr;  // copyCheckedOnDevice's answer
};

// An empty kernel: cudaInfo asks the runtime for its attributes to learn whether this binary
// holds code the GPU can run.
__global__ void imageProbeKernel() {}

// The architectures this binary holds code for: nvcc's __CUDA_ARCH_LIST__ (the virtual
// architectures compiled, 750 for sm_75; each gets SASS) and the PTX one that
// scripts/find-nvcc.cjs records in NNA_CUDA_PTX.
#ifndef __CUDA_ARCH_LIST__
#define __CUDA_ARCH_LIST__ 0
#endif
#ifndef NNA_CUDA_PTX
#define NNA_CUDA_PTX 0
#endif
std::string compiledArchs() {
  std::string s;
  for (int a : {__CUDA_ARCH_LIST__})
    if (a) s += (s.empty() ? "sm_" : " sm_") + std::to_string(a / 10);
  if (NNA_CUDA_PTX) s += (s.empty() ? "compute_" : " compute_") + std::to_string(NNA_CUDA_PTX);
  return s;
}

}  // namespace

CudaInfo cudaInfo() {
  CudaInfo i;
  i.built = true;
  i.archs = compiledArchs();
  cudaRuntimeGetVersion(&i.runtimeVersion);
  cudaDriverGetVersion(&i.driverVersion);
  const cudaError_t e = cudaGetDeviceCount(&i.devices);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    i.devices = 0;
    i.why = std::string("no usable CUDA device: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
    return i;
  }
  if (i.devices == 0) {
    i.why = "no CUDA device present";
    return i;
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    i.name = prop.name;
    i.ccMajor = prop.major;
    i.ccMinor = prop.minor;
  }
  // A GPU the binary holds no SASS (and no PTX it can JIT) for: unusable, and say why.
  cudaFuncAttributes attr;
  const cudaError_t k = cudaFuncGetAttributes(&attr, imageProbeKernel);
  if (k != cudaSuccess) {
    (void)cudaGetLastError();
    const std::string cc = "sm_" + std::to_string(i.ccMajor) + std::to_string(i.ccMinor);
    i.devices = 0;
    i.noKernelImage = k == cudaErrorNoKernelImageForDevice || k == cudaErrorInvalidDeviceFunction || k == cudaErrorUnsupportedPtxVersion;
    i.why = i.noKernelImage
                ? "the GPU " + i.name + " (" + cc + ") has no kernels in this nn-arena binary (built for " + i.archs +
                      "); rebuild for it: NN_ARENA_CUDA_ARCH=" + std::to_string(i.ccMajor) + std::to_string(i.ccMinor) + " npm rebuild nn-arena (see the README, Install)"
                : std::string("the GPU ") + i.name + " (" + cc + ") cannot run this binary's kernels: " + cudaGetErrorName(k) + ": " + cudaGetErrorString(k);
    return i;
  }
  {
    DeviceScope scope(0);  // device 0's memory, whatever device this thread last used
    cudaMemGetInfo(&i.freeBytes, &i.totalBytes);
  }
  i.gemm = cublasAvailable() ? "cublas" : "tiled (" + cublasStatus() + ")";
  i.cublasLt = ltStatus();
  return i;
}

std::unique_ptr<Backend> makeCudaBackend(int device) {
  const CudaInfo i = cudaInfo();
  if (i.devices == 0) NNA_FAIL(i.noKernelImage ? "NO_KERNEL_IMAGE" : "NO_DEVICE", i.why);
  if (device < 0 || device >= i.devices)
    NNA_FAIL_FIELD(
        "BAD_OPTION", "device",
        "device " + std::to_string(device) + " does not exist: this machine has " + std::to_string(i.devices) + " CUDA device(s), 0 to " + std::to_string(i.devices - 1));
  return std::make_unique<CudaBackend>(device);
}

uint64_t deviceBytesInUse() {
  size_t freeB = 0, totalB = 0;
  CUDA_CHECK(cudaMemGetInfo(&freeB, &totalB));
  return uint64_t(totalB - freeB);
}

}  // namespace nna
