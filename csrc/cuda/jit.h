// jit.h: CUDA kernels compiled at run time (NVRTC) from a user's source, launched on an arena's
// device base pointer. Plain C++ (no CUDA types), so the addon and CPU-only builds include it;
// csrc/cuda/jit.cc implements it, csrc/cuda/absent.cc stubs it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nna {

// The parameter types a kernel may take after the base pointer, as the signature names them.
enum class JitType : uint8_t { F32, F64, I32, U32, I64, U64 };

// One launch argument, already converted to its parameter's type.
struct JitValue {
  JitType type;
  union {
    float f32;
    double f64;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
  };
};

struct JitDims {
  uint32_t x = 1, y = 1, z = 1;
};

// The C++ type of a parameter ("float", "unsigned long long", ...), for messages and the check.
const char* jitTypeName(JitType t);

// Compiles `name` from `source` for the current device (or finds it in the process-wide cache,
// keyed by source, name, signature, header and architecture) and loads it. The source sees
// `header` (the public nn_arena.h, which the package ships and the caller reads) as "nn_arena.h"; the kernel must be `extern "C" __global__ void name(void* base, ...)`
// with `params` after the base: a mismatch is a compile error. COMPILE_FAILED carries the log;
// NOT_SUPPORTED when NVRTC is missing. Returns the kernel's id; loaded kernels stay loaded for
// the process (ids are never reused).
uint32_t jitKernel(const std::string& source, const std::string& name, const std::vector<JitType>& params, const std::string& header);

// Compiles without a device, for `arch` ("sm_90"): the CUBIN's size, or COMPILE_FAILED. Tests.
size_t jitCompileOnly(const std::string& source, const std::string& name, const std::vector<JitType>& params, const std::string& header, const std::string& arch);

// The parameter types of kernel `id` (after the base pointer); null for an id never returned.
const std::vector<JitType>* jitParams(uint32_t id);

// Launches on a lane's stream and waits for it to complete (CUDA_ERROR for a failed launch or
// a fault in the kernel; BAD_ARGUMENT when `args` do not fit the signature). The caller holds
// the arena's mutex: runs and launches never overlap.
void jitLaunch(uint32_t id, void* deviceBase, JitDims grid, JitDims block, uint32_t sharedBytes, const std::vector<JitValue>& args);

}  // namespace nna
