// sources.cjs: the addon's source files, found on disk so that a file added to one of the
// folders below is built without editing binding.gyp (the one rule for what goes in):
//   common  every .cc of the CPU folders, except the absent.cc stand-ins;
//   cuda    every .cu of all folders, and every .cc of the CUDA folders except absent.cc;
//   absent  the absent.cc stand-ins that replace the CUDA sources in a CPU-only build.
// A new FOLDER under csrc/ joins by being named in CPU_DIRS or CUDA_DIRS here.
// Paths are relative to the package root, '/'-separated, sorted. Also used by build-stamp.cjs.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const CPU_DIRS = ['addon', 'core', 'cpu', 'train', 'budget', 'bench'];
const CUDA_DIRS = ['cuda', 'nccl'];

function filesIn(dir) {
  const abs = path.join(root, 'csrc', dir);
  if (!fs.existsSync(abs)) return [];
  return fs.readdirSync(abs, { withFileTypes: true }).filter((e) => e.isFile()).map((e) => `csrc/${dir}/${e.name}`);
}

function sources(kind) {
  const absent = (f) => f.endsWith('/absent.cc');
  const cpu = CPU_DIRS.flatMap(filesIn);
  const cuda = CUDA_DIRS.flatMap(filesIn);
  const all = [...cpu, ...cuda];
  const out = {
    common: cpu.filter((f) => f.endsWith('.cc') && !absent(f)),
    cuda: [...all.filter((f) => f.endsWith('.cu')), ...cuda.filter((f) => f.endsWith('.cc') && !absent(f))],
    absent: all.filter(absent),
  }[kind];
  if (!out) throw new Error(`sources.cjs: unknown kind '${kind}' (common, cuda or absent)`);
  return out.sort();
}

module.exports = { sources, CPU_DIRS, CUDA_DIRS };

if (require.main === module) process.stdout.write(sources(process.argv[2] || 'common').join(' '));
