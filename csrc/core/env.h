// env.h: every NN_ARENA_* environment knob, documented once, here. The native code reads its
// knobs only through these functions (no NN_ARENA_* getenv elsewhere); the table in env.cc is the
// one list of names, accepted values and defaults.
//
// Run time (native, this file):
//   NN_ARENA_THREADS              CPU backend: its thread pool's size (default: every core)
//   NN_ARENA_CPU_ISA              CPU backend: portable | avx2 | avx512 | neon caps the GEMM kernels used
//                                 (default: the best the CPU has)
//   NN_ARENA_STEP_PATH            CUDA: fused | layers | auto (default) — force a training path
//   NN_ARENA_GEMM                 CUDA: tiled keeps the per-layer products off cuBLAS
//   NN_ARENA_CUDA_GRAPH           CUDA: 0 launches every per-layer step directly (default: a run's
//                                 second step is captured as a graph and replayed; read per run)
//   NN_ARENA_SIDE_STREAM          CUDA: 0 keeps every per-layer launch on one stream (default: the
//                                 weight-gradient products run beside the error products on a
//                                 second stream; read per run)
//   NN_ARENA_CUBLAS               CUDA: 0 turns cuBLAS off; a path picks the library
//   NN_ARENA_CUBLASLT             CUDA, the per-layer path in fp32 / tf32 (read per run): forward
//                                 (default) takes the forward products with bias and ReLU in
//                                 cuBLASLt's epilogue where the library loads; 1 (or a path picking
//                                 the library) every product with its epilogues (bias, ReLU and
//                                 their gradients); 0 none
//   NN_ARENA_NVRTC                CUDA: a path picks the NVRTC library of JIT kernels
//   NN_ARENA_NCCL                 CUDA: 0 turns NCCL off; a path picks libnccl (data parallelism)
//   NN_ARENA_FUSED_BLOCKS_PER_SM  CUDA: 1 | 2 (default) blocks per multiprocessor of the fused grid
//   NN_ARENA_FUSED_TRACE          CUDA: print the times between the fused kernel's barriers (2: and
//                                 add an empty phase after each, the barrier's cost in place)
//   NN_ARENA_FUSED_FORWARD        CUDA: warp keeps small forward products on the one-warp tiles
//                                 (default block: one block a tile where the tiles fit the grid)
//   NN_ARENA_STAGE_TRACE          staged memory: print every copy and phase of a run
//   NN_ARENA_SYNC_TRACE           data parallelism: print, at the end of each group run, when each
//                                 gradient range was handed over, reduced and applied (device time)
//   NN_ARENA_SYNC_OVERLAP         data parallelism: 0 reduces each layer after its whole backward and
//                                 steps it on the reductions' stream (default 1: dw before the error
//                                 product, steps on a stream of their own)
//   NN_ARENA_SYNC_SLICE           data parallelism, overlapped: a large first layer's dw reduced in
//                                 slices of this many MiB as its product writes them (default 0: whole)
//   NN_ARENA_SYNC_GRAPHS          data parallelism: a replica's steps, all-reduces included, captured
//                                 as a CUDA graph (default 1; 0 launches each step directly)
//   NN_ARENA_UM_TRACE             managed scheduler: print every mover op and compute wait
//   NN_ARENA_UM_EVICT_DEAD        managed scheduler: discard (default) | discard-host | host
//   NN_ARENA_UM_PLACE             managed scheduler: discard-device (default) | device
//   NN_ARENA_UM_MOVERS            managed scheduler: "in,out" mover threads (default 2,4)
//   NN_ARENA_UM_SLACK             managed scheduler: bytes of evictions in flight while fetching
//   NN_ARENA_UM_READ_DUP          managed scheduler: 1 = forward weights as read-only duplicates
//   NN_ARENA_RESIDENCY_TRACE      residency replay (tests): print each phase's device bytes
//   NN_ARENA_GATHER_THREADS       streaming: threads producing windows (default: the cores up to 12)
//   NN_ARENA_GATHER               streaming: mmap (default) | pread, how .npy rows are read
// Build time (scripts/find-nvcc.cjs): NN_ARENA_CUDA=0 (CPU-only build), NN_ARENA_CUDA_ARCH.
// Not NN_ARENA_* but read by nn-arena: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
// (multi-process data parallelism, read in TS by src/parallel/env.ts only).
// Tests only (test/gpu): NN_ARENA_REQUIRE_GPU, NN_ARENA_UNDER_SANITIZER, NN_ARENA_GRAD_CASES,
// NN_ARENA_SOAK_CYCLES.
// Knobs are read when used: the per-run ones (the managed scheduler's) at every run, the others
// once per process by the code that caches them.
#pragma once
#include <cstdint>
#include <string>

namespace nna {

enum class Knob : uint32_t {
  Threads,
  CpuIsa,
  StepPath,
  Gemm,
  Cublas,
  FusedBlocksPerSm,
  FusedTrace,
  StageTrace,
  UmTrace,
  UmEvictDead,
  UmPlace,
  UmMovers,
  UmSlack,
  UmReadDup,
  ResidencyTrace,
  Nvrtc,
  Nccl,
  FusedForward,
  GatherThreads,
  Gather,
  CudaGraph,
  CublasLt,
  SideStream,
  SyncTrace,
  SyncOverlap,
  SyncSlice,
  SyncGraphs,
  Count
};

// The knob's name ("NN_ARENA_THREADS").
const char* knobName(Knob k);
// Its value, or `fallback` where it is unset or empty.
std::string knob(Knob k, const char* fallback = "");
// Set to anything but "" or "0".
bool knobOn(Knob k);
// An integer in [lo, hi], `fallback` where unset; Failure BAD_OPTION naming the knob otherwise.
long knobInt(Knob k, long fallback, long lo, long hi);

}  // namespace nna
