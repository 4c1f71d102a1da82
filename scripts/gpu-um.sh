#!/usr/bin/env bash
# gpu-um.sh: one device-machine call for the device-budget work: test/gpu/um.gpu.test.ts alone
# (it measures device memory device-wide), then bench part 'um', then the same tests with the
# read-duplication variant of the managed scheduler (NN_ARENA_UM_READ_DUP=1), then (SUITE=1)
# the rest of the GPU suite. Run from a copy of the tree that holds build/Release/nn_arena.node
# (built with CUDA) and dist/, with .gpu beside it (../shared/gpu/pack.sh). Logs and results
# go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -e .gpu ] || ln -s ../.gpu .gpu
OUT=${OUT:-/tmp/gpu-um}
mkdir -p "$OUT/results"
export NN_ARENA_REQUIRE_GPU=1
timeout 200 bash .gpu/run.sh vitest run test/gpu/um.gpu.test.ts 2>&1 | tee "$OUT/um-test.log"
cp bench/results/nvidia-*.json "$OUT/results/" 2>/dev/null
timeout 200 bash .gpu/run.sh node bench/dist/bench.js --only um --out "$OUT/results" 2>&1 | tee "$OUT/um-bench.log"
NN_ARENA_UM_READ_DUP=1 timeout 120 bash .gpu/run.sh vitest run test/gpu/um.gpu.test.ts > "$OUT/dup-test.log" 2>&1
[ "${SUITE:-0}" = 1 ] && timeout 110 bash .gpu/run.sh vitest run test/gpu/arena.gpu.test.ts test/gpu/train.gpu.test.ts 2>&1 | tail -40 > "$OUT/gpu-suite.log"
exit 0
