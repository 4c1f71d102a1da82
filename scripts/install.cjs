// install.cjs: npm's install step for nn-arena (also `npm run build:native`, `npm rebuild`).
// 1. A build from source already in build/Release that matches (scripts/build-stamp.cjs: same
//    sources, options and Node ABI) and loads is kept: nothing is compiled (an `npx nn-arena` in
//    a clone runs this script again).
// 2. The package's prebuilt binaries (prebuilds/<platform>-<arch>/, made by `npm pack` through
//    prepack): when one loads here, nothing is compiled and the install takes seconds.
// 3. Otherwise (a clone, another platform, sources changed, `--build-from-source` or
//    NN_ARENA_BUILD_FROM_SOURCE=1) it builds from source with node-gyp (scripts/node-gyp.cjs:
//    offline, against this Node's own headers), after ONE line saying which variant and why:
//    CUDA when nvcc is found (scripts/find-nvcc.cjs), else CPU-only. Its output goes to
//    build/nn-arena-build.log, one progress line per compiled unit to stderr; npm hides a
//    dependency's output, so the first and last lines also go to the terminal (/dev/tty).
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const stamp = require('./build-stamp.cjs');
const { missingTools, runGyp, tail, fmt } = require('./build-steps.cjs');
const { nodeGyp, nodedirArgs } = require('./node-gyp.cjs');
const { sources } = require('./sources.cjs');

const root = path.resolve(__dirname, '..');
const built = path.join(root, 'build', 'Release', 'nn_arena.node');
const log = path.join(root, 'build', 'nn-arena-build.log');
const rel = (p) => path.relative(process.cwd(), p) || '.';
const say = (s) => process.stderr.write(`nn-arena: ${s}\n`);
const truthy = (v) => /^(1|true|yes)$/i.test(v || '');

// Lines a user must see even where npm hides the script's output (a dependency's install).
let tty = null;
if (!process.stderr.isTTY && process.env.npm_lifecycle_event) {
  try {
    tty = fs.openSync('/dev/tty', 'w');
  } catch {
    tty = null;
  }
}
const shout = (s) => {
  say(s);
  if (tty !== null)
    try {
      fs.writeSync(tty, `nn-arena: ${s}\n`);
    } catch {
      /* gone */
    }
};

// A cross build (npm_config_arch, node-gyp's --arch: scripts/prebuild.cjs arm64) is CPU-only and
// cannot be loaded here.
const target = process.env.npm_config_arch || process.arch;
const cross = target !== process.arch;
// A sanitizer build (scripts/test-asan.sh) loads only with the sanitizer runtimes preloaded:
// NN_ARENA_CHECK_PRELOAD names them for this check alone (the compilers run without them).
const checkEnv = process.env.NN_ARENA_CHECK_PRELOAD ? { ...process.env, LD_PRELOAD: process.env.NN_ARENA_CHECK_PRELOAD } : process.env;
const loads = (file) =>
  cross || spawnSync(process.execPath, ['-e', 'require(process.argv[1]).cudaInfo()', file], { stdio: 'ignore', env: checkEnv }).status === 0;

function prebuilt() {
  process.env.PREBUILDS_ONLY = '1'; // node-gyp-build: look at prebuilds/ only
  let file = null;
  try {
    file = require('node-gyp-build').resolve(root);
  } catch {
    /* none for this platform */
  }
  delete process.env.PREBUILDS_ONLY;
  return file && loads(file) ? file : null;
}

/** What a build from source here makes: { cuda, archs, line }. */
function plan() {
  const { locate, archPlan } = require('./find-nvcc.cjs');
  if (cross) return { cuda: false, archs: [], line: `CPU-only, cross-compiled for ${process.platform}-${target} (CXX=${process.env.CXX || 'c++'})` };
  const found = locate();
  if (found) {
    const p = archPlan(found.nvcc);
    const ptx = process.env.NN_ARENA_CUDA_PTX === '0' ? ', no PTX' : '';
    return {
      cuda: true,
      archs: p.archs,
      line: `CUDA for sm_${p.archs.join(', sm_')}${ptx} (${p.why}); NN_ARENA_CUDA_ARCH overrides, NN_ARENA_CUDA=0 builds CPU-only`,
    };
  }
  return {
    cuda: false,
    archs: [],
    line:
      process.env.NN_ARENA_CUDA === '0'
        ? 'CPU-only (NN_ARENA_CUDA=0)'
        : 'CPU-only: nvcc not found (CUDA_PATH, CUDA_HOME, PATH, /usr/local/cuda); see the README, Install',
  };
}

