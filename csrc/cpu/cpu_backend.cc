// cpu_backend.cc: the arena on host memory only; the "device" is a second host buffer.
#include <cstdlib>
#include <cstring>

#include "../core/backend.h"
#include "../core/failure.h"

namespace nna {

void* alignedHostAlloc(size_t bytes, const char* what) {
  void* p = nullptr;
  // 4 KiB alignment: page-aligned like cudaMallocHost, and any region alignment <= 4096 holds.
  if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0 || !p)
    NNA_FAIL("HOST_OOM", std::string("cannot allocate ") + std::to_string(bytes) + " bytes of " + what + " memory");
  return p;
}

namespace {

struct CpuBackend final : Backend {
  const char* name() const override { return "cpu"; }
  void* allocHost(size_t bytes, bool) override { return alignedHostAlloc(bytes, "host"); }
  void freeHost(void* p, bool) override { std::free(p); }
  void* allocDevice(size_t bytes, Memory memory) override {
    if (memory == Memory::Managed) NNA_FAIL("NOT_SUPPORTED", "managed memory needs the CUDA backend");
    if (memory == Memory::Staged) NNA_FAIL("NOT_SUPPORTED", "staged memory needs the CUDA backend");
    return alignedHostAlloc(bytes, "stand-in device");
  }
  void freeDevice(void* p, Memory) override { std::free(p); }
  void zeroDevice(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
  void copy(void* dst, const void* src, size_t bytes, Dir) override { std::memcpy(dst, src, bytes); }
  void prefetch(void*, size_t, Where) override {
    NNA_FAIL("NOT_SUPPORTED", "prefetch applies to managed memory on the CUDA backend; this arena is on the CPU backend");
  }
  void advise(void*, size_t, Advice, Where, bool) override {
    NNA_FAIL("NOT_SUPPORTED", "advise applies to managed memory on the CUDA backend; this arena is on the CPU backend");
  }
  void synchronize() override {}
};

}  // namespace

std::unique_ptr<Backend> makeCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace nna
