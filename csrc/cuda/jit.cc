// jit.cc: NVRTC -> CUBIN -> cudaLibraryLoadData, all within the CUDA runtime once NVRTC has
// compiled (no libcuda symbols are called directly: the static runtime already reaches the
// driver). Libraries are context-independent, so one load serves every arena of the process.
#include "jit.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "../core/failure.h"
#include "check.cuh"
#include "cublas_loader.h"
#include "nvrtc_loader.h"

namespace nna {

struct JitKernel {
  std::vector<JitType> params;
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = nullptr;
  int device = 0;
};

namespace {

// NVRTC has no C library: the two the public header includes, as it needs them (LP64, as on
// the host that wrote the arena; the header's static_asserts check the sizes).
const char* kStdint =
    "#pragma once\n"
    "typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long int64_t;\n"
    "typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;\n"
    "typedef unsigned long uint64_t; typedef long intptr_t; typedef unsigned long uintptr_t;\n";
const char* kStddef =
    "#pragma once\n"
    "typedef unsigned long size_t; typedef long ptrdiff_t;\n"
    "#ifndef NULL\n#define NULL 0\n#endif\n";

std::string signature(const std::string& name, const std::vector<JitType>& params) {
  std::string s = "void " + name + "(void* base";
  for (JitType t : params) s += std::string(", ") + jitTypeName(t);
  return s + ")";
}

// Appended to the user's source: the kernel's declared type must be the signature's, checked
// by the compiler, so a launch can never pass arguments of the wrong size.
std::string signatureCheck(const std::string& name, const std::vector<JitType>& params) {
  std::string fn = "void (*)(void*";
  for (JitType t : params) fn += std::string(", ") + jitTypeName(t);
  fn += ")";
  return "\nnamespace nna_jit_check {\n"
         "template <class A, class B> struct same { static const bool value = false; };\n"
         "template <class A> struct same<A, A> { static const bool value = true; };\n"
         "static_assert(same<decltype(&::" +
         name + "), " + fn +
         ">::value, \"nn-arena: the kernel must be declared "
         "extern \\\"C\\\" __global__ " +
         signature(name, params) +
         " to match the signature given to compileKernel\");\n"
         "}\n";
}

std::vector<char> compile(const std::string& source, const std::string& name, const std::vector<JitType>& params, const std::string& header, const std::string& arch) {
  const NvrtcOutput out = nvrtcCompile(source + signatureCheck(name, params), name + ".cu", {{"nn_arena.h", header}, {"stdint.h", kStdint}, {"stddef.h", kStddef}},
                                       {"--gpu-architecture=" + arch, "-std=c++17", "-default-device"});
  // The log goes to the message and, alone, to `detail` (where a Failure's origin usually is).
  if (!out.ok) throw Failure("COMPILE_FAILED", "kernel '" + name + "' did not compile for " + arch + ":\n" + out.log, out.log);
  return out.cubin;
}

// Never destroyed: kernels stay loaded for the process (a launch may outlive static teardown).
std::mutex cacheMutex;
std::map<std::string, uint32_t>& cache() {
  static auto* c = new std::map<std::string, uint32_t>();
  return *c;
}
std::vector<JitKernel*>& kernels() {
  static auto* k = new std::vector<JitKernel*>();
  return *k;
}

const JitKernel& kernelOf(uint32_t id) {
  const std::vector<JitType>* p = jitParams(id);
  if (!p) NNA_FAIL("BAD_ARGUMENT", "not a compiled kernel");
  std::lock_guard<std::mutex> lock(cacheMutex);
  return *kernels()[id];
}

std::string checkArgs(const JitKernel& k, const std::vector<JitValue>& args) {
  if (args.size() != k.params.size()) return "the kernel takes " + std::to_string(k.params.size()) + " argument(s) after the base pointer, got " + std::to_string(args.size());
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].type != k.params[i]) return "argument " + std::to_string(i) + " is not a " + jitTypeName(k.params[i]);
  return "";
}

}  // namespace

const char* jitTypeName(JitType t) {
  switch (t) {
    case JitType::F32: return "float";
    case JitType::F64: return "double";
    case JitType::I32: return "int";
    case JitType::U32: return "unsigned int";
    case JitType::I64: return "long long";
    case JitType::U64: return "unsigned long long";
  }
  return "?";
}

size_t jitCompileOnly(const std::string& source, const std::string& name, const std::vector<JitType>& params, const std::string& header, const std::string& arch) {
  return compile(source, name, params, header, arch).size();
}

uint32_t jitKernel(const std::string& source, const std::string& name, const std::vector<JitType>& params, const std::string& header) {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  int major = 0, minor = 0;  // attributes, not cudaGetDeviceProperties: a cache hit stays cheap
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  std::string key = arch + '\0' + std::to_string(device) + '\0' + name + '\0';
  for (JitType t : params) key += char('0' + int(t));
  key += '\0' + header + '\0' + source;
  // One lock over the compile too: two threads asking for the same kernel compile it once.
  std::lock_guard<std::mutex> lock(cacheMutex);
  auto it = cache().find(key);
  if (it != cache().end()) return it->second;
  const std::vector<char> cubin = compile(source, name, params, header, arch);
  auto k = std::make_unique<JitKernel>();
  k->params = params;
  k->device = device;
  CUDA_CHECK(cudaLibraryLoadData(&k->library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  const cudaError_t e = cudaLibraryGetKernel(&k->kernel, k->library, name.c_str());
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    cudaLibraryUnload(k->library);
    NNA_FAIL("COMPILE_FAILED", "kernel '" + name + "' compiled, but its module has no kernel of that name: declare it extern \"C\" __global__");
  }
  const uint32_t id = uint32_t(kernels().size());
  kernels().push_back(k.release());
  cache().emplace(std::move(key), id);
  return id;
}

const std::vector<JitType>* jitParams(uint32_t id) {
  std::lock_guard<std::mutex> lock(cacheMutex);
  return id < kernels().size() ? &kernels()[id]->params : nullptr;
}

void jitLaunch(uint32_t id, void* deviceBase, JitDims grid, JitDims block, uint32_t sharedBytes, const std::vector<JitValue>& args) {
  const JitKernel& k = kernelOf(id);
  const std::string why = checkArgs(k, args);
  if (!why.empty()) NNA_FAIL("BAD_ARGUMENT", why);
  CUDA_CHECK(cudaSetDevice(k.device));  // a worker thread has no current device of its own
  std::vector<void*> ptrs;
  ptrs.push_back(&deviceBase);
  for (const JitValue& a : args) ptrs.push_back(const_cast<void*>(static_cast<const void*>(&a.f32)));  // the union's first byte
  LaneGuard lane;
  const cudaError_t e =
      cudaLaunchKernel(reinterpret_cast<const void*>(k.kernel), dim3(grid.x, grid.y, grid.z), dim3(block.x, block.y, block.z), ptrs.data(), sharedBytes, lane->stream);
  // A refused launch (bad dimensions, too much shared memory) is not sticky: clear it from this
  // thread's last error so that a later check of another call does not report it.
  if (e != cudaSuccess) (void)cudaGetLastError();
  cudaCheck(e, "cudaLaunchKernel", __FILE__, __LINE__);
  CUDA_CHECK(cudaStreamSynchronize(lane->stream));
}

}  // namespace nna
