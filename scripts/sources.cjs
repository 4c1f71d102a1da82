// sources.cjs: the addons' source files, found on disk so that a file added to one of the
// folders below is built without editing binding.gyp (the one rule for what goes in):
//   common  every .cc of the CPU folders, except the absent.cc stand-ins;
//   cuda    every .cu of all folders, and every .cc of the CUDA folders except absent.cc;
//   absent  the absent.cc stand-ins that replace the CUDA sources in a CPU-only build.
// The test addon (nn_arena_test, test/native/: never shipped) has the same three kinds,
// test-common, test-cuda and test-absent: its own files plus the library files it calls into
// (TEST_USES; compiled again for it, since one gyp target cannot link another's objects).
// `has-test` prints 1 where test/native/ exists (a clone), 0 in the installed package.
// A new FOLDER under csrc/ joins by being named in CPU_DIRS or CUDA_DIRS here.
// Paths are relative to the package root, '/'-separated, sorted. Also used by build-stamp.cjs.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const CPU_DIRS = ['addon', 'core', 'cpu', 'train', 'budget'];
const CUDA_DIRS = ['cuda', 'nccl'];
const TEST_DIR = 'test/native';
// The library sources the test addon's functions reach (decoder, validator, phases and their JS form, residency
// replay, run checks, conversions, the backends of the copy bench, JIT compiles).
const TEST_USES = {
  common: [
    'addon/convert.cc',
    'addon/fault_guard.cc',
    'addon/js_error.cc',
    'addon/phases_js.cc',
    'budget/residency.cc',
    'budget/residency_check.cc',
    'core/env.cc',
    'core/host_memory.cc',
    'core/validate.cc',
    'cpu/cpu_backend.cc',
    'train/aliasing.cc',
    'train/check.cc',
    'train/phases.cc',
    'train/run_modes.cc',
  ],
  cuda: ['cuda/cublas_loader.cc', 'cuda/cublaslt_loader.cc', 'cuda/cuda_backend.cu', 'cuda/jit.cc', 'cuda/nvrtc_loader.cc'],
  absent: ['cuda/absent.cc'],
};

function filesIn(dir) {
  const abs = path.join(root, dir);
  if (!fs.existsSync(abs)) return [];
  return fs
    .readdirSync(abs, { withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => `${dir}/${e.name}`);
}

const absent = (f) => f.endsWith('/absent.cc');
/** common / cuda / absent of a set of files, cudaFiles being those of CUDA folders. */
function split(files, cudaFiles) {
  return {
    common: files.filter((f) => f.endsWith('.cc') && !absent(f) && !cudaFiles.includes(f)),
    cuda: [...files.filter((f) => f.endsWith('.cu')), ...cudaFiles.filter((f) => f.endsWith('.cc') && !absent(f))],
    absent: files.filter(absent),
  };
}

function sources(kind) {
  const csrc = (d) => filesIn(`csrc/${d}`);
  const cuda = CUDA_DIRS.flatMap(csrc);
  const lib = split([...CPU_DIRS.flatMap(csrc), ...cuda], cuda);
  const own = split(filesIn(TEST_DIR), []);
  const uses = (k) => TEST_USES[k].map((f) => `csrc/${f}`);
  const out = {
    ...lib,
    'test-common': [...own.common, ...uses('common')],
    'test-cuda': [...own.cuda, ...uses('cuda')],
    'test-absent': [...own.absent, ...uses('absent')],
  }[kind];
  if (!out) throw new Error(`sources.cjs: unknown kind '${kind}' (common, cuda, absent, test-common, test-cuda, test-absent, has-test)`);
  return out.sort();
}

const hasTest = () => filesIn(TEST_DIR).length > 0;

module.exports = { sources, hasTest, CPU_DIRS, CUDA_DIRS, TEST_DIR };

if (require.main === module) {
  const kind = process.argv[2] || 'common';
  process.stdout.write(kind === 'has-test' ? (hasTest() ? '1' : '0') : sources(kind).join(' '));
}
