#!/usr/bin/env bash
# ci-pack.sh: what a user of the npm package gets. In a copy of the working tree: npm pack
# (whose prepack makes the prebuilds: NN_ARENA_PACK=cpu, or cpu,cuda), then an install of the tarball into an empty
# project with no compiler, make, Python or nvcc on PATH (only node, npm and npx), where
# `npx nn-arena doctor --json` must report the prebuilt binary. Prints the tarball's size and the
# install's time. Usage: bash scripts/ci-pack.sh [cpu|cuda|all] (default cpu). Needs node_modules.
set -euo pipefail
cd "$(dirname "$0")/.."
flavors="${1:-cpu}"; [ "$flavors" = all ] && flavors="cpu cuda"
tmp="$(mktemp -d /tmp/nn-arena-pack.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src" "$tmp/out" "$tmp/app" "$tmp/bin"
tar -C . --exclude=./node_modules --exclude=./build --exclude=./prebuilds --exclude=./.git --exclude=./.gpu -cf - . | tar -C "$tmp/src" -xf -
ln -s "$PWD/node_modules" "$tmp/src/node_modules"
start=$(date +%s)
(cd "$tmp/src" && NN_ARENA_PACK="${flavors// /,}" npm pack --silent --pack-destination "$tmp/out" >/dev/null)
tarball="$(ls "$tmp"/out/*.tgz)"
echo "ci-pack: $(basename "$tarball"): $(du -k "$tarball" | cut -f1) KiB ($flavors), npm pack took $(( $(date +%s) - start )) s"
tar -tzf "$tarball" | grep 'prebuilds/' | sed 's/^/ci-pack:   /'

# Only node, npm and npx on PATH,
# and sh, which npm runs scripts with.
for t in node npm npx sh; do ln -s "$(readlink -f "$(command -v $t)")" "$tmp/bin/$t"; done
echo '{ "name": "app", "private": true, "type": "module" }' > "$tmp/app/package.json"
run() { (cd "$tmp/app" && env -i HOME="$HOME" PATH="$tmp/bin" "$@"); }
if run sh -c 'command -v cc || command -v gcc || command -v g++ || command -v make || command -v python3 || command -v nvcc' >/dev/null 2>&1; then
  echo "ci-pack: a compiler is still on PATH" >&2; exit 1
fi
start=$(date +%s%N)
run npm install --no-audit --no-fund --foreground-scripts "$tarball" 2>&1 | sed 's/^/ci-pack: npm: /'
echo "ci-pack: install of the tarball without a compiler: $(( ($(date +%s%N) - start) / 1000000 )) ms"
[ ! -e "$tmp/app/node_modules/nn-arena/build" ] || { echo "ci-pack: the install built from source" >&2; exit 1; }
run npx nn-arena doctor --json > "$tmp/doctor.json"
run npx nn-arena doctor | sed 's/^/ci-pack: doctor: /'
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  if (!r.binary.loaded || r.binary.variant !== "prebuilt") { console.error("ci-pack: doctor does not report the prebuilt binary:", JSON.stringify(r.binary)); process.exit(1); }
  console.log(`ci-pack: ok: doctor reports the prebuilt ${r.binary.flavor} binary ${r.binary.path}`);
' "$tmp/doctor.json"
# The quick start, as a user runs it from the installed package.
cp examples/quickstart.mjs "$tmp/app/" && run node quickstart.mjs | sed 's/^/ci-pack: quickstart: /'
