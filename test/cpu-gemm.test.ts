// The CPU backend's GEMM (csrc/cpu/gemm.h): bench/cpu/gemm_check.cc, built here with g++ from
// the addon's own sources, checks every ISA this CPU runs against a long-double reference on
// odd shapes; training through the addon is bit-identical run after run and whatever the thread
// count (NN_ARENA_THREADS is read once per process, so each run is a child process).
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const runs = (cmd: string) => {
  try {
    execFileSync(cmd, ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};
const hasGxx = runs('g++');
const root = join(import.meta.dirname, '..');
const GEMM_SOURCES = [
  'bench/cpu/gemm_check.cc',
  'csrc/cpu/gemm.cc',
  'csrc/cpu/gemm_avx2.cc',
  'csrc/cpu/gemm_avx512.cc',
  'csrc/cpu/gemm_neon.cc',
  'csrc/core/thread_pool.cc',
  'csrc/core/env.cc',
];
/** The ISAs gemm_check must have checked, given the best one it detected. */
const expectedIsas = (detected: string) =>
  detected === 'neon' ? ['portable', 'neon'] : ['portable', 'avx2', 'avx512'].slice(0, ['portable', 'avx2', 'avx512'].indexOf(detected) + 1);

describe.skipIf(!hasGxx)('CPU GEMM kernels (bench/cpu/gemm_check.cc)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nna-gemm-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('match a long-double reference on every ISA, float and double, odd shapes, epilogues; repeat and thread counts bit-identical', () => {
    const exe = join(dir, 'gemm_check');
    const src = GEMM_SOURCES.map((f) => join(root, f));
    execFileSync('g++', ['-std=c++17', '-O2', '-fopenmp-simd', '-pthread', `-I${join(root, 'csrc')}`, ...src, '-o', exe], { stdio: 'pipe' });
    const r = spawnSync(exe, [], { encoding: 'utf8', env: { ...process.env, NN_ARENA_THREADS: '3' } });
    expect(r.stdout).not.toMatch(/FAIL/);
    expect(r.status).toBe(0);
    const detected = /^detected (\w+)/m.exec(r.stdout)![1]!;
    const isas = expectedIsas(detected);
    for (const isa of isas) expect(r.stdout).toContain(`isa ${isa} checked`);
    // 432 checks an ISA (an AVX2-only host checks two ISAs: 864; with AVX-512, three).
    expect(Number(/^ok (\d+)$/m.exec(r.stdout)?.[1])).toBeGreaterThan(400 * isas.length);
  });
});

// linux-arm64: the NEON kernels (csrc/cpu/gemm_neon.cc), cross-compiled (Debian's
// g++-aarch64-linux-gnu) and run under qemu-user: correctness only, emulated speed means nothing.
// Minutes under emulation, so only when asked: NN_ARENA_GEMM_QEMU=1 (scripts/ci-arm64.sh).
describe.skipIf(process.env.NN_ARENA_GEMM_QEMU !== '1')('CPU GEMM kernels on linux-arm64 (qemu-user)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nna-gemm-arm64-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('NEON and portable kernels match the long-double reference, float and double, epilogues; thread counts bit-identical', () => {
    const exe = join(dir, 'gemm_check');
    execFileSync(
      'aarch64-linux-gnu-g++',
      ['-std=c++17', '-O2', '-fopenmp-simd', '-pthread', '-static', `-I${join(root, 'csrc')}`, ...GEMM_SOURCES.map((f) => join(root, f)), '-o', exe],
      { stdio: 'pipe' },
    );
    const r = spawnSync('qemu-aarch64', [exe, '--quick'], { encoding: 'utf8', env: { ...process.env, NN_ARENA_THREADS: '3' }, timeout: 1_500_000 });
    expect(r.stdout).not.toMatch(/FAIL/);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^detected neon, active neon$/m);
    for (const isa of expectedIsas('neon')) expect(r.stdout).toContain(`isa ${isa} checked`);
    expect(Number(/^ok (\d+)$/m.exec(r.stdout)?.[1])).toBeGreaterThan(800); // --quick: 864 checks over the two ISAs
  }, 1_600_000);
});

// Trains a small network with odd widths on the CPU backend in a child process and prints a
// digest of every weight and bias and the final loss.
const script = `
import { createHash } from 'node:crypto';
import { Arena, planLayout, Trainer } from ${JSON.stringify(join(root, 'dist/index.js'))};
const [dtype, optimizer, recipe] = process.argv.slice(1);
// Products of 2-5M multiply-adds: past the GEMM's threshold for splitting across threads.
const layers = [300, 257, 130, 10];
// 'recipe': GELU hidden layers (the float epilogue's own erf and exp), a cosine schedule and
// clipping (the updates after the norm, split over the threads by rows).
const activations = recipe ? ['gelu', 'gelu', 'softmax'] : undefined;
const plan = planLayout({ layers, batch: 70, optimizer, dtype, samples: 420, ...(activations ? { activations } : {}) });
const arena = Arena.create(plan, { backend: 'cpu' });
const extra = recipe ? { schedule: { type: 'cosine', total: 20, warmup: 2 }, clipGradNorm: 0.5 } : {};
const t = new Trainer(arena, { lr: optimizer.startsWith('adam') ? 1e-3 : 0.02, ...extra });
t.init(3);
const labels = Uint8Array.from({ length: 420 }, (_, i) => (i * 7) % 10);
const x = new Float32Array(420 * 300).map((_, i) => Math.sin((labels[Math.floor(i / 300)] + 1) * (i % 300 + 1) * 0.1) + 0.2 * Math.sin(i * 0.37));
const r = await t.fit({ x, labels }, { epochs: 3, shuffle: true });
const h = createHash('sha256');
for (let l = 1; l < layers.length; l++) for (const k of ['w', 'b']) h.update(new Uint8Array(arena.view(l, k).slice().buffer));
console.log(h.digest('hex'), r.loss);
`;
const train = (threads: string, dtype: string, optimizer: string, isa = '', recipe = '') => {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script, dtype, optimizer, ...(recipe ? [recipe] : [])], {
    encoding: 'utf8',
    env: { ...process.env, NN_ARENA_THREADS: threads, NN_ARENA_CPU_ISA: isa },
  });
  expect(r.stderr).toBe('');
  const [digest, loss] = r.stdout.trim().split(' ');
  return { digest: digest!, loss: Number(loss) };
};

describe('CPU training through the GEMM', () => {
  for (const [dtype, optimizer, recipe] of [
    ['float32', 'sgd', ''],
    ['float32', 'adam', ''],
    ['float64', 'momentum', ''],
    ['float32', 'adamw', 'recipe'],
  ] as const) {
    it(`${dtype} ${optimizer}${recipe ? ' + gelu + cosine + clipping' : ''}: bit-identical on repeat and with 1, 2 or 3 threads; learns`, () => {
      const first = train('2', dtype, optimizer, '', recipe);
      expect(first.digest).toMatch(/^[0-9a-f]{64}$/);
      expect(first.loss).toBeLessThan(Math.log(10)); // below chance after three epochs
      for (const threads of ['2', '1', '3']) expect(train(threads, dtype, optimizer, '', recipe).digest).toBe(first.digest);
    });
  }

  it('the portable kernels train to the same loss (other rounding, so not the same bits)', () => {
    const best = train('2', 'float64', 'sgd'),
      portable = train('2', 'float64', 'sgd', 'portable');
    expect(Math.abs(portable.loss - best.loss)).toBeLessThan(1e-9);
  });
});
