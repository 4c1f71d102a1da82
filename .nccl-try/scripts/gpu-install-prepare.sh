#!/usr/bin/env bash
# gpu-install-prepare.sh (development machine): everything scripts/gpu-install-check.sh needs on
# the GPU machine (issue 15):
#   prebuilds/linux-x64/   the CPU and CUDA prebuilds (npm run prebuild; skipped when both exist),
#                          sent as .gpu-check/prebuilds.tar.xz (33 MB raw, 3 MB xz: the carry limit
#                          is 64 MiB) and unpacked there by gpu-install-check.sh;
#   .gpu-check/sm80/       a build for sm_80 only, SASS without PTX (a binary with no kernels for
#                          an H100), loaded there through NN_ARENA_PREBUILD;
#   dist/, .gpu/           tsup; ../shared/gpu/pack.sh.
# build/ is removed (a local build would win over the prebuilds). Then run on the GPU machine,
# carrying .gpu, dist and .gpu-check:
#   bash .gpu/run.sh bash scripts/gpu-install-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f prebuilds/linux-x64/node.napi.glibc.node ] || [ ! -f prebuilds/linux-x64/cuda.napi.glibc.node ]; then
  npm run prebuild
fi
NN_ARENA_CUDA_ARCH=80 NN_ARENA_CUDA_PTX=0 npm run build:native
rm -rf .gpu-check && mkdir -p .gpu-check/sm80/build/Release
cp build/Release/nn_arena.node .gpu-check/sm80/build/Release/
echo '{ "name": "nn-arena" }' > .gpu-check/sm80/package.json
tar -cf - prebuilds | xz -T0 -6 > .gpu-check/prebuilds.tar.xz
rm -rf build
npx tsup
bash ../shared/gpu/pack.sh
du -sh .gpu dist .gpu-check; du -sch .gpu dist .gpu-check | tail -1
