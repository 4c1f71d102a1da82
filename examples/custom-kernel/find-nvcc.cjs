// What binding.gyp needs to build the CUDA kernel: `nvcc` (or nothing: then the module is
// CPU-only), `cudalib` (libcudart_static.a's folder), `cudainc` (cuda_runtime.h's folder).
// CUSTOM_KERNEL_CUDA=0 forces a CPU-only build.
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
const roots = [process.env.CUDA_PATH, process.env.CUDA_HOME, '/usr/local/cuda'].filter(Boolean);

function locate() {
  if (process.env.CUSTOM_KERNEL_CUDA === '0') return null;
  for (const root of roots) {
    const nvcc = path.join(root, 'bin', 'nvcc');
    const lib = ['lib64', 'lib'].map((d) => path.join(root, d)).find((d) => exists(path.join(d, 'libcudart_static.a')));
    const inc = path.join(root, 'include');
    if (exists(nvcc) && lib && exists(path.join(inc, 'cuda_runtime.h'))) return { nvcc, cudalib: lib, cudainc: inc };
  }
  return null;
}

process.stdout.write(locate()?.[process.argv[2]] ?? '');
