// What binding.gyp needs to know about CUDA, printed for one of:
//   nvcc     the nvcc to use, or nothing for a CPU-only build
//   cudalib  the folder holding libcudart_static.a
//   cudainc  the folder holding cuda_runtime.h
//   gencode  -gencode flags: SASS for each of NN_ARENA_CUDA_ARCH (default "90") plus PTX of the last
//   headers  every project header that any .cu under csrc/ includes, as nvcc -M reports them: the
//            nvcc rule's inputs, so editing any of them rebuilds the CUDA objects (no hand-kept list)
// NN_ARENA_CUDA=0 forces a CPU-only build. nvcc is searched in CUDA_PATH, CUDA_HOME, PATH and
// /usr/local/cuda; a CUDA build needs nvcc, the headers and the static runtime together.
const fs = require('node:fs');
const path = require('node:path');

const exists = (p) => { try { fs.accessSync(p); return true; } catch { return false; } };

function roots() {
  const r = [process.env.CUDA_PATH, process.env.CUDA_HOME].filter(Boolean);
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    const nvcc = path.join(dir, 'nvcc');
    if (dir && exists(nvcc)) r.push(path.dirname(path.dirname(fs.realpathSync(nvcc))));
  }
  r.push('/usr/local/cuda');
  return r;
}

function locate() {
  if (process.env.NN_ARENA_CUDA === '0') return null;
  const nvcc = roots().map((r) => path.join(r, 'bin', 'nvcc')).find((p) => exists(p));
  if (!nvcc) return null;
  for (const root of roots()) {
    const lib = ['lib64', 'lib', 'targets/x86_64-linux/lib', 'targets/sbsa-linux/lib']
      .map((d) => path.join(root, d)).find((d) => exists(path.join(d, 'libcudart_static.a')));
    const inc = ['include', 'targets/x86_64-linux/include', 'targets/sbsa-linux/include']
      .map((d) => path.join(root, d)).find((d) => exists(path.join(d, 'cuda_runtime.h')));
    if (lib && inc) return { nvcc, lib, inc };
  }
  return null;
}

function gencode() {
  const archs = (process.env.NN_ARENA_CUDA_ARCH || '90').split(/[;, ]+/).filter(Boolean);
  for (const a of archs) if (!/^\d+a?$/.test(a)) throw new Error(`NN_ARENA_CUDA_ARCH: bad architecture '${a}'`);
  const top = archs[archs.length - 1];
  return [...archs.map((a) => `-gencode=arch=compute_${a},code=sm_${a}`), `-gencode=arch=compute_${top},code=compute_${top}`].join(' ');
}

// nvcc -M of each .cu, reduced to the project's own headers (relative, '/'-separated).
function headers(found) {
  const { execFileSync } = require('node:child_process');
  const root = path.resolve(__dirname, '..');
  const cus = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.cu')) cus.push(p);
    }
  };
  walk(path.join(root, 'csrc'));
  const out = new Set();
  for (const cu of cus) {
    const deps = execFileSync(found.nvcc, ['-M', '-std=c++17', `-I${found.inc}`, cu], { cwd: root, encoding: 'utf8' });
    for (const d of deps.replace(/\\\n/g, ' ').split(/\s+/)) {
      const abs = path.resolve(root, d);
      if (abs.startsWith(path.join(root, 'csrc') + path.sep) && !abs.endsWith('.cu')) out.add(path.relative(root, abs).split(path.sep).join('/'));
    }
  }
  return [...out].sort().join(' ');
}

const found = locate();
const what = process.argv[2] || 'nvcc';
const out = what === 'headers' ? (found ? headers(found) : '')
  : { nvcc: found?.nvcc, cudalib: found?.lib, cudainc: found?.inc, gencode: found ? gencode() : '' }[what];
process.stdout.write(out || '');
