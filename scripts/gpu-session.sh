#!/usr/bin/env bash
# gpu-session.sh: what one call of the GPU machine runs (it has no Node.js: ../shared/gpu):
#   bash .gpu/run.sh bash scripts/gpu-session.sh PART...
# PARTS: sync (grid barrier cost), tests (the GPU suite), compact (compact == full plan on each CUDA path), embed (JIT kernels and the custom-kernel example), regions (user regions: memory modes, JIT by name, the example's EMA), primitives (Trainer.forward/backward/update vs step, every CUDA path), um (device-budget bench), paths (the training tests on each CUDA path), steps (step
# timings of every path), torch (the PyTorch reference), bench (npm run bench), ncu (profiles), release (managed memory
# given back by the driver: bench/micro/um_release.cu), sanitize / sanitize-budget (compute-sanitizer),
# torchmem (PyTorch memory per training stage; torchmemops: the networks with ops, traced; torchmemacts: other activations, traced), stepslite (one profile run per network and optimizer),
# precision (issue 19: the precision tests through cuBLAS and the tiled tensor-core kernels, then
# M and L step timings in fp32 / tf32x3 / tf32 and PyTorch fp32 / tf32 rows, JSON in $OUT).
# models (issue 19: K models in one arena bit for bit on each CUDA path, then bench/models.mjs with
# the torch.func reference, JSON under $OUT).
# graphs (issue 52: graphed group steps, NN_ARENA_SYNC_GRAPHS: the NCCL tests, then S and M in tf32 and bf16, both
# orders, graphs off and on, by bench/data-parallel.mjs; JSON under $OUT/graphs-<order>-<0|1>/).
# nccl (data parallelism over NCCL: test/gpu/nccl.gpu.test.ts, then bench/data_parallel_ddp.py on one GPU and on two, bench/allreduce_floor.py, then bench/data-parallel.mjs in fp32 / tf32 / bf16, both wires, with DDP's steps and the floor beside).
# optim (issue 28: the PyTorch fixtures regenerated with the machine's torch into $OUT/optim.json,
# test/gpu/optimizers.gpu.test.ts on the fused, cuBLAS and tiled paths, the S step bench Adam
# vs AdamW + cosine + clipping).
# act (the activations and losses: test/gpu/act.gpu.test.ts on the fused, cuBLAS and tiled paths).
# prop (issue 27: test/property.test.ts on CUDA arenas, auto and per-layer paths, tf32, and under memcheck).
# epilogues (issue 29: cuBLASLt's fused epilogues: the ABI check against cublasLt.h, their test, then the per-layer
# files with NN_ARENA_CUBLASLT=1: compact == full, primitives == step, act, graphs, train, optimizers, precision).
# table29 (issue 29's rows in one call: nn-arena's S / M / L / K steps in each precision, M fp32 over 10 processes,
# PyTorch graphed, torch.func and the GEMM floor; JSON under $OUT, gathered into $OUT/steps-<gpu>.json).
# ops (issue 48: bench/ops.mjs on CUDA in fp32 / tf32 / bf16 beside bench/ops_torch.py in the same call; JSON under $OUT).
# opsverify (issue 48: what a change to the ops' CUDA path must pass: um, ops (its same-bits test too), embedding, compact, bf16, fp16, models, train; then ops).
# opsncu (issue 48: ncu's per-kernel times of the ops network's step, fp32 and bf16: where it goes).
# userpath (issue 47: bench/userpath.mjs on CUDA, S and M, beside bench/userpath_torch.py in the same call, and the
# wall clock of `npm start`; JSON under $OUT).
# Logs and results go to $OUT (the device tool brings them back).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export NN_ARENA_REQUIRE_GPU=1 NN_ARENA_TEST_ADDON=prebuilt  # the test addon .so is sent built (CONTRIBUTING)
node -e "import('./dist/index.js').then((m) => console.log(JSON.stringify(m.cudaInfo())))"
for part in "$@"; do
  echo "=== $part ==="
  case $part in
    userpath)  # issue 47: the wall clock of the user's calls, nn-arena and PyTorch in the same call
      node bench/userpath.mjs --backend cuda --nets S,M --json "$OUT/userpath-cuda.json" 2>&1 | tee "$OUT/userpath.log"
      python3 bench/userpath_torch.py --nets S,M --json "$OUT/userpath-torch.json" 2>&1 | tee -a "$OUT/userpath.log"
      for i in 1 2 3; do
        s=$(date +%s%N); node dist/cli.js train > "$OUT/start-$i.log" 2>&1; e=$(date +%s%N)
        echo "npm start (node dist/cli.js train): wall $(( (e - s) / 1000000 )) ms; $(grep -iE 'wall|training' "$OUT/start-$i.log" | tail -1)" | tee -a "$OUT/userpath.log"
      done ;;
    ops)  # issue 48: the tabular network of bench/ops.mjs (embedding, norms, dropout, residual) by fit's wall clock, PyTorch in the same call
      node bench/ops.mjs --backend cuda --precisions fp32,tf32,bf16 --json "$OUT/ops-cuda.json" 2>&1 | tee "$OUT/ops.log"
      python3 bench/ops_torch.py --precisions fp32,tf32,bf16 --json "$OUT/ops-torch.json" 2>&1 | tee -a "$OUT/ops.log" ;;
    opsverify)  # issue 48: the files a change to the ops' CUDA path must pass (um alone first: it measures device memory device-wide), then the ops bench with PyTorch
      vitest run test/gpu/um.gpu.test.ts > "$OUT/opsverify-um.log" 2>&1
      vitest run --no-file-parallelism test/gpu/ops.gpu.test.ts test/gpu/embedding.gpu.test.ts test/gpu/compact.gpu.test.ts test/gpu/bf16.gpu.test.ts \
        test/gpu/fp16.gpu.test.ts test/gpu/models.gpu.test.ts test/gpu/train.gpu.test.ts > "$OUT/opsverify.log" 2>&1
      grep -hE "×|FAIL|Tests |AssertionError" "$OUT/opsverify-um.log" "$OUT/opsverify.log" | cut -c1-300 | tail -40
      node bench/ops.mjs --backend cuda --precisions fp32,tf32,bf16 --json "$OUT/ops-cuda.json" > "$OUT/ops.log" 2>&1
      python3 bench/ops_torch.py --precisions fp32,tf32,bf16 --json "$OUT/ops-torch.json" >> "$OUT/ops.log" 2>&1
      grep -E "^ops|graphed" "$OUT/ops.log" ;;
    tests)  # um.gpu.test.ts measures device memory device-wide: alone, first
      vitest run test/gpu/um.gpu.test.ts > "$OUT/tests-um.log" 2>&1
      vitest run --no-file-parallelism test/gpu/arena.gpu.test.ts test/gpu/train.gpu.test.ts test/gpu/primitives.gpu.test.ts > "$OUT/tests.log" 2>&1
      grep -hE "✓|✗|×|FAIL|Tests |cpu-vs-cuda|: budget|AssertionError" "$OUT/tests-um.log" "$OUT/tests.log" | cut -c1-400 | tail -40 ;;
    epilogues)  # issue 29: cuBLASLt epilogues (NN_ARENA_CUBLASLT=1): declarations against the header, then every per-layer file with them on
      g++ -std=c++17 -I/usr/local/cuda/include bench/micro/lt_abi_check.cc -o /tmp/lt_abi 2>&1 | head -20 && /tmp/lt_abi
      vitest run test/gpu/epilogues.gpu.test.ts > "$OUT/epilogues.log" 2>&1
      NN_ARENA_CUBLASLT=1 NN_ARENA_STEP_PATH=layers vitest run --no-file-parallelism test/gpu/compact.gpu.test.ts test/gpu/primitives.gpu.test.ts test/gpu/act.gpu.test.ts \
        test/gpu/graph.gpu.test.ts test/gpu/train.gpu.test.ts test/gpu/optimizers.gpu.test.ts test/gpu/precision.gpu.test.ts > "$OUT/epilogues-layers.log" 2>&1
      grep -hE "×|FAIL|Tests |^epilogues |vs CPU|AssertionError" "$OUT/epilogues.log" "$OUT/epilogues-layers.log" | cut -c1-300 | tail -40 ;;
    compact)  # issue 18 part 4: compact plans bit-identical to full ones on the fused, cuBLAS and tiled paths (and with the TF32 precisions: cuBLAS, tensor-core kernels)
      for path in fused layers tiled; do
        if [ $path = tiled ]; then env="NN_ARENA_STEP_PATH=layers NN_ARENA_GEMM=tiled"; else env="NN_ARENA_STEP_PATH=$path"; fi
        env $env vitest run test/gpu/compact.gpu.test.ts > "$OUT/compact-$path.log" 2>&1
        grep -E "Tests |FAIL|AssertionError|expected|compact .* -> " "$OUT/compact-$path.log" | head -60 | cut -c1-300 | sed "s/^/[$path] /"
      done ;;
    act)  # issues 26 / 28: activations and losses vs PyTorch's fixtures and the CPU, compact, K models, TF32, NCCL, on each CUDA path
      for path in fused layers tiled; do
        if [ $path = tiled ]; then env="NN_ARENA_STEP_PATH=layers NN_ARENA_GEMM=tiled"; else env="NN_ARENA_STEP_PATH=$path"; fi
        env $env vitest run test/gpu/act.gpu.test.ts > "$OUT/act-$path.log" 2>&1
        grep -hE "✓|✗|×|FAIL|Tests |AssertionError|expected|^act " "$OUT/act-$path.log" | cut -c1-300 | sed "s/^/[$path] /" | tail -60
      done ;;
    primitives)  # issue 17: Trainer.forward / backward / update against step, on each CUDA path (auto, tiled products, fused steps)
      vitest run test/gpu/primitives.gpu.test.ts > "$OUT/primitives.log" 2>&1
      NN_ARENA_STEP_PATH=layers NN_ARENA_GEMM=tiled vitest run test/gpu/primitives.gpu.test.ts > "$OUT/primitives-tiled.log" 2>&1
      NN_ARENA_STEP_PATH=fused vitest run test/gpu/primitives.gpu.test.ts > "$OUT/primitives-fused.log" 2>&1
      for f in primitives primitives-tiled primitives-fused; do
        grep -hE "✓|✗|×|FAIL|Tests |primitives-vs-step|AssertionError" "$OUT/$f.log" | cut -c1-300 | sed "s/^/[$f] /" | tail -30
      done ;;
    embed)  # issue 17: JIT kernels (NVRTC found at run time) and examples/custom-kernel (built here with nvcc: carry its build/)
      ls /usr/local/cuda/lib64/libnvrtc* 2>&1 | head -3
      vitest run test/gpu/jit.gpu.test.ts test/gpu/custom-kernel.gpu.test.ts > "$OUT/embed.log" 2>&1
      grep -hE "✓|✗|×|FAIL|Tests |AssertionError|Error" "$OUT/embed.log" | cut -c1-400 | tail -40 ;;
    regions)  # issue 17 part 1: user regions in every memory mode; a JIT kernel and the example's CUDA EMA find them by name (carry examples/custom-kernel/build)
      vitest run --no-file-parallelism test/gpu/regions.gpu.test.ts test/gpu/jit.gpu.test.ts test/gpu/custom-kernel.gpu.test.ts > "$OUT/regions.log" 2>&1
      grep -hE "✓|✗|×|FAIL|Tests |AssertionError|Error" "$OUT/regions.log" | cut -c1-400 | tail -40 ;;
    um) node bench/dist/bench.js --only um 2>&1 | tee "$OUT/um-bench.log" | tail -30; cp bench/results/*.json bench/results/README.md "$OUT/" ;;
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
    torchmemops)  # issue 48: the same for the networks with ops, each stage's allocations traced (what the estimate's model of them is built from)
      PYTHONUNBUFFERED=1 python3 bench/torch_memory.py --only layernorm,rmsnorm,dropout,residual,embedding,ops --optimizers sgd,adam --trace \
        --out "$OUT/torch-memory-ops.json" 2>&1 | tail -30 ;;
    torchmemacts)  # the dense networks with other activations (which tensor each activation saves), for src/report/pytorch.ts
      PYTHONUNBUFFERED=1 python3 bench/torch_memory.py --only act-sigmoid,act-tanh,act-gelu,act-gelu-tanh,act-silu,act-leaky-relu,act-softplus \
        --optimizers sgd,adam --precisions fp32,bf16,fp16 --trace --out "$OUT/torch-memory-acts.json" 2>&1 | tail -45 ;;
    stepslite)  # one profile run of each network and optimizer: step times against bench/results
      for net in S M; do for opt in sgd adam; do node bench/profile-step.mjs $net $opt 1000; done; done
      for opt in sgd adam; do node bench/profile-step.mjs L $opt 50; done ;;
    bench) node bench/dist/bench.js --only steps,memory 2>&1 | tee "$OUT/bench.log" | tail -40; cp bench/results/*.json bench/results/README.md "$OUT/" ;;
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
    opsncu)  # issue 48: per-kernel time of the ops network's step (fp32, bf16), caches and clocks as in a run (not flushed, not locked)
      for prec in fp32 bf16; do
        ncu --cache-control none --clock-control none --print-summary per-kernel --metrics gpu__time_duration.sum \
          node bench/ops.mjs --backend cuda --samples 2560 --epochs 1 --precisions $prec > "$OUT/ncu-ops-$prec.txt" 2>&1
        grep -E "^  [a-zA-Z_].*\(|gpu__time_duration.sum" "$OUT/ncu-ops-$prec.txt" | paste - - | cut -c1-220 | head -40
      done ;;
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
    precision)  # issue 19: accuracy of each precision (cuBLAS, then nn-arena's mma kernels), then timings
      vitest run test/gpu/precision.gpu.test.ts > "$OUT/precision-cublas.log" 2>&1
      NN_ARENA_GEMM=tiled vitest run test/gpu/precision.gpu.test.ts > "$OUT/precision-tiled.log" 2>&1
      grep -hE "✓|✗|×|FAIL|Tests |precision (products|sgd|adam)|AssertionError|Error" "$OUT/precision-cublas.log" "$OUT/precision-tiled.log" | cut -c1-600 | tail -40
      rm -f "$OUT/precision-steps.jsonl"
      for prec in fp32 tf32x3 tf32; do
        for opt in sgd adam; do node bench/profile-step.mjs M $opt 1000 cuda $prec --json "$OUT/precision-steps.jsonl"; done
        node bench/profile-step.mjs L sgd 50 cuda $prec --json "$OUT/precision-steps.jsonl"
      done
      NN_ARENA_GEMM=tiled node bench/profile-step.mjs M sgd 200 cuda tf32x3
      PYTHONUNBUFFERED=1 python3 bench/torch_ref.py --only M,L --optimizers sgd --precisions fp32,tf32 --out "$OUT/precision-torch.json" ;;
    models)  # K models in one arena: the GPU test on each path, then K=1,8,64,256 S SGD steps per path and torch.func
      for path in fused layers; do
        NN_ARENA_STEP_PATH=$path vitest run test/gpu/models.gpu.test.ts > "$OUT/models-$path.log" 2>&1
        grep -E "models \[|Tests |FAIL|AssertionError|expected" "$OUT/models-$path.log" | cut -c1-300 | head -20 | sed "s/^/[$path] /"
      done
      NN_ARENA_STEP_PATH=layers NN_ARENA_GEMM=tiled vitest run test/gpu/models.gpu.test.ts > "$OUT/models-tiled.log" 2>&1
      grep -E "models \[|Tests |FAIL|AssertionError|expected" "$OUT/models-tiled.log" | cut -c1-300 | head -20 | sed "s/^/[tiled] /"
      NN_ARENA_STEP_PATH=fused node bench/models.mjs --no-torch --out "$OUT/models-fused.json"
      NN_ARENA_STEP_PATH=layers node bench/models.mjs --no-torch --out "$OUT/models-layers.json"
      node bench/models.mjs --out "$OUT/models-auto.json" ;;  # auto path, and torch.func in the same call
    graphs)  # issue 52: graphed group steps against direct launches, the same call
      vitest run test/gpu/nccl.gpu.test.ts > "$OUT/nccl-tests.log" 2>&1
      grep -hE "×|FAIL|Tests |AssertionError" "$OUT/nccl-tests.log" | cut -c1-300 | tail -20
      for order in layer-major kind-major; do
        for g in 0 1; do
          NN_ARENA_SYNC_GRAPHS=$g UV_THREADPOOL_SIZE=16 node bench/data-parallel.mjs --nets S,M --precisions tf32,bf16 --order $order --out "$OUT/graphs-$order-$g" 2>&1 |
            grep -E "^(S|M) " | cut -c1-160 | sed "s/^/[$order graphs $g] /"
        done
      done ;;
    nccl)  # issue 20: 2+ GPUs and libnccl.so.2 (NCCL 2.28 in the system library path)
      nvidia-smi topo -m 2>&1 | head -12 > "$OUT/nccl-topo.txt"
      ls /usr/lib/x86_64-linux-gnu/libnccl* /usr/local/lib/libnccl* 2>/dev/null | head -3
      node -e "import('./dist/index.js').then((m) => console.log(JSON.stringify(m.ncclInfo())))"
      vitest run test/gpu/nccl.gpu.test.ts > "$OUT/nccl-tests.log" 2>&1
      grep -hE "✓|✗|×|FAIL|Tests |nccl |skipped|AssertionError|Error" "$OUT/nccl-tests.log" | cut -c1-400 | tail -40
      for n in 1 2; do  # PyTorch DDP first (one GPU, then two), then nn-arena with its steps beside
        python3 -m torch.distributed.run --nproc_per_node $n bench/data_parallel_ddp.py --nets S,M,L --json "$OUT/ddp-x$n.json" 2>&1 | grep -E "torch DDP|Error" | tee -a "$OUT/nccl-bench.log"
      done
      python3 -m torch.distributed.run --nproc_per_node 2 bench/allreduce_floor.py --json "$OUT/allreduce-floor.json" 2>&1 | grep -E "all-reduce|Error" | tee -a "$OUT/nccl-bench.log"
      UV_THREADPOOL_SIZE=16 node bench/data-parallel.mjs --precisions fp32,tf32,bf16 --gradients full,bf16 --ddp "$OUT/ddp-x1.json,$OUT/ddp-x2.json" --floor "$OUT/allreduce-floor.json" --out "$OUT" 2>&1 | tee -a "$OUT/nccl-bench.log" | tail -40 ;;
    optim)
      python3 test/fixtures/gen_optim.py && cp test/fixtures/optim.json "$OUT/optim.json"
      for path in fused layers tiled; do
        if [ $path = tiled ]; then env="NN_ARENA_STEP_PATH=layers NN_ARENA_GEMM=tiled"; else env="NN_ARENA_STEP_PATH=$path"; fi
        env $env vitest run test/gpu/optimizers.gpu.test.ts test/optimizers.test.ts > "$OUT/optim-$path.log" 2>&1
        grep -hE "✓|×|FAIL|Tests |cuda vs|vs fp32|AssertionError" "$OUT/optim-$path.log" | cut -c1-300 | tail -40 | sed "s/^/[$path] /"
      done
      node bench/optimizer-step.mjs --backend cuda --rounds 21 --out "$OUT/optimizer-step-cuda.json" ;;
    prop)  # issue 27: the property test's sequences on CUDA arenas (auto and per-layer paths), then 40 under memcheck
      for path in auto layers; do
        NN_ARENA_PROP_BACKEND=cuda NN_ARENA_PROP_RUNS=300 NN_ARENA_STEP_PATH=$path vitest run test/property.test.ts > "$OUT/prop-$path.log" 2>&1
        grep -E "Tests |AssertionError|→" "$OUT/prop-$path.log" | sed "s/^/[prop $path] /"
      done
      NN_ARENA_PROP_BACKEND=cuda NN_ARENA_PROP_RUNS=300 NN_ARENA_PROP_PRECISION=tf32 vitest run test/property.test.ts > "$OUT/prop-tf32.log" 2>&1
      grep -E "Tests |AssertionError|→" "$OUT/prop-tf32.log" | sed "s/^/[prop tf32] /"
      NN_ARENA_UNDER_SANITIZER=1 NN_ARENA_PROP_BACKEND=cuda NN_ARENA_PROP_RUNS=40 compute-sanitizer --tool memcheck --target-processes all --report-api-errors no \
        vitest run test/property.test.ts > "$OUT/prop-memcheck.log" 2>&1
      grep -E "ERROR SUMMARY|Tests " "$OUT/prop-memcheck.log" | sed "s/^/[prop memcheck] /" ;;
    table29)  # issue 29's rows in one call: nn-arena (ROUNDS rounds, default 2), M fp32 over 10 processes, PyTorch graphed, torch.func, the GEMM floor; gathered into $OUT/steps-<gpu>.json (bench/results keeps the last one)
      for r in $(seq 1 "${ROUNDS:-2}"); do
        for o in sgd adam recipe; do node bench/profile-step.mjs S $o 3000 cuda fp32 --json "$OUT/steps.jsonl" > /dev/null; done
        for pr in tf32 bf16 fp16; do node bench/profile-step.mjs S sgd 3000 cuda $pr --json "$OUT/steps.jsonl" > /dev/null; done
        node bench/profile-step.mjs S adam 3000 cuda bf16 --json "$OUT/steps.jsonl" > /dev/null
        for pr in fp32 tf32 tf32x3 bf16 fp16; do node bench/profile-step.mjs M sgd 1000 cuda $pr --json "$OUT/steps.jsonl" > /dev/null; done
        for pr in tf32 bf16; do node bench/profile-step.mjs M adam 1000 cuda $pr --json "$OUT/steps.jsonl" > /dev/null; done
        for pr in bf16 tf32; do node bench/profile-step.mjs L sgd 50 cuda $pr --json "$OUT/steps.jsonl" > /dev/null; done
        for pr in fp32 bf16; do node bench/models.mjs --models 64,256 --steps 300 --no-torch --precision $pr --out "$OUT/models-$pr-r$r.json" > /dev/null; done
      done
      for i in 1 2 3 4 5 6 7 8 9 10; do node bench/profile-step.mjs M sgd 1000 cuda fp32 --json "$OUT/spread-fp32.jsonl" > /dev/null; done
      PYTHONUNBUFFERED=1 python3 bench/torch_ref.py --only S,M --modes graph --precisions fp32,tf32,bf16,fp16 --out "$OUT/torch-SM.json" | grep "graph:"
      PYTHONUNBUFFERED=1 python3 bench/torch_ref.py --only L --optimizers sgd --modes graph --precisions tf32,bf16 --out "$OUT/torch-L.json" | grep "graph:"
      for pr in fp32 bf16; do PYTHONUNBUFFERED=1 python3 bench/torch_ref.py --models 64,256 --precisions $pr --out "$OUT/torch-models-$pr.json" | tail -2; done
      PYTHONUNBUFFERED=1 python3 bench/gemm_floor.py --only S,M,L --precisions tf32,bf16 --out "$OUT/gemm-floor.json" | tail -6
      node bench/collect-steps.mjs "$OUT" --command "ROUNDS=${ROUNDS:-2} bash scripts/gpu-session.sh table29" ;;
    sync) nvcc -O3 -arch=sm_90 bench/micro/grid_sync.cu -o /tmp/gs && /tmp/gs ;;
    release) nvcc -O3 -arch=sm_90 bench/micro/um_release.cu -o /tmp/ur && /tmp/ur | tee "$OUT/um-release.txt" ;;
    *) echo "unknown part $part" ;;
  esac
done
