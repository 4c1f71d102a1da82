#include "env.h"

#include <cstdlib>

#include "failure.h"

namespace nna {

namespace {
// In Knob's order; env.h documents each.
const char* const kNames[] = {
    "NN_ARENA_THREADS",        "NN_ARENA_CPU_ISA",     "NN_ARENA_STEP_PATH",       "NN_ARENA_GEMM",          "NN_ARENA_CUBLAS",      "NN_ARENA_FUSED_BLOCKS_PER_SM",
    "NN_ARENA_FUSED_TRACE",    "NN_ARENA_STAGE_TRACE", "NN_ARENA_UM_TRACE",        "NN_ARENA_UM_EVICT_DEAD", "NN_ARENA_UM_PLACE",    "NN_ARENA_UM_MOVERS",
    "NN_ARENA_UM_SLACK",       "NN_ARENA_UM_READ_DUP", "NN_ARENA_RESIDENCY_TRACE", "NN_ARENA_NVRTC",         "NN_ARENA_NCCL",        "NN_ARENA_FUSED_FORWARD",
    "NN_ARENA_GATHER_THREADS", "NN_ARENA_GATHER",      "NN_ARENA_CUDA_GRAPH",      "NN_ARENA_CUBLASLT",      "NN_ARENA_SIDE_STREAM", "NN_ARENA_SYNC_TRACE",
    "NN_ARENA_SYNC_OVERLAP",   "NN_ARENA_SYNC_SLICE",  "NN_ARENA_SYNC_GRAPHS",
};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == size_t(Knob::Count), "one name per knob");
}  // namespace

const char* knobName(Knob k) { return kNames[uint32_t(k)]; }

std::string knob(Knob k, const char* fallback) {
  const char* v = std::getenv(knobName(k));
  return v && *v ? v : fallback;
}

bool knobOn(Knob k) {
  const std::string v = knob(k);
  return !v.empty() && v != "0";
}

long knobInt(Knob k, long fallback, long lo, long hi) {
  const std::string v = knob(k);
  if (v.empty()) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (*end || x < lo || x > hi)
    NNA_FAIL("BAD_OPTION", std::string(knobName(k)) + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + v + "'");
  return x;
}

}  // namespace nna
