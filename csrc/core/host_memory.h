// host_memory.h: page-aligned host memory for both sides of a CPU arena and the pageable host
// side of a CUDA one. Large blocks come straight from mmap and go straight back with munmap:
// through malloc, freed arenas of a few MiB stayed in the heap (glibc raises its mmap threshold
// after each free), and 20,000 create/dispose cycles left over 1 GiB of resident memory.
#pragma once
#include <cstddef>

namespace nna {

// Uninitialised (mmap gives zeroed pages, malloc does not). Throws Failure HOST_OOM; `what` names the use.
void* hostAlloc(size_t bytes, const char* what);
// Whether hostAlloc(bytes) memory is zero when fresh (the mmap path): a creator skips its memset,
// so a new arena's pages are touched only when used (each first touch of a page costs a fault).
bool hostAllocZeroed(size_t bytes);
// `bytes` must be what hostAlloc was given.
void hostFree(void* p, size_t bytes);

}  // namespace nna