async function main() {
  // `npm rebuild nn-arena` asks for a build (npm_command=rebuild), as --build-from-source does.
  const forced = truthy(process.env.npm_config_build_from_source) || truthy(process.env.NN_ARENA_BUILD_FROM_SOURCE) || process.env.npm_command === 'rebuild';
  let what;
  try {
    what = plan();
  } catch (e) {
    say(e.message);
    return 1;
  }
  const now = stamp.current(what);
  const changed = stamp.differences(stamp.read(), now);
  const hasBuild = fs.existsSync(built);
  if (!forced && hasBuild && !changed.length && loads(built)) {
    say(
      `keeping ${rel(built)}: built from these sources with the same options (${what.cuda ? `CUDA sm_${what.archs.join(', sm_')}` : 'CPU-only'}) under this Node ABI (${now.node.abi}); nothing to compile (npm run build:native rebuilds)`,
    );
    return 0;
  }
  if (!forced && !hasBuild) {
    const file = prebuilt();
    if (file) {
      const dir = path.dirname(file);
      const cuda = fs.readdirSync(dir).some((f) => f.startsWith('cuda.'));
      say(`using the prebuilt binaries for ${path.basename(dir)} (CPU${cuda ? '; CUDA when an NVIDIA driver is present' : ''}); nothing to compile`);
      return 0;
    }
  }
  const missing = missingTools();
  if (missing.length) {
    shout(
      `cannot build from source: ${missing.map((m) => `no ${m.tool} on PATH (looked for ${m.looked})`).join('; ')}. ` +
        `${forced ? 'A build from source was requested' : `No prebuilt binary for ${process.platform}-${process.arch} loads here either`}. Install them (Debian/Ubuntu: apt-get install g++ make python3; macOS: xcode-select --install) ` +
        'or install the npm package on a platform it ships binaries for (see the README, Install)',
    );
    return 1;
  }
  const why = forced
    ? process.env.npm_command === 'rebuild'
      ? 'npm rebuild'
      : 'build from source requested'
    : hasBuild
      ? `the build in build/ differs: ${changed.join(', ')}`
      : 'no prebuilt binary';
  // Same Node ABI and options: node-gyp's make rebuilds only what changed; else from clean.
  const incremental = hasBuild && !forced && !changed.includes('no stamp') && !changed.includes('node') && !changed.includes('options');
  const [cmd, ...pre] = nodeGyp(root);
  const env = { ...process.env, NN_ARENA_CUDA_ARCH: what.archs.join(';') };
  if (!what.cuda) delete env.NN_ARENA_CUDA_ARCH;
  if (!incremental) spawnSync(cmd, [...pre, 'clean'], { cwd: root, env, stdio: 'ignore' });
  fs.mkdirSync(path.dirname(log), { recursive: true });
  fs.writeFileSync(log, '');
  fs.rmSync(stamp.STAMP, { force: true }); // an interrupted build must not look finished
  shout(`building from source (${why}${incremental ? ', incremental' : ''}): ${what.line}; log: ${rel(log)}`);
  const units = sources('common').length + sources(what.cuda ? 'cuda' : 'absent').length;
  const started = Date.now();
  const status = await runGyp(cmd, [...pre, 'configure', 'build', 'nn_arena', '-j', 'max', ...nodedirArgs()], { root, env, log, units, say });
  if (status !== 0 || !loads(built)) {
    for (const l of tail(log)) say(`  ${l}`);
    shout(`the build from source failed${status === 0 ? ' (the binary does not load)' : ''}: the whole output is in ${path.resolve(log)}`);
    return status || 1;
  }
  stamp.write(now);
  shout(`built ${rel(built)} in ${fmt(Date.now() - started)} (log: ${rel(log)})`);
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    say(`install failed: ${e.message}`);
    process.exitCode = 1;
  },
);
