#!/usr/bin/env bash
# gpu-session.sh: what one call of the GPU machine runs (it has no Node.js: ../shared/gpu):
#   bash .gpu/run.sh bash scripts/gpu-session.sh PART...
# PARTS: sync (grid barrier cost), tests (the GPU suite), embed (JIT kernels and the custom-kernel example), um (device-budget bench), paths (the training tests on each CUDA path), steps (step
# timings of every path), torch (the PyTorch reference), bench (npm run bench), ncu (profiles), release (managed memory
# given back by the driver: bench/micro/um_release.cu), sanitize / sanitize-budget (compute-sanitizer),
# torchmem (PyTorch memory per training stage), stepslite (one profile run per network and optimizer),
# nccl (data parallelism over NCCL: test/gpu/nccl.gpu.test.ts, then bench/data-parallel.mjs on every GPU).
# Logs and results go to $OUT (the device tool brings them back).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export NN_ARENA_REQUIRE_GPU=1
node -e "import('./dist/index.js').then((m) => console.log(JSON.stringify(m.cudaInfo())))"
for part in "$@"; do
  echo "=== $part ==="
  case $part in
    tests)  # um.gpu.test.ts measures device memory device-wide: alone, first
      vitest run test/gpu/um.gpu.test.ts > "$OUT/tests-um.log" 2>&1
      vitest run --no-file-parallelism test/gpu/arena.gpu.test.ts test/gpu/train.gpu.test.ts > "$OUT/tests.log" 2>&1
      grep -hE "✓|✗|×|FAIL|Tests |cpu-vs-cuda|: budget|AssertionError" "$OUT/tests-um.log" "$OUT/tests.log" | cut -c1-400 | tail -40 ;;
    embed)  # issue 17: JIT kernels (NVRTC found at run time) and examples/custom-kernel (built here with nvcc: carry its build/)
      ls /usr/local/cuda/lib64/libnvrtc* 2>&1 | head -3
      vitest run test/gpu/jit.gpu.test.ts test/gpu/custom-kernel.gpu.test.ts > "$OUT/embed.log" 2>&1
      grep -hE "✓|✗|×|FAIL|Tests |AssertionError|Error" "$OUT/embed.log" | cut -c1-400 | tail -40 ;;
    um) node dist/bench.js --only um 2>&1 | tee "$OUT/um-bench.log" | tail -30; cp bench/results/*.json bench/results/README.md "$OUT/" ;;
    paths)
      for path in layers fused; do
        NN_ARENA_STEP_PATH=$path vitest run test/gpu/train.gpu.test.ts > "$OUT/path-$path.log" 2>&1
        grep -E "cpu-vs-cuda|Tests |FAIL|AssertionError|expected" "$OUT/path-$path.log" | head -20 | sed "s/^/[$path] /"
      done
      NN_ARENA_STEP_PATH=layers NN_ARENA_GEMM=tiled vitest run test/gpu/train.gpu.test.ts > "$OUT/path-tiled.log" 2>&1
      grep -E "cpu-vs-cuda|Tests |FAIL|AssertionError|expected" "$OUT/path-tiled.log" | head -20 | sed "s/^/[tiled] /" ;;
    steps)
      for net in S M; do for opt in sgd adam; do
        node bench/profile-step.mjs $net $opt 1000
        NN_ARENA_FUSED_BLOCKS_PER_SM=1 node bench/profile-step.mjs $net $opt 1000
        NN_ARENA_STEP_PATH=${ALT_PATH:-layers} node bench/profile-step.mjs $net $opt 1000
      done; done
      for opt in sgd adam; do node bench/profile-step.mjs L $opt 50; done ;;
    torch) PYTHONUNBUFFERED=1 python3 bench/torch_ref.py --out "$OUT/torch-ref.json" ;;
    torchmem)  # PyTorch's memory per training stage, to compare with src/report/pytorch.ts (bench/torch-memory-compare.mjs)
      PYTHONUNBUFFERED=1 python3 bench/torch_memory.py --out "$OUT/torch-memory.json" 2>&1 | tail -30 ;;
    stepslite)  # one profile run of each network and optimizer: step times against bench/results
      for net in S M; do for opt in sgd adam; do node bench/profile-step.mjs $net $opt 1000; done; done
      for opt in sgd adam; do node bench/profile-step.mjs L $opt 50; done ;;
    bench) node dist/bench.js --only steps,memory 2>&1 | tee "$OUT/bench.log" | tail -40; cp bench/results/*.json bench/results/README.md "$OUT/" ;;
    sanitize)
      for tool in memcheck racecheck; do
        NN_ARENA_UNDER_SANITIZER=1 NN_ARENA_GRAD_CASES=2 compute-sanitizer --tool $tool --target-processes all --report-api-errors no \
          vitest run test/gpu/train.gpu.test.ts > "$OUT/sanitize-$tool.log" 2>&1
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Tests " "$OUT/sanitize-$tool.log" | sed "s/^/[$tool] /"
      done ;;
    sanitize-budget)  # the budgeted paths on the small networks (the L-class arena is too slow under memcheck)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --target-processes all --report-api-errors no \
          vitest run test/gpu/um.gpu.test.ts -t "other optimizers|edits weights" > "$OUT/sanitize-budget-$tool.log" 2>&1
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Tests " "$OUT/sanitize-budget-$tool.log" | sed "s/^/[$tool] /"
      done ;;
    ncufused)
      ncu --set full --import-source no -k regex:fusedRun --launch-skip 1 --launch-count 1 --page details node bench/profile-step.mjs S sgd 100 > "$OUT/ncu-fused-S.txt" 2>&1
      grep -E "Duration|Registers|Local Memory|Achieved Occupancy|Theoretical Occupancy|Stall|Warp Cycles Per Issued|Issue Slot|Memory Throughput|L1/TEX Hit|L2 Hit|Compute \(SM\)" "$OUT/ncu-fused-S.txt" | head -40 ;;
    ncu)  # per-kernel time of the M and L steps (the per-layer path): where the step goes
      for net in M L; do
        ncu --print-summary per-kernel --metrics gpu__time_duration.sum node bench/profile-step.mjs $net sgd 10 > "$OUT/ncu-$net.txt" 2>&1
        grep -E "^  [a-zA-Z_].*\(|gpu__time_duration.sum" "$OUT/ncu-$net.txt" | paste - - | awk '{print}' | cut -c1-220 | head -20
      done ;;
    small)
      for net in S; do for opt in sgd adam; do
        node bench/profile-step.mjs $net $opt 1000
        NN_ARENA_FUSED_BLOCKS_PER_SM=1 node bench/profile-step.mjs $net $opt 1000
      done; done
      NN_ARENA_STEP_PATH=fused node bench/profile-step.mjs M sgd 1000
      NN_ARENA_STEP_PATH=fused NN_ARENA_FUSED_BLOCKS_PER_SM=1 node bench/profile-step.mjs M sgd 1000 ;;
    nccl)  # issue 20: 2+ GPUs and libnccl.so.2 (NCCL 2.28 in the system library path)
      nvidia-smi topo -m 2>&1 | head -12 > "$OUT/nccl-topo.txt"
      ls /usr/lib/x86_64-linux-gnu/libnccl* /usr/local/lib/libnccl* 2>/dev/null | head -3
      node -e "import('./dist/index.js').then((m) => console.log(JSON.stringify(m.ncclInfo())))"
      vitest run test/gpu/nccl.gpu.test.ts > "$OUT/nccl-tests.log" 2>&1
      grep -hE "✓|✗|×|FAIL|Tests |nccl |skipped|AssertionError|Error" "$OUT/nccl-tests.log" | cut -c1-400 | tail -40
      UV_THREADPOOL_SIZE=16 node bench/data-parallel.mjs --out "$OUT" 2>&1 | tee "$OUT/nccl-bench.log" | tail -30
      UV_THREADPOOL_SIZE=16 node bench/data-parallel.mjs --order kind-major --nets L --out "$OUT/kind-major" 2>&1 | tail -8 ;;
    sync) nvcc -O3 -arch=sm_90 bench/micro/grid_sync.cu -o /tmp/gs && /tmp/gs ;;
    release) nvcc -O3 -arch=sm_90 bench/micro/um_release.cu -o /tmp/ur && /tmp/ur | tee "$OUT/um-release.txt" ;;
    *) echo "unknown part $part" ;;
  esac
done
