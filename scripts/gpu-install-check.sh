#!/usr/bin/env bash
# gpu-install-check.sh (GPU machine, through .gpu/run.sh; prepared by gpu-install-prepare.sh):
#   1. the prebuilt CUDA binary: doctor reports it, with kernels for this GPU, and 'auto' picks CUDA;
#   2. the GPU suite on it, one file at a time (what `npm run test:gpu` runs);
#   3. a build for sm_80 only (no PTX) on this sm_90 GPU: doctor says the binary has no kernels for
#      it, backend 'auto' falls back to the CPU and trains, cudaInfo().why names both
#      architectures, backend 'cuda' gives ArenaError NO_KERNEL_IMAGE, and the CLI prints it as
#      `nn-arena: NO_KERNEL_IMAGE: ...`.
# Parts: prebuilt suite nokernel (default: all three). Logs and JSON go to $OUT when set.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp}"; parts="${*:-prebuilt suite nokernel}"; fail=0
[ -d build ] && { echo "build/ is here: it would win over the prebuilds; run without it" >&2; exit 1; }
[ -d prebuilds ] || xz -dc .gpu-check/prebuilds.tar.xz | tar -xf -
check() { local label=$1; shift; if "$@"; then echo "PASS: $label"; else echo "FAIL: $label"; fail=1; fi; }

for part in $parts; do case "$part" in
prebuilt)
  node dist/cli.js doctor | tee "$out/doctor-prebuilt.txt"
  node dist/cli.js doctor --json > "$out/doctor-prebuilt.json"
  check 'doctor: the prebuilt CUDA binary, kernels for this GPU, auto picks cuda' node -e '
    const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const ok = r.binary.variant === "prebuilt" && r.binary.flavor === "cuda" && r.gpu && r.gpu.covered === true && r.auto.backend === "cuda";
    if (!ok) { console.error(JSON.stringify(r, null, 2)); process.exit(1); }' "$out/doctor-prebuilt.json"
  ;;
suite)
  NN_ARENA_REQUIRE_GPU=1 vitest run --no-file-parallelism test/gpu 2>&1 | tee "$out/gpu-suite-prebuilt.txt"
  check "GPU suite on the prebuilt CUDA binary" test "${PIPESTATUS[0]}" = 0
  ;;
nokernel)
  export NN_ARENA_PREBUILD="$PWD/.gpu-check/sm80"
  node dist/cli.js doctor | tee "$out/doctor-sm80.txt"
  node dist/cli.js doctor --json > "$out/doctor-sm80.json"
  check "sm_80-only binary: doctor, cudaInfo().why, auto -> cpu (trains), cuda -> NO_KERNEL_IMAGE" node --input-type=module -e '
    import { readFileSync } from "node:fs";
    import { Arena, ArenaError, cudaInfo, planLayout, Trainer } from "./dist/index.js";
    import { loadMnist } from "./dist/tools.js";
    const r = JSON.parse(readFileSync(process.argv[1], "utf8"));
    const fail = (m) => { console.error("nokernel:", m); process.exit(1); };
    if (r.binary.flavor !== "cuda" || r.binary.archs.join(" ") !== "sm_80") fail("not the sm_80-only binary: " + JSON.stringify(r.binary));
    if (!r.gpu || r.gpu.covered !== false || r.auto.backend !== "cpu") fail("doctor: " + JSON.stringify({ gpu: r.gpu, auto: r.auto }));
    const info = cudaInfo();
    console.log("cudaInfo:", JSON.stringify(info));
    if (!info.noKernelImage || info.devices !== 0 || !/sm_90/.test(info.why) || !/sm_80/.test(info.why)) fail("cudaInfo().why should name sm_90 and sm_80");
    const plan = planLayout({ layers: [784, 32, 10], batch: 50, samples: 8000 });
    const a = Arena.create(plan);
    if (a.backend !== "cpu") fail("auto picked " + a.backend);
    const t = new Trainer(a, { lr: 0.05 }); t.init(1);
    const fit = await t.fit(loadMnist().train, { epochs: 1 });
    console.log("auto -> cpu, trained: loss", fit.loss.toFixed(4), "path", fit.path);
    a.dispose();
    try { Arena.create(plan, { backend: "cuda" }); fail("backend cuda did not throw"); }
    catch (e) {
      if (!(e instanceof ArenaError) || e.code !== "NO_KERNEL_IMAGE") fail("expected NO_KERNEL_IMAGE, got " + e.code + ": " + e.message);
      console.log("cuda ->", e.code + ":", e.message);
    }' "$out/doctor-sm80.json"
  node dist/cli.js train --backend cuda --epochs 1 > "$out/cli-sm80.txt" 2>&1; rc=$?
  cat "$out/cli-sm80.txt"
  check "CLI train --backend cuda exits 1" test "$rc" = 1
  check "CLI prints nn-arena: NO_KERNEL_IMAGE: ..." grep -q '^nn-arena: NO_KERNEL_IMAGE: ' "$out/cli-sm80.txt"
  unset NN_ARENA_PREBUILD
  ;;
*) echo "unknown part $part" >&2; exit 2 ;;
esac; done
[ "$fail" = 0 ] && echo "gpu-install-check: all passed" || echo "gpu-install-check: FAILED"
exit "$fail"
