// library_search.h: where nn-arena looks for the CUDA libraries it loads at run time (cuBLAS,
// NVRTC): never needed by the build, found with dlopen when first used.
#pragma once
#include <dlfcn.h>

#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

namespace nna {

// The first of `chosen` (a path or name from a knob, when set), `sonames`, then
// <CUDA_PATH|CUDA_HOME>/lib64/<devName> and /usr/local/cuda/lib64/<devName> that loads; null if
// none does, with what was tried in `tried`.
inline void* openCudaLibrary(const std::string& chosen, std::initializer_list<const char*> sonames, const char* devName, std::string* tried) {
  std::vector<std::string> names;
  if (!chosen.empty()) names.push_back(chosen);
  for (const char* n : sonames) names.push_back(n);
  for (const char* var : {"CUDA_PATH", "CUDA_HOME"})
    if (const char* root = std::getenv(var)) names.push_back(std::string(root) + "/lib64/" + devName);
  names.push_back(std::string("/usr/local/cuda/lib64/") + devName);
  for (const std::string& n : names) {
    if (void* lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
    *tried += (tried->empty() ? "" : ", ") + n;
  }
  return nullptr;
}

}  // namespace nna
