#!/usr/bin/env bash
# ci-node.sh [MAJOR...]: the test suite on other Node versions (default 22 24 26; .ci/run runs
# it on the machine's own Node 20 first), each the npm registry's node-<platform>-<arch>@MAJOR
# package, installed with npm into $NN_ARENA_CI_NODE_DIR (default /tmp/nn-arena-ci-node, kept as
# a cache): no other download. The addon built once (N-API, under Node 20) is the one loaded on
# every version: scripts/install.cjs is not run again, so no per-ABI build.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${NN_ARENA_CI_NODE_DIR:-/tmp/nn-arena-ci-node}"
pkg="node-$(node -p process.platform)-$(node -p process.arch)"
for v in "${@:-22 24 26}"; do
  for major in $v; do
    d="$dir/$major"
    if [ ! -x "$d/node_modules/$pkg/bin/node" ]; then
      mkdir -p "$d"
      npm install --prefix "$d" --no-save --no-package-lock --no-audit --no-fund --ignore-scripts "$pkg@$major" >/dev/null
    fi
    bin="$d/node_modules/$pkg/bin"
    echo "ci-node: $pkg@$major: Node $("$bin/node" --version), N-API $("$bin/node" -p process.versions.napi), ABI $("$bin/node" -p process.versions.modules)"
    start=$(date +%s)
    PATH="$bin:$PATH" node node_modules/vitest/vitest.mjs run
    echo "ci-node: Node $major: the suite passed in $(( $(date +%s) - start )) s"
  done
done
