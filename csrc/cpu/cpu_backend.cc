// cpu_backend.cc: the arena on host memory only; the "device" is a second host buffer.
#include <cstdlib>
#include <cstring>

#include "../core/backend.h"
#include "../core/failure.h"
#include "../core/finite.h"
#include "../core/host_memory.h"

namespace nna {
namespace {

struct CpuBackend final : Backend {
  const char* name() const override { return "cpu"; }
  void* allocHost(size_t bytes, bool) override { return hostAlloc(bytes, "host"); }
  void freeHost(void* p, size_t bytes, bool) override { hostFree(p, bytes); }
  void* allocDevice(size_t bytes, Memory memory) override {
    if (memory == Memory::Managed) NNA_FAIL("NOT_SUPPORTED", "managed memory needs the CUDA backend");
    if (memory == Memory::Staged) NNA_FAIL("NOT_SUPPORTED", "staged memory needs the CUDA backend");
    return hostAlloc(bytes, "stand-in device");
  }
  void freeDevice(void* p, size_t bytes, Memory) override { hostFree(p, bytes); }
  // Called on memory fresh from allocDevice (block.cc), so mmap'd memory is zero already.
  void zeroDevice(void* p, size_t bytes) override {
    if (!hostAllocZeroed(bytes)) std::memset(p, 0, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes, Dir) override { std::memcpy(dst, src, bytes); }
  void copyAside(const Copy* c, size_t n, Dir, bool) override {
    for (size_t i = 0; i < n; ++i) std::memcpy(c[i].dst, c[i].src, c[i].bytes);
  }
  int64_t copyCheckedOnDevice(const Copy* c, size_t n, bool f64) override {
    const uint64_t size = f64 ? 8 : 4;
    int64_t before = 0, found = -1;
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(c[i].dst, c[i].src, c[i].bytes);
      const int64_t at = found < 0 ? firstNonFinite(c[i].dst, c[i].bytes / size, f64) : -1;
      if (at >= 0) found = before + at;
      before += int64_t(c[i].bytes / size);
    }
    return found;
  }
  void prefetch(void*, size_t, Where) override { NNA_FAIL("NOT_SUPPORTED", "prefetch applies to managed memory on the CUDA backend; this arena is on the CPU backend"); }
  void advise(void*, size_t, Advice, Where, bool) override { NNA_FAIL("NOT_SUPPORTED", "advise applies to managed memory on the CUDA backend; this arena is on the CPU backend"); }
  void synchronize() override {}
};

}  // namespace

std::unique_ptr<Backend> makeCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace nna
