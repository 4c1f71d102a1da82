// prebuild.cjs (`npm run prebuild [-- cpu|cuda]`; `npm pack` runs it through prepack, for the
// flavors in NN_ARENA_PACK: `cpu` (default) or `cpu,cuda`): the binaries shipped in the npm package, in
// prebuilds/<platform>-<arch>/ where node-gyp-build finds them (src/loader.ts):
//   node.napi.glibc.node  CPU only (NN_ARENA_CUDA=0);
//   cuda.napi.glibc.node  CUDA, the runtime linked statically, SASS for every architecture nvcc
//                         lists from sm_75 to sm_120 plus PTX of the newest (NN_ARENA_CUDA_ARCH=all
//                         unless set).
// Each is built by node-gyp in build/, copied and stripped, with its build stamp beside it
// (<name>.build.json: a prebuild whose stamp matches the sources is kept, so a second pack
// compiles nothing). A build/ that was here before is set aside and put back at the end (a
// local build/Release always wins over the prebuilds: remove it to load them).
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync, execFileSync } = require('node:child_process');
const { locate, archPlan } = require('./find-nvcc.cjs');

const root = path.resolve(__dirname, '..');
const dir = path.join(root, 'prebuilds', `${process.platform}-${process.arch}`);
const names = { cpu: 'node.napi.glibc.node', cuda: 'cuda.napi.glibc.node' };
const fromPack = process.env.npm_lifecycle_event === 'prepack';
const args = fromPack ? (process.env.NN_ARENA_PACK || 'cpu').split(/[,; ]+/) : process.argv.slice(2);
for (const a of args) if (a && !(a in names)) { console.error(`prebuild: unknown flavor '${a}' (cpu or cuda)`); process.exit(1); }
const wanted = args.filter((a) => a in names);
const flavors = wanted.length ? wanted : ['cpu', 'cuda'];
const stamp = require('./build-stamp.cjs');
const say = (s) => console.error(`prebuild: ${s}`);

fs.mkdirSync(dir, { recursive: true });
const build = path.join(root, 'build');
const kept = path.join(root, `build.kept-by-prebuild`);
if (fs.existsSync(build)) { fs.rmSync(kept, { recursive: true, force: true }); fs.renameSync(build, kept); }
const restore = () => {
  fs.rmSync(build, { recursive: true, force: true });
  if (fs.existsSync(kept)) { fs.renameSync(kept, build); say('build/ put back (a local build wins over the prebuilds)'); }
};
process.on('exit', restore);
for (const flavor of flavors) {
  const env = { ...process.env, NN_ARENA_BUILD_FROM_SOURCE: '1' };
  if (flavor === 'cpu') env.NN_ARENA_CUDA = '0';
  else {
    delete env.NN_ARENA_CUDA;
    const found = locate();
    if (!found) { say('nvcc not found: the CUDA prebuild needs the CUDA toolkit (CUDA_PATH or /usr/local/cuda)'); process.exit(1); }
    env.NN_ARENA_CUDA_ARCH = process.env.NN_ARENA_CUDA_ARCH || 'all';
  }
  const out = path.join(dir, names[flavor]);
  const stampFile = out.replace(/\.node$/, '.build.json');
  const before = (() => { try { return JSON.parse(fs.readFileSync(stampFile, 'utf8')); } catch { return null; } })();
  const saved = process.env.NN_ARENA_CUDA_ARCH;
  process.env.NN_ARENA_CUDA_ARCH = env.NN_ARENA_CUDA_ARCH || '';
  const want = flavor === 'cuda' ? archPlan(locate().nvcc).archs : [];
  if (saved === undefined) delete process.env.NN_ARENA_CUDA_ARCH; else process.env.NN_ARENA_CUDA_ARCH = saved;
  const now = stamp.current({ cuda: flavor === 'cuda', archs: want });
  if (before && fs.existsSync(out) && before.sources === now.sources && JSON.stringify(before.options) === JSON.stringify(now.options) &&
      before.node.platform === process.platform && before.node.arch === process.arch) {
    say(`${path.relative(root, out)}: ${flavor}, kept (built from these sources ${before.builtAt})`);
    continue;
  }
  const started = Date.now();
  const r = spawnSync(process.execPath, [path.join(__dirname, 'install.cjs')], { cwd: root, env, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
  fs.copyFileSync(path.join(root, 'build', 'Release', 'nn_arena.node'), out);
  fs.copyFileSync(stamp.STAMP, stampFile);
  try { execFileSync('strip', ['--strip-unneeded', out]); } catch { say('strip not found: left unstripped'); }
  const info = JSON.parse(execFileSync(process.execPath, ['-e', 'const a = require(process.argv[1]).cudaInfo(); console.log(JSON.stringify(a))', out], { encoding: 'utf8' }));
  if (info.built !== (flavor === 'cuda')) { say(`${out}: expected a ${flavor} binary`); process.exit(1); }
  say(`${path.relative(root, out)}: ${flavor}${info.archs ? ` (${info.archs})` : ''}, ${(fs.statSync(out).size / 1048576).toFixed(1)} MiB, built in ${Math.round((Date.now() - started) / 1000)} s`);
}
