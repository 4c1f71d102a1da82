// prebuild.cjs (`npm run prebuild [-- cpu|cuda|arm64 ...]`; `npm pack` runs it through prepack,
// for the flavors in NN_ARENA_PACK: `cpu` (default), or e.g. `cpu,arm64,cuda`): the binaries
// shipped in the npm package, in prebuilds/<platform>-<arch>/ where node-gyp-build finds them
// (src/native/loader.ts):
//   cpu    linux-x64  node.napi.glibc.node  CPU only (NN_ARENA_CUDA=0);
//   cuda   linux-x64  cuda.napi.glibc.node  CUDA, the runtime linked statically, SASS for every
//                     architecture nvcc lists from sm_75 to sm_120 plus PTX of the newest
//                     (NN_ARENA_CUDA_ARCH=all unless set);
//   arm64  linux-arm64 node.napi.glibc.node  CPU only, cross-compiled (aarch64-linux-gnu-g++, or
//                     CC/CXX; N-API headers are the same for every architecture). Checked by
//                     loading it under qemu-user when NN_ARENA_ARM64_NODE names an arm64 node.
// Each is built by node-gyp in build/ (scripts/install.cjs), copied and stripped, with its build
// stamp beside it (<name>.build.json: a prebuild whose stamp still matches is kept, so a second
// pack compiles nothing). A build/ that was here before is set aside and put back at the end (a
// local build/Release always wins over the prebuilds: remove it to load them).
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync, execFileSync } = require('node:child_process');
const { locate, archPlan } = require('./find-nvcc.cjs');
const stamp = require('./build-stamp.cjs');

const root = path.resolve(__dirname, '..');
const FLAVORS = {
  cpu: { arch: process.arch, name: 'node.napi.glibc.node', cuda: false },
  cuda: { arch: process.arch, name: 'cuda.napi.glibc.node', cuda: true },
  arm64: { arch: 'arm64', name: 'node.napi.glibc.node', cuda: false, cross: 'aarch64-linux-gnu' },
};
const fromPack = process.env.npm_lifecycle_event === 'prepack';
const args = (fromPack ? process.env.NN_ARENA_PACK || 'cpu' : process.argv.slice(2).join(',')).split(/[,; ]+/).filter(Boolean);
for (const a of args)
  if (!(a in FLAVORS)) {
    console.error(`prebuild: unknown flavor '${a}' (cpu, cuda or arm64)`);
    process.exit(1);
  }
const flavors = args.length ? args : ['cpu', 'cuda'];
const say = (s) => console.error(`prebuild: ${s}`);

const build = path.join(root, 'build');
const kept = path.join(root, 'build.kept-by-prebuild');
if (fs.existsSync(build)) {
  fs.rmSync(kept, { recursive: true, force: true });
  fs.renameSync(build, kept);
}
process.on('exit', () => {
  fs.rmSync(build, { recursive: true, force: true });
  if (fs.existsSync(kept)) {
    fs.renameSync(kept, build);
    say('build/ put back (a local build wins over the prebuilds)');
  }
});

/** Runs `code` on the binary with the Node that can load it: this one, or an arm64 node under
 *  qemu-user for a cross-built one (null when there is none to run it). */
function inspect(flavor, file) {
  const code = 'const a = require(process.argv[1]).cudaInfo(); console.log(JSON.stringify(a))';
  if (flavor.arch === process.arch) return JSON.parse(execFileSync(process.execPath, ['-e', code, file], { encoding: 'utf8' }));
  const node = process.env.NN_ARENA_ARM64_NODE;
  if (!node) return null;
  return JSON.parse(execFileSync('qemu-aarch64', ['-L', `/usr/${flavor.cross}`, node, '-e', code, file], { encoding: 'utf8' }));
}

for (const key of flavors) {
  const flavor = FLAVORS[key];
  const dir = path.join(root, 'prebuilds', `${process.platform}-${flavor.arch}`);
  fs.mkdirSync(dir, { recursive: true });
  const env = { ...process.env, NN_ARENA_BUILD_FROM_SOURCE: '1' };
  if (!flavor.cuda) env.NN_ARENA_CUDA = '0';
  else {
    delete env.NN_ARENA_CUDA;
    if (!locate()) {
      say('nvcc not found: the CUDA prebuild needs the CUDA toolkit (CUDA_PATH or /usr/local/cuda)');
      process.exit(1);
    }
    env.NN_ARENA_CUDA_ARCH = process.env.NN_ARENA_CUDA_ARCH || 'all';
  }
  if (flavor.cross) {
    env.npm_config_arch = flavor.arch; // node-gyp's --arch
    for (const [k, tool] of [
      ['CC', 'gcc'],
      ['CXX', 'g++'],
      ['LINK', 'g++'],
      ['AR', 'ar'],
    ])
      env[k] = process.env[`${k}_${flavor.arch}`] || `${flavor.cross}-${tool}`;
  }
  const out = path.join(dir, flavor.name);
  const stampFile = out.replace(/\.node$/, '.build.json');
  // The stamp this build would get (computed with the flavor's environment).
  const saved = { ...process.env };
  Object.assign(process.env, env);
  if (!flavor.cuda) delete process.env.NN_ARENA_CUDA_ARCH;
  const now = stamp.current({ cuda: flavor.cuda, archs: flavor.cuda ? archPlan(locate().nvcc).archs : [] });
  for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
  Object.assign(process.env, saved);
  const before = (() => {
    try {
      return JSON.parse(fs.readFileSync(stampFile, 'utf8'));
    } catch {
      return null;
    }
  })();
  if (fs.existsSync(out) && !stamp.differences(before, now).length) {
    say(`${path.relative(root, out)}: ${key}, kept (built from these sources with these options ${before.builtAt})`);
    continue;
  }
  const started = Date.now();
  const r = spawnSync(process.execPath, [path.join(__dirname, 'install.cjs')], { cwd: root, env, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
  fs.copyFileSync(path.join(build, 'Release', 'nn_arena.node'), out);
  fs.copyFileSync(stamp.STAMP, stampFile);
  const strip = flavor.cross ? `${flavor.cross}-strip` : 'strip';
  try {
    execFileSync(strip, ['--strip-unneeded', out]);
  } catch {
    say(`${strip} not found: left unstripped`);
  }
  const info = inspect(flavor, out);
  if (info && info.built !== flavor.cuda) {
    say(`${out}: expected a ${key} binary`);
    process.exit(1);
  }
  const checked = info
    ? `${info.archs ? ` (${info.archs})` : ''}, loads`
    : ', not loaded here (NN_ARENA_ARM64_NODE names an arm64 node to check it under qemu-user)';
  say(
    `${path.relative(root, out)}: ${key}${checked}, ${(fs.statSync(out).size / 1048576).toFixed(1)} MiB, built in ${Math.round((Date.now() - started) / 1000)} s`,
  );
}
