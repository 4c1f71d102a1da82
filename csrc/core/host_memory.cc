#include "host_memory.h"

#include <sys/mman.h>

#include <cstdlib>
#include <string>

#include "failure.h"

namespace nna {

namespace {
// From here up, mmap: a whole number of pages that munmap returns to the system at once. Low,
// because arenas freed inside a synchronous loop leave holes in the malloc heap that the small
// records a view keeps until the loop yields split up: 6,000 cycles of an 80 KiB arena with views
// kept ~380 MiB resident through malloc, ~50 MiB through mmap (test/views-loop.test.ts).
constexpr size_t kMapThreshold = size_t(16) << 10;
}  // namespace

void* hostAlloc(size_t bytes, const char* what) {
  void* p = nullptr;
  if (bytes >= kMapThreshold) {
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) p = nullptr;
  } else if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0) {
    // 4 KiB alignment: page-aligned like cudaMallocHost, and any region alignment <= 4096 holds.
    p = nullptr;
  }
  if (!p) NNA_FAIL("HOST_OOM", std::string("cannot allocate ") + std::to_string(bytes) + " bytes of " + what + " memory");
  return p;
}

bool hostAllocZeroed(size_t bytes) { return bytes >= kMapThreshold; }

void hostFree(void* p, size_t bytes) {
  if (!p) return;
  if (bytes >= kMapThreshold)
    munmap(p, bytes);
  else
    std::free(p);
}

}  // namespace nna
