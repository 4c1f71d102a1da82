#!/usr/bin/env bash
# gpu-um.sh: one device-machine call for the device-budget work (test/gpu/um.gpu.test.ts alone,
# since it measures device memory device-wide; then bench part 'um'; then the rest of the GPU
# suite). Run from a copy of the tree that holds build/Release/nn_arena.node (CUDA) and dist/,
# with .gpu beside it (../shared/gpu/pack.sh). Logs and results go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -e .gpu ] || ln -s ../.gpu .gpu
OUT=${OUT:-/tmp/gpu-um}
mkdir -p "$OUT/results"
export NN_ARENA_REQUIRE_GPU=1
timeout 240 bash .gpu/run.sh vitest run test/gpu/um.gpu.test.ts 2>&1 | tee "$OUT/um-test.log"
cp bench/results/*.json "$OUT/results/"
timeout 200 bash .gpu/run.sh node dist/bench.js --only um --out "$OUT/results" 2>&1 | tee "$OUT/um-bench.log"
[ "${SUITE:-1}" = 1 ] && timeout 110 bash .gpu/run.sh vitest run test/gpu/arena.gpu.test.ts test/gpu/train.gpu.test.ts 2>&1 | tail -40 > "$OUT/gpu-suite.log"
exit 0
