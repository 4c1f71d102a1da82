// backend.h: where the arena's two allocations live and how bytes move between them.
// The CPU backend stands in host memory for the device so that the API, the counters and the
// tests behave the same on machines without a GPU. The CUDA backend is compiled only when nvcc
// is found (csrc/cuda/); otherwise csrc/cuda/absent.cc reports that it was not built.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace nna {

// Staged: the device side of the arena lives in pinned host memory and only a pool of the
// budget's size is on the device (csrc/budget/staging.cu copies regions in and out of it).
enum class Memory : uint32_t { Device = 0, Managed = 1, Staged = 2 };
enum class Dir { ToDevice, ToHost };
enum class Advice { ReadMostly, PreferredLocation, AccessedBy };
enum class Where { Device, Host };

struct Backend {
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual void* allocHost(size_t bytes, bool pinned) = 0;
  virtual void freeHost(void* p, size_t bytes, bool pinned) = 0;
  virtual void* allocDevice(size_t bytes, Memory memory) = 0;
  virtual void freeDevice(void* p, size_t bytes, Memory memory) = 0;
  virtual void zeroDevice(void* p, size_t bytes) = 0;
  // One real transfer (cudaMemcpy or memcpy); the caller counts it.
  virtual void copy(void* dst, const void* src, size_t bytes, Dir dir) = 0;
  // Copies on a stream of the backend's own (never a run's; one per kind of copy), all complete
  // on return, one wait for them all: a streaming window's upload while a run trains, host -> device, and its commit
  // into the data regions, device -> device (csrc/addon/window_stager.cc). CPU: memcpys.
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  virtual void copyAside(const Copy* copies, size_t n, Dir dir, bool onDevice) = 0;
  // Device-to-device copies of float values (float64 when f64, else float32) on the backend's
  // own stream, complete on return, with the index of the first NaN or infinity among the values
  // copied (the copies' values counted one after another), or -1: a streamed window goes into
  // the data regions and is checked in the same pass (window_stager.cc). CPU: memcpys and a scan.
  virtual int64_t copyCheckedOnDevice(const Copy* copies, size_t n, bool f64) = 0;
  virtual void prefetch(void* p, size_t bytes, Where where) = 0;
  virtual void advise(void* p, size_t bytes, Advice advice, Where where, bool unset) = 0;
  virtual void synchronize() = 0;
  // Makes this backend's device current on the calling thread (CUDA: cudaSetDevice). Every
  // thread that launches work for an arena (a libuv worker, a replica's thread) calls it first.
  virtual void activate() {}
  // The CUDA device index (0 on the CPU backend).
  virtual int device() const { return 0; }
};

std::unique_ptr<Backend> makeCpuBackend();

// --- CUDA: defined in csrc/cuda/*.cu, or in csrc/cuda/absent.cc for a CPU-only build ---------
struct CudaInfo {
  bool built = false;  // compiled with nvcc
  int devices = 0;     // usable devices (0 when the driver or GPU is missing)
  std::string why;     // why devices == 0
  std::string name;    // device 0
  int runtimeVersion = 0, driverVersion = 0, ccMajor = 0, ccMinor = 0;
  size_t freeBytes = 0, totalBytes = 0;
  std::string gemm;            // who runs the per-layer products: "cublas" or "tiled (why)"
  std::string cublasLt;        // "" where cuBLASLt was found (the per-layer fp32 / tf32 forward products use it), else why not
  std::string archs;           // what the binary holds, e.g. "sm_75 sm_80 compute_120" ("" without CUDA)
  bool noKernelImage = false;  // a GPU is present but the binary has no code for it (devices == 0)
};
CudaInfo cudaInfo();
// Throws Failure NO_DEVICE when unusable, BAD_OPTION (field "device") for an index out of range.
std::unique_ptr<Backend> makeCudaBackend(int device = 0);

// Device memory in use now (cudaMemGetInfo: total - free), device-wide.
uint64_t deviceBytesInUse();

}  // namespace nna
