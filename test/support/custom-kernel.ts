// custom-kernel.ts: builds examples/custom-kernel the way a user's install would, against this
// checkout: a copy in a temporary folder whose node_modules links nn-arena (this repository, so
// the include helper resolves through the package's exports) and node-addon-api.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const REPO = resolve(__dirname, '..', '..');
export const EXAMPLE = join(REPO, 'examples', 'custom-kernel');

export interface CustomKernel {
  cudaBuilt: boolean;
  decayWeights(arena: unknown, rate: number): Promise<number>;
  decayHostSide(arena: unknown, rate: number): number;
  decayDeviceSide(arena: unknown, rate: number): number;
  updateEma(arena: unknown, decay: number, name?: string): Promise<number>;
  updateEmaHostSide(arena: unknown, decay: number, name?: string): number;
}

/** Copies, builds (node-gyp of this repository; `cuda: false` forces a CPU-only module) and loads. */
export function buildExample(cuda: boolean): { ex: CustomKernel; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'nna-custom-kernel-'));
  for (const f of ['package.json', 'binding.gyp', 'find-nvcc.cjs', 'index.js', 'src']) cpSync(join(EXAMPLE, f), join(dir, f), { recursive: true });
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(REPO, join(dir, 'node_modules', 'nn-arena'), 'dir');
  symlinkSync(join(REPO, 'node_modules', 'node-addon-api'), join(dir, 'node_modules', 'node-addon-api'), 'dir');
  // scripts/node-gyp.cjs (the package's `nn-arena-gyp`, what the example's install runs): node-gyp
  // against this Node's own headers, offline.
  execFileSync(process.execPath, [join(REPO, 'scripts', 'node-gyp.cjs'), 'rebuild', '-j', '2'], {
    cwd: dir,
    env: { ...process.env, ...(cuda ? {} : { CUSTOM_KERNEL_CUDA: '0' }) },
    stdio: 'pipe',
  });
  return { ex: createRequire(join(dir, 'index.js'))(join(dir, 'index.js')) as CustomKernel, dir };
}

/** The example as built in place (examples/custom-kernel/build, see its README): for the GPU
 *  machine, which cannot build; undefined when it was not built. */
export function builtExample(): CustomKernel | undefined {
  try {
    return createRequire(join(EXAMPLE, 'index.js'))(join(EXAMPLE, 'index.js')) as CustomKernel;
  } catch {
    return undefined;
  }
}
