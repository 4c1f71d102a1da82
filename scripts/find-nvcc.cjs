// What binding.gyp needs to know about CUDA, printed for one of:
//   nvcc     the nvcc to use, or nothing for a CPU-only build
//   cudalib  the folder holding libcudart_static.a
//   cudainc  the folder holding cuda_runtime.h
//   gencode  -gencode flags: SASS for each architecture of archPlan() plus PTX of the newest, and
//            NNA_CUDA_PTX recording the PTX one (cudaInfo().archs; the SASS ones are nvcc's
//            __CUDA_ARCH_LIST__; -D values must not hold commas: nvcc splits them)
//   headers  every project header that any .cu under csrc/ includes, as nvcc -M reports them: the
//            nvcc rule's inputs, so editing any of them rebuilds the CUDA objects (no hand-kept list)
// NN_ARENA_CUDA=0 forces a CPU-only build. nvcc is searched in CUDA_PATH, CUDA_HOME, PATH and
// /usr/local/cuda; a CUDA build needs nvcc, the headers and the static runtime together.
const fs = require('node:fs');
const path = require('node:path');

const exists = (p) => {
  try {
    fs.accessSync(p);
    return true;
  } catch {
    return false;
  }
};

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
  const nvcc = roots()
    .map((r) => path.join(r, 'bin', 'nvcc'))
    .find((p) => exists(p));
  if (!nvcc) return null;
  for (const root of roots()) {
    const lib = ['lib64', 'lib', 'targets/x86_64-linux/lib', 'targets/sbsa-linux/lib']
      .map((d) => path.join(root, d))
      .find((d) => exists(path.join(d, 'libcudart_static.a')));
    const inc = ['include', 'targets/x86_64-linux/include', 'targets/sbsa-linux/include']
      .map((d) => path.join(root, d))
      .find((d) => exists(path.join(d, 'cuda_runtime.h')));
    if (lib && inc) return { nvcc, lib, inc };
  }
  return null;
}

// Every architecture the prebuilt CUDA binary covers: all that nvcc lists from sm_75 (the oldest
// CUDA 13 supports) to sm_120, SASS for each plus PTX of the newest (which newer GPUs JIT).
const FULL = ['75', '80', '86', '87', '88', '89', '90', '100', '103', '110', '120'];

function listed(nvcc) {
  try {
    const out = require('node:child_process').execFileSync(nvcc, ['--list-gpu-code'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return out
      .split(/\s+/)
      .map((c) => /^sm_(\d+a?)$/.exec(c)?.[1])
      .filter(Boolean);
  } catch {
    return [];
  }
}

// Compute capabilities of the GPUs visible here ('90' for an H100), or [] without nvidia-smi/GPU.
function localGpus() {
  try {
    const out = require('node:child_process').execFileSync('nvidia-smi', ['--query-gpu=compute_cap', '--format=csv,noheader'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 10000,
    });
    return [
      ...new Set(
        out
          .split(/\s+/)
          .filter((c) => /^\d+\.\d+$/.test(c))
          .map((c) => c.replace('.', '')),
      ),
    ];
  } catch {
    return [];
  }
}

// Built from source with no GPU visible, the common set: SASS for sm_75 (T4, RTX 20), sm_80
// (A100; also runs on 86, 87, 89: same major, higher minor) and sm_90 (H100, H200, GH200), PTX of
// compute_90 that the driver compiles for Blackwell and newer. 3 of the 11 architectures: a few
// minutes instead of tens on 2 cores (CONTRIBUTING.md, build times). `all` builds FULL, as the
// prebuilt CUDA binary does.
const COMMON = ['75', '80', '90'];

// Which architectures to build and why: NN_ARENA_CUDA_ARCH ("80;90", or "all"), else the GPUs
// visible here, else COMMON.
function archPlan(nvcc) {
  const known = nvcc ? listed(nvcc) : [];
  const full = known.length ? FULL.filter((a) => known.includes(a)) : FULL;
  const env = (process.env.NN_ARENA_CUDA_ARCH || '').trim();
  if (env && env !== 'all') {
    const archs = env
      .split(/[;, ]+/)
      .filter(Boolean)
      .map((a) => a.replace(/^(sm_|compute_)/, '').replace('.', ''));
    for (const a of archs) if (!/^\d+a?$/.test(a)) throw new Error(`NN_ARENA_CUDA_ARCH: bad architecture '${a}' (write e.g. 80 or 80;90 or all)`);
    return { archs, why: 'NN_ARENA_CUDA_ARCH' };
  }
  if (env === 'all') return { archs: full, why: 'NN_ARENA_CUDA_ARCH=all' };
  const gpus = localGpus();
  const ok = gpus.filter((a) => !known.length || known.includes(a));
  if (gpus.length && ok.length === gpus.length) return { archs: ok, why: 'the GPU found here' };
  const common = COMMON.filter((a) => full.includes(a));
  const set = 'the common set (NN_ARENA_CUDA_ARCH=all for every one from sm_75 to sm_120)';
  return {
    archs: common,
    why: gpus.length ? `this nvcc cannot build for the GPU found here (sm_${gpus.join(', sm_')}): ${set}` : `no GPU visible here: ${set}`,
  };
}

function gencode(nvcc) {
  const { archs } = archPlan(nvcc);
  const top = archs.reduce((a, b) => (parseInt(b, 10) > parseInt(a, 10) ? b : a));
  // NN_ARENA_CUDA_PTX=0: SASS only (a binary that cannot JIT for newer GPUs: for testing the
  // no-kernel fallback on a GPU newer than the architectures built).
  const ptx = process.env.NN_ARENA_CUDA_PTX !== '0';
  return [
    ...archs.map((a) => `-gencode=arch=compute_${a},code=sm_${a}`),
    ...(ptx ? [`-gencode=arch=compute_${top},code=compute_${top}`] : []),
    `-DNNA_CUDA_PTX=${ptx ? parseInt(top, 10) : 0}`,
  ].join(' ');
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

module.exports = { locate, archPlan, FULL, COMMON };

// Run by node-gyp while it reads binding.gyp: a failure prints one nn-arena line (no stack
// trace: nvcc -M needs the host C++ compiler, for one) and exits 1, which stops the configure.
if (require.main === module) {
  try {
    const found = locate();
    const what = process.argv[2] || 'nvcc';
    const out =
      what === 'headers'
        ? found
          ? headers(found)
          : ''
        : { nvcc: found?.nvcc, cudalib: found?.lib, cudainc: found?.inc, gencode: found ? gencode(found.nvcc) : '' }[what];
    process.stdout.write(out || '');
  } catch (e) {
    const detail = String(e.stderr || '')
      .trim()
      .split('\n')[0];
    process.stderr.write(`nn-arena: scripts/find-nvcc.cjs ${process.argv[2] || ''}: ${e.message.split('\n')[0]}${detail ? ` (${detail})` : ''}\n`);
    process.exit(1);
  }
}
