// prebuild.cjs (`npm run prebuild [-- cpu|cuda]`): the binaries shipped in the npm package, in
// prebuilds/<platform>-<arch>/ where node-gyp-build finds them (src/loader.ts):
//   node.napi.glibc.node  CPU only (NN_ARENA_CUDA=0);
//   cuda.napi.glibc.node  CUDA, the runtime linked statically, SASS for every architecture nvcc
//                         lists from sm_75 to sm_120 plus PTX of the newest (NN_ARENA_CUDA_ARCH=all
//                         unless set).
// Each is built by node-gyp in build/, copied and stripped; build/ is removed at the end so that
// the prebuilds are what loads here (a local build/Release always wins over them).
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync, execFileSync } = require('node:child_process');
const { locate, archPlan } = require('./find-nvcc.cjs');

const root = path.resolve(__dirname, '..');
const dir = path.join(root, 'prebuilds', `${process.platform}-${process.arch}`);
const names = { cpu: 'node.napi.glibc.node', cuda: 'cuda.napi.glibc.node' };
const wanted = process.argv.slice(2).filter((a) => a in names);
const flavors = wanted.length ? wanted : ['cpu', 'cuda'];
const say = (s) => console.error(`prebuild: ${s}`);

fs.mkdirSync(dir, { recursive: true });
for (const flavor of flavors) {
  const env = { ...process.env, NN_ARENA_BUILD_FROM_SOURCE: '1' };
  if (flavor === 'cpu') env.NN_ARENA_CUDA = '0';
  else {
    delete env.NN_ARENA_CUDA;
    const found = locate();
    if (!found) { say('nvcc not found: the CUDA prebuild needs the CUDA toolkit (CUDA_PATH or /usr/local/cuda)'); process.exit(1); }
    env.NN_ARENA_CUDA_ARCH = process.env.NN_ARENA_CUDA_ARCH || 'all';
  }
  const started = Date.now();
  const r = spawnSync(process.execPath, [path.join(__dirname, 'install.cjs')], { cwd: root, env, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
  const out = path.join(dir, names[flavor]);
  fs.copyFileSync(path.join(root, 'build', 'Release', 'nn_arena.node'), out);
  try { execFileSync('strip', ['--strip-unneeded', out]); } catch { say('strip not found: left unstripped'); }
  const info = JSON.parse(execFileSync(process.execPath, ['-e', 'const a = require(process.argv[1]).cudaInfo(); console.log(JSON.stringify(a))', out], { encoding: 'utf8' }));
  if (info.built !== (flavor === 'cuda')) { say(`${out}: expected a ${flavor} binary`); process.exit(1); }
  say(`${path.relative(root, out)}: ${flavor}${info.archs ? ` (${info.archs})` : ''}, ${(fs.statSync(out).size / 1048576).toFixed(1)} MiB, built in ${Math.round((Date.now() - started) / 1000)} s`);
}
fs.rmSync(path.join(root, 'build'), { recursive: true, force: true });
say('build/ removed: the prebuilds load now (`npm run build:native` makes a local build, which wins over them)');
