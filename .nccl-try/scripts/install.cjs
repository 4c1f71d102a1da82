// install.cjs: npm's install step for nn-arena.
// 1. The package ships prebuilt binaries (prebuilds/<platform>-<arch>/, made by `npm run prebuild`):
//    when one loads here, nothing is compiled and the install takes seconds.
// 2. Otherwise (a git clone, another platform, or `npm install --build-from-source`) it builds
//    from source with node-gyp, after ONE line saying which variant and why: CUDA when nvcc is
//    found (scripts/find-nvcc.cjs), for the GPUs visible here or NN_ARENA_CUDA_ARCH, else CPU-only.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const root = path.resolve(__dirname, '..');
const say = (s) => process.stderr.write(`nn-arena: ${s}\n`);
const truthy = (v) => /^(1|true|yes)$/i.test(v || '');

function prebuilt() {
  process.env.PREBUILDS_ONLY = '1';  // node-gyp-build: look at prebuilds/ only
  let file;
  try { file = require('node-gyp-build').resolve(root); } catch { return null; }
  const r = spawnSync(process.execPath, ['-e', 'require(process.argv[1])', file], { stdio: 'ignore' });
  delete process.env.PREBUILDS_ONLY;
  return r.status === 0 ? file : null;
}

function nodeGyp() {
  const candidates = [process.env.npm_config_node_gyp];
  try { candidates.push(require.resolve('node-gyp/bin/node-gyp.js', { paths: [root] })); } catch { /* not installed */ }
  const js = candidates.find((p) => p && fs.existsSync(p));
  return js ? [process.execPath, js] : ['node-gyp'];
}

function main() {
  const forced = truthy(process.env.npm_config_build_from_source) || truthy(process.env.NN_ARENA_BUILD_FROM_SOURCE);
  if (!forced) {
    const file = prebuilt();
    if (file) {
      const dir = path.dirname(file);
      const cuda = fs.readdirSync(dir).some((f) => f.startsWith('cuda.'));
      say(`using the prebuilt binaries for ${path.basename(dir)} (CPU${cuda ? '; CUDA when an NVIDIA driver is present' : ''}); nothing to compile`);
      return 0;
    }
  }
  const { locate, archPlan } = require('./find-nvcc.cjs');
  const env = { ...process.env };
  const found = locate();
  let what;
  if (found) {
    const plan = archPlan(found.nvcc);
    env.NN_ARENA_CUDA_ARCH = plan.archs.join(';');
    const ptx = process.env.NN_ARENA_CUDA_PTX === '0' ? ', no PTX' : '';
    what = `building from source with CUDA for sm_${plan.archs.join(', sm_')}${ptx} (${plan.why}); NN_ARENA_CUDA_ARCH overrides, NN_ARENA_CUDA=0 builds CPU-only`;
  } else if (process.env.NN_ARENA_CUDA === '0') {
    what = 'NN_ARENA_CUDA=0: building from source, CPU-only';
  } else {
    what = 'nvcc not found (CUDA_PATH, CUDA_HOME, PATH, /usr/local/cuda): building from source, CPU-only; see the README, Install';
  }
  say(`${what}${forced ? ' (build from source requested)' : ''}`);
  const started = Date.now();
  const [cmd, ...args] = nodeGyp();
  const r = spawnSync(cmd, [...args, 'rebuild', '-j', 'max'], { cwd: root, env, stdio: 'inherit' });
  if (r.error) { say(`could not run node-gyp: ${r.error.message}`); return 1; }
  if (r.status !== 0) return r.status ?? 1;
  say(`built in ${Math.round((Date.now() - started) / 1000)} s`);
  return 0;
}

process.exitCode = main();
