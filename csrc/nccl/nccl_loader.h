// nccl_loader.h: NCCL found at run time (libnccl.so.2 with dlopen), never needed by the build.
// The few types and entry points nn-arena calls are declared here from NCCL's stable C ABI
// (src/nccl.h.in of NVIDIA/nccl, unchanged in these parts from 2.4 to 2.28): the machines that
// build nn-arena have no nccl.h.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace nna::nccl {

constexpr size_t kUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct UniqueId {
  char internal[kUniqueIdBytes];
};                              // ncclUniqueId
using Comm = struct ncclComm*;  // ncclComm_t
using Result = int;             // ncclResult_t: 0 = ncclSuccess
constexpr Result kSuccess = 0, kInProgress = 7;
enum DataType : int { kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9 };  // ncclDataType_t
enum RedOp : int { kSum = 0, kMax = 2, kMin = 3 };                  // ncclRedOp_t

struct Api {
  Result (*getVersion)(int*) = nullptr;
  Result (*getUniqueId)(UniqueId*) = nullptr;
  Result (*commInitRank)(Comm*, int, UniqueId, int) = nullptr;
  Result (*commInitAll)(Comm*, int, const int*) = nullptr;
  Result (*allReduce)(const void*, void*, size_t, int, int, Comm, cudaStream_t) = nullptr;
  Result (*commDestroy)(Comm) = nullptr;
  Result (*commAbort)(Comm) = nullptr;
  Result (*commGetAsyncError)(Comm, Result*) = nullptr;
  Result (*groupStart)() = nullptr;
  Result (*groupEnd)() = nullptr;
  const char* (*getErrorString)(Result) = nullptr;
  int version = 0;          // e.g. 22805 for 2.28.5
  std::string status = "";  // "" when loaded; else why not
};

// The loaded library (first use loads it; NN_ARENA_NCCL=0 turns it off, a path picks it).
const Api& api();
// The API, or Failure NCCL_UNAVAILABLE saying why not.
const Api& require();
// Failure NCCL_ERROR naming the call and NCCL's message for a result that is not success.
void check(Result r, const char* what);

}  // namespace nna::nccl
