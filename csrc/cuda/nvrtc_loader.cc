// nvrtc_loader.cc: dlopen of libnvrtc and the few entry points the JIT calls. The prototypes
// are NVRTC's stable C ABI, declared here because the build machines have no nvrtc.h.
#include "nvrtc_loader.h"

#include <dlfcn.h>

#include <cstdlib>

#include "../core/env.h"
#include "../core/failure.h"
#include "library_search.h"

namespace nna {
namespace {

using Program = void*;  // nvrtcProgram
using Result = int;     // nvrtcResult: 0 = NVRTC_SUCCESS, 6 = NVRTC_ERROR_COMPILATION
constexpr Result kCompilationError = 6, kBuiltinFailure = 7;

struct Api {
  Result (*create)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  Result (*destroy)(Program*) = nullptr;
  Result (*compile)(Program, int, const char* const*) = nullptr;
  Result (*logSize)(Program, size_t*) = nullptr;
  Result (*log)(Program, char*) = nullptr;
  Result (*cubinSize)(Program, size_t*) = nullptr;
  Result (*cubin)(Program, char*) = nullptr;
  const char* (*errorString)(Result) = nullptr;
  std::string status = "not loaded";
  bool ok = false;
};

const Api& api() {
  static const Api a = [] {
    Api r;
    const std::string env = knob(Knob::Nvrtc);
    std::string tried;
    void* lib = openCudaLibrary(env, {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, "libnvrtc.so", &tried);
    if (!lib) {
      r.status = "NVRTC (libnvrtc) was not found (tried " + tried + "); install the CUDA toolkit's NVRTC or set NN_ARENA_NVRTC";
      return r;
    }
    auto sym = [&](const char* name) { return dlsym(lib, name); };
    r.create = reinterpret_cast<decltype(r.create)>(sym("nvrtcCreateProgram"));
    r.destroy = reinterpret_cast<decltype(r.destroy)>(sym("nvrtcDestroyProgram"));
    r.compile = reinterpret_cast<decltype(r.compile)>(sym("nvrtcCompileProgram"));
    r.logSize = reinterpret_cast<decltype(r.logSize)>(sym("nvrtcGetProgramLogSize"));
    r.log = reinterpret_cast<decltype(r.log)>(sym("nvrtcGetProgramLog"));
    r.cubinSize = reinterpret_cast<decltype(r.cubinSize)>(sym("nvrtcGetCUBINSize"));
    r.cubin = reinterpret_cast<decltype(r.cubin)>(sym("nvrtcGetCUBIN"));
    r.errorString = reinterpret_cast<decltype(r.errorString)>(sym("nvrtcGetErrorString"));
    if (!r.create || !r.destroy || !r.compile || !r.logSize || !r.log || !r.cubinSize || !r.cubin || !r.errorString) {
      r.status = "libnvrtc loaded but an entry point is missing (NVRTC 11.1 or later is needed)";
      return r;  // the library stays loaded; nothing of it is called
    }
    r.ok = true;
    r.status = "";
    return r;
  }();
  return a;
}

void check(Result res, const char* what) {
  if (res != 0) NNA_FAIL("NVRTC_ERROR", std::string(what) + " failed: " + api().errorString(res));
}

}  // namespace

bool nvrtcAvailable() { return api().ok; }
const std::string& nvrtcStatus() { return api().status; }

NvrtcOutput nvrtcCompile(const std::string& source, const std::string& name, const std::vector<std::pair<std::string, std::string>>& headers,
                         const std::vector<std::string>& options) {
  const Api& a = api();
  if (!a.ok) NNA_FAIL("NOT_SUPPORTED", "JIT kernels need NVRTC: " + a.status);
  std::vector<const char*> hSrc, hName, opts;
  for (const auto& h : headers) {
    hName.push_back(h.first.c_str());
    hSrc.push_back(h.second.c_str());
  }
  for (const auto& o : options) opts.push_back(o.c_str());
  Program prog = nullptr;
  check(a.create(&prog, source.c_str(), name.c_str(), int(headers.size()), hSrc.data(), hName.data()), "nvrtcCreateProgram");
  NvrtcOutput out;
  try {
    const Result res = a.compile(prog, int(opts.size()), opts.data());
    size_t n = 0;
    check(a.logSize(prog, &n), "nvrtcGetProgramLogSize");
    std::string log(n, '\0');
    if (n) check(a.log(prog, &log[0]), "nvrtcGetProgramLog");
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    out.log = std::move(log);
    if (res == kCompilationError) {
      a.destroy(&prog);
      return out;
    }
    if (res == kBuiltinFailure)
      NNA_FAIL("NOT_SUPPORTED",
               "JIT kernels need NVRTC's builtins library (libnvrtc-builtins), which libnvrtc could not load: put its folder on the library path (LD_LIBRARY_PATH)");
    if (res != 0) NNA_FAIL("NVRTC_ERROR", std::string("nvrtcCompileProgram failed: ") + a.errorString(res) + (out.log.empty() ? "" : ":\n" + out.log));
    check(a.cubinSize(prog, &n), "nvrtcGetCUBINSize");
    out.cubin.resize(n);
    check(a.cubin(prog, out.cubin.data()), "nvrtcGetCUBIN");
    out.ok = true;
  } catch (...) {
    a.destroy(&prog);
    throw;
  }
  a.destroy(&prog);
  return out;
}

}  // namespace nna
