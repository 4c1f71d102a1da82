// nccl_loader.cc: dlopen of libnccl.so.2 and the entry points of nccl_loader.h.
#include "nccl_loader.h"

#include <dlfcn.h>

#include "../core/env.h"
#include "../core/failure.h"

namespace nna::nccl {

const Api& api() {
  static const Api a = [] {
    Api r;
    const std::string env = knob(Knob::Nccl);
    if (env == "0") {
      r.status = "disabled (NN_ARENA_NCCL=0)";
      return r;
    }
    void* lib = nullptr;
    std::string tried;
    for (const std::string& name : {env == "1" ? std::string() : env, std::string("libnccl.so.2"), std::string("libnccl.so")}) {
      if (name.empty()) continue;
      if ((lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
      tried += (tried.empty() ? "" : ", ") + name;
    }
    if (!lib) {
      r.status = "libnccl not found (tried " + tried + "); install NCCL 2 (libnccl2) or set NN_ARENA_NCCL to its path";
      return r;
    }
    auto sym = [&](const char* name) { return dlsym(lib, name); };
    r.getVersion = reinterpret_cast<decltype(r.getVersion)>(sym("ncclGetVersion"));
    r.getUniqueId = reinterpret_cast<decltype(r.getUniqueId)>(sym("ncclGetUniqueId"));
    r.commInitRank = reinterpret_cast<decltype(r.commInitRank)>(sym("ncclCommInitRank"));
    r.commInitAll = reinterpret_cast<decltype(r.commInitAll)>(sym("ncclCommInitAll"));
    r.allReduce = reinterpret_cast<decltype(r.allReduce)>(sym("ncclAllReduce"));
    r.commDestroy = reinterpret_cast<decltype(r.commDestroy)>(sym("ncclCommDestroy"));
    r.commAbort = reinterpret_cast<decltype(r.commAbort)>(sym("ncclCommAbort"));
    r.commGetAsyncError = reinterpret_cast<decltype(r.commGetAsyncError)>(sym("ncclCommGetAsyncError"));
    r.getErrorString = reinterpret_cast<decltype(r.getErrorString)>(sym("ncclGetErrorString"));
    r.groupStart = reinterpret_cast<decltype(r.groupStart)>(sym("ncclGroupStart"));
    r.groupEnd = reinterpret_cast<decltype(r.groupEnd)>(sym("ncclGroupEnd"));
    if (!r.getVersion || !r.getUniqueId || !r.commInitRank || !r.commInitAll || !r.allReduce || !r.commDestroy || !r.commAbort || !r.commGetAsyncError || !r.getErrorString ||
        !r.groupStart || !r.groupEnd) {
      r.status = "libnccl loaded but an entry point is missing (NCCL 2.4 or later is needed)";
      return r;
    }
    if (r.getVersion(&r.version) != kSuccess) {
      r.status = "ncclGetVersion failed";
      return r;
    }
    r.status = "";
    return r;
  }();
  return a;
}

const Api& require() {
  const Api& a = api();
  if (!a.status.empty()) NNA_FAIL("NCCL_UNAVAILABLE", "NCCL is not available: " + a.status);
  return a;
}

void check(Result r, const char* what) {
  if (r == kSuccess) return;
  const Api& a = api();
  NNA_FAIL("NCCL_ERROR", std::string(what) + " failed: " + (a.getErrorString ? a.getErrorString(r) : "?") + " (ncclResult " + std::to_string(r) + ")");
}

}  // namespace nna::nccl
