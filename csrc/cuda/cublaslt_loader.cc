// cublaslt_loader.cc: dlopen of libcublasLt and the entry points of one product with an epilogue.
// The prototypes below and cublaslt_abi.h's numbers and structs are cuBLASLt's C ABI, declared
// here because the build machines have no cublasLt.h.
#include "cublaslt_loader.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "../core/env.h"
#include "../core/failure.h"
#include "check.cuh"
#include "cublaslt_abi.h"
#include "library_search.h"

namespace nna {
namespace {
using namespace lt_abi;

using Handle = void*;  // cublasLtHandle_t
using Desc = void*;    // cublasLtMatmulDesc_t
using Layout = void*;  // cublasLtMatrixLayout_t
using Pref = void*;    // cublasLtMatmulPreference_t
using Status = int;    // cublasStatus_t

struct Api {
  Status (*create)(Handle*) = nullptr;
  Status (*descCreate)(Desc*, int, int) = nullptr;
  Status (*descDestroy)(Desc) = nullptr;
  Status (*descSet)(Desc, int, const void*, size_t) = nullptr;
  Status (*layoutCreate)(Layout*, int, uint64_t, uint64_t, int64_t) = nullptr;
  Status (*layoutDestroy)(Layout) = nullptr;
  Status (*layoutSet)(Layout, int, const void*, size_t) = nullptr;
  Status (*prefCreate)(Pref*) = nullptr;
  Status (*prefDestroy)(Pref) = nullptr;
  Status (*prefSet)(Pref, int, const void*, size_t) = nullptr;
  Status (*heuristic)(Handle, Desc, Layout, Layout, Layout, Layout, Pref, int, Heuristic*, int*) = nullptr;
  Status (*matmul)(Handle, Desc, const void*, const void*, Layout, const void*, Layout, const void*, const void*, Layout, void*, Layout, const Algo*, void*, size_t,
                   cudaStream_t) = nullptr;
  std::string status = "not loaded";
  bool ok = false;
};

const Api& api() {
  static const Api a = [] {
    Api r;
    const std::string env = knob(Knob::CublasLt);  // a path picks the library; on / off is read per run (LayerRun)
    std::string tried;
    void* lib = openCudaLibrary(env == "0" || env == "1" || env == "forward" ? "" : env, {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, "libcublasLt.so", &tried);
    if (!lib) {
      r.status = "libcublasLt not found (tried " + tried + ")";
      return r;
    }
    auto sym = [&](const char* name) { return dlsym(lib, name); };
    r.create = reinterpret_cast<decltype(r.create)>(sym("cublasLtCreate"));
    r.descCreate = reinterpret_cast<decltype(r.descCreate)>(sym("cublasLtMatmulDescCreate"));
    r.descDestroy = reinterpret_cast<decltype(r.descDestroy)>(sym("cublasLtMatmulDescDestroy"));
    r.descSet = reinterpret_cast<decltype(r.descSet)>(sym("cublasLtMatmulDescSetAttribute"));
    r.layoutCreate = reinterpret_cast<decltype(r.layoutCreate)>(sym("cublasLtMatrixLayoutCreate"));
    r.layoutDestroy = reinterpret_cast<decltype(r.layoutDestroy)>(sym("cublasLtMatrixLayoutDestroy"));
    r.layoutSet = reinterpret_cast<decltype(r.layoutSet)>(sym("cublasLtMatrixLayoutSetAttribute"));
    r.prefCreate = reinterpret_cast<decltype(r.prefCreate)>(sym("cublasLtMatmulPreferenceCreate"));
    r.prefDestroy = reinterpret_cast<decltype(r.prefDestroy)>(sym("cublasLtMatmulPreferenceDestroy"));
    r.prefSet = reinterpret_cast<decltype(r.prefSet)>(sym("cublasLtMatmulPreferenceSetAttribute"));
    r.heuristic = reinterpret_cast<decltype(r.heuristic)>(sym("cublasLtMatmulAlgoGetHeuristic"));
    r.matmul = reinterpret_cast<decltype(r.matmul)>(sym("cublasLtMatmul"));
    if (!r.create || !r.descCreate || !r.descDestroy || !r.descSet || !r.layoutCreate || !r.layoutDestroy || !r.layoutSet || !r.prefCreate || !r.prefDestroy || !r.prefSet ||
        !r.heuristic || !r.matmul) {
      r.status = "libcublasLt loaded but an entry point is missing";
      return r;  // the library stays loaded; nothing of it is called
    }
    r.ok = true;
    r.status = "";
    return r;
  }();
  return a;
}

void ltCheck(Status s, const char* what) {
  if (s != 0) NNA_FAIL("CUBLAS_ERROR", std::string(what) + " failed with cublasStatus " + std::to_string(s));
}

std::mutex cacheMutex;

// One handle per device (the heuristics read the current device's properties).
Handle handleFor(int device) {
  static auto* handles = new std::map<int, Handle>();  // never destroyed: lanes outlive static teardown
  auto it = handles->find(device);
  if (it != handles->end()) return it->second;
  Handle h = nullptr;
  ltCheck(api().create(&h), "cublasLtCreate");
  (*handles)[device] = h;
  return h;
}

// The descriptors of one product, destroyed with it.
class Descriptors {
 public:
  explicit Descriptors(const LtProduct& p) {
    const Api& a = api();
    ltCheck(a.descCreate(&desc_, p.tf32 ? kComputeFastTf32 : kCompute32F, kR32F), "cublasLtMatmulDescCreate");
    const int32_t ta = p.transA ? 1 : 0, tb = p.transB ? 1 : 0;
    const uint32_t ep = uint32_t(p.epilogue);
    set(kDescTransA, &ta, sizeof ta);
    set(kDescTransB, &tb, sizeof tb);
    set(kDescEpilogue, &ep, sizeof ep);
    if (p.bias) set(kDescBias, &p.bias, sizeof p.bias);
    if (p.aux) {
      set(kDescAux, &p.aux, sizeof p.aux);
      set(kDescAuxLd, &p.auxLd, sizeof p.auxLd);
    }
    if (p.scalars) {
      const int32_t mode = kPointerDevice;
      set(kDescPointerMode, &mode, sizeof mode);
    }
    // Column-major operands as stored: op(A) is m x k, op(B) k x n, C and D m x n.
    const int in = int(p.inputs);
    layout(&a_, in, p.transA ? p.k : p.m, p.transA ? p.m : p.k, p.lda, p.batch, p.strideA);
    layout(&b_, in, p.transB ? p.n : p.k, p.transB ? p.k : p.n, p.ldb, p.batch, p.strideB);
    layout(&c_, kR32F, p.m, p.n, p.ldc, p.batch, p.strideC);
    if (p.batch > 1 && p.bias) set(kDescBiasBatchStride, &p.strideBias, sizeof p.strideBias);
  }
  ~Descriptors() {
    const Api& a = api();
    for (Layout l : {a_, b_, c_})
      if (l) a.layoutDestroy(l);
    if (desc_) a.descDestroy(desc_);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  Desc desc_ = nullptr;
  Layout a_ = nullptr, b_ = nullptr, c_ = nullptr;

 private:
  void set(int attr, const void* v, size_t n) { ltCheck(api().descSet(desc_, attr, v, n), "cublasLtMatmulDescSetAttribute"); }
  void layout(Layout* l, int type, int rows, int cols, int ld, int batch, int64_t stride) {
    ltCheck(api().layoutCreate(l, type, uint64_t(rows), uint64_t(cols), int64_t(ld)), "cublasLtMatrixLayoutCreate");
    if (batch == 1) return;
    const int32_t count = batch;
    ltCheck(api().layoutSet(*l, kLayoutBatchCount, &count, sizeof count), "cublasLtMatrixLayoutSetAttribute");
    ltCheck(api().layoutSet(*l, kLayoutBatchStride, &stride, sizeof stride), "cublasLtMatrixLayoutSetAttribute");
  }
};

// What decides the algorithm: everything but the pointers' values, and their alignments.
using Key = std::tuple<int, int, int, int, int, int, int, int, int, uint32_t, int64_t, int, int64_t, int64_t, int64_t, int64_t>;
unsigned alignment(const void* p) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  unsigned a = 1;
  while (a < 256 && !(v & a)) a <<= 1;
  return a;
}
// The alignment the heuristics are told for A, B, C and D (which they otherwise take as 256 bytes).
unsigned operandAlignment(const LtProduct& p) {
  unsigned al = 256;
  for (const void* q : {p.A, p.B, static_cast<const void*>(p.C)}) al = std::min(al, alignment(q));
  if (p.batch > 1)  // every product's operands: model 0's plus a multiple of the stride
    for (int i = 0; i < 3; ++i) {
      const int64_t st = i == 0 ? p.strideA : i == 1 ? p.strideB : p.strideC;
      const size_t bytes = i < 2 && p.inputs != LtInputs::Fp32 ? 2 : sizeof(float);
      if (st) al = std::min(al, alignment(reinterpret_cast<const void*>(uintptr_t(st) * bytes)));
    }
  return al;
}
Key keyOf(const LtProduct& p, int device) {
  const unsigned al = operandAlignment(p);
  const int flags = (p.transA ? 1 : 0) | (p.transB ? 2 : 0) | (p.tf32 ? 4 : 0) | (p.scalars ? 8 : 0) | (p.beta != 0 || p.scalars ? 16 : 0);
  return Key(device, flags | (int(p.inputs) << 8), p.m, p.n, p.k, p.lda, p.ldb, p.ldc, int(al), uint32_t(p.epilogue), p.auxLd, p.batch, p.strideA, p.strideB, p.strideC,
             p.strideBias);
}
struct Choice {
  bool ok = false;
  Heuristic h{};
};
std::map<Key, Choice>& choices() {
  static auto* c = new std::map<Key, Choice>();
  return *c;
}

// The remembered choice for p on the current device (asked once per key).
const Choice& choose(const LtProduct& p) {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(cacheMutex);
  const Key key = keyOf(p, device);
  auto it = choices().find(key);
  if (it != choices().end()) return it->second;
  Choice c;
  const Api& a = api();
  Handle h = handleFor(device);
  const Descriptors d(p);
  Pref pref = nullptr;
  ltCheck(a.prefCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t cap = kLtMaxWorkspace;
  const uint32_t al = operandAlignment(p);
  Status s = a.prefSet(pref, kPrefMaxWorkspace, &cap, sizeof cap);
  for (int i = 0; i < 4 && s == 0; ++i) s = a.prefSet(pref, kPrefMinAlignA + i, &al, sizeof al);
  int found = 0;
  if (s == 0) s = a.heuristic(h, d.desc_, d.a_, d.b_, d.c_, d.c_, pref, 1, &c.h, &found);
  a.prefDestroy(pref);
  // Not supported (no algorithm, or the epilogue refused for these types): the caller's own path.
  c.ok = s == 0 && found > 0 && c.h.state == 0;
  return choices().emplace(key, c).first->second;
}

}  // namespace

bool ltAvailable() { return api().ok; }
const std::string& ltStatus() { return api().status; }

bool ltSupports(const LtProduct& p, size_t* workspace) {
  if (!ltAvailable()) return false;
  if ((p.bias && alignment(p.bias) < 16) || (p.aux && alignment(p.aux) < 16)) return false;
  if (p.batch > 1 && (p.aux || (p.bias && p.strideBias * sizeof(float) % 16 != 0))) return false;
  const Choice& c = choose(p);
  if (workspace) *workspace = c.ok ? c.h.workspaceSize : 0;
  return c.ok;
}

void ltMatmul(const Lane& lane, const LtProduct& p, void* work, size_t workBytes) {
  const Choice& c = choose(p);
  if (!c.ok) NNA_FAIL("CUBLAS_ERROR", "cublasLtMatmul: no algorithm for this product (ltSupports was not asked)");
  if (c.h.workspaceSize > workBytes) NNA_FAIL("CUBLAS_ERROR", "cublasLtMatmul: the workspace is smaller than the algorithm needs");
  Handle h = nullptr;
  {
    std::lock_guard<std::mutex> lock(cacheMutex);
    h = handleFor(lane.device);
  }
  const Descriptors d(p);
  const void* alpha = p.scalars ? p.scalars : &p.alpha;
  const void* beta = p.scalars ? static_cast<const float*>(p.scalars) + 1 : &p.beta;
  ltCheck(api().matmul(h, d.desc_, alpha, p.A, d.a_, p.B, d.b_, beta, p.C, d.c_, p.C, d.c_, &c.h.algo, work, workBytes, lane.stream), "cublasLtMatmul");
}

}  // namespace nna
