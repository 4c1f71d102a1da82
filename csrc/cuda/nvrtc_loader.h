// nvrtc_loader.h: NVRTC (the CUDA runtime compiler) found at run time, never needed by the build,
// as cuBLAS is: the build machines have only nvcc and the CUDA runtime. A toolkit install (and
// the GPU machine) has libnvrtc; without it, JIT kernels are NOT_SUPPORTED and nothing else
// changes.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace nna {

// Whether NVRTC loaded ("" when it did; else what is missing). NN_ARENA_NVRTC=/path/to/libnvrtc.so
// picks the library.
bool nvrtcAvailable();
const std::string& nvrtcStatus();

struct NvrtcOutput {
  bool ok = false;
  std::string log;          // the compiler's log (warnings, or the errors when !ok)
  std::vector<char> cubin;  // machine code for the requested sm_XY when ok
};

// Compiles `source` (named `name` in the log) to a CUBIN. `headers`: (include name, contents)
// pairs the source may #include. Throws Failure NOT_SUPPORTED without NVRTC, NVRTC_ERROR when
// NVRTC itself fails (not the source): a source that does not compile is ok == false.
NvrtcOutput nvrtcCompile(const std::string& source, const std::string& name, const std::vector<std::pair<std::string, std::string>>& headers,
                         const std::vector<std::string>& options);

}  // namespace nna
