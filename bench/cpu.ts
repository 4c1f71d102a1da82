// cpu.ts: the CPU backend at the machine's limit (issue 16), every figure from one run: the FMA
// peak and GEMM GFLOP/s on the product shapes of S, M and L (bench/cpu/gemm_bench.cc, built here
// with g++ from the addon's own sources), a system BLAS on the same shapes where one is
// installed, training steps of S, M, L (SGD and Adam), and PyTorch CPU on the same cores.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { attachTorch, benchSteps, runTorchReference, type StepRow } from './steps.js';

export interface GemmRow {
  network: string;
  product: string;
  m: number;
  n: number;
  k: number;
  gflops: number;
  gflopsMedian: number;
  blasGflops: number | null;
  blasGflopsMedian: number | null;
}
export interface CpuGemm {
  isa: string;
  threads: number;
  fmaPeak1: number;
  fmaPeak: number;
  blas: string | null;
  rows: GemmRow[];
}
export interface CpuTarget {
  target: string;
  figure: string;
  met: boolean;
}
export interface CpuResults {
  threads: number;
  torch: string;
  gemm: CpuGemm | string;
  steps: StepRow[];
  targets: CpuTarget[];
  /** Load average over 1 minute when the run started and ended: other processes share the cores. */
  load: [number, number];
}

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const loadAvg = () => Number(execFileSync('cat', ['/proc/loadavg'], { encoding: 'utf8' }).split(' ')[0]);

function runGemmBench(quick: boolean, log: (s: string) => void): CpuGemm | string {
  const dir = mkdtempSync(join(tmpdir(), 'nna-gemm-'));
  try {
    const exe = join(dir, 'gemm_bench');
    const src = [
      'bench/cpu/gemm_bench.cc',
      'csrc/cpu/gemm.cc',
      'csrc/cpu/gemm_avx2.cc',
      'csrc/cpu/gemm_avx512.cc',
      'csrc/cpu/gemm_neon.cc',
      'csrc/core/thread_pool.cc',
      'csrc/core/env.cc',
    ].map((f) => join(root, f));
    // The addon's flags (binding.gyp), so the kernels are the ones training runs.
    execFileSync('g++', ['-std=c++17', '-O3', '-fopenmp-simd', '-pthread', `-I${join(root, 'csrc')}`, ...src, '-ldl', '-o', exe], { stdio: 'pipe' });
    const out = execFileSync(exe, ['--seconds', quick ? '0.2' : '1', ...(quick ? ['--only', 'S,M'] : [])], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 900_000,
    });
    const g = JSON.parse(out) as CpuGemm;
    log(`  FMA peak ${g.fmaPeak.toFixed(1)} GFLOP/s on ${g.threads} threads (${g.fmaPeak1.toFixed(1)} on one), kernels ${g.isa}, BLAS ${g.blas ?? 'none'}`);
    for (const r of g.rows)
      log(
        `  ${r.network} ${r.product.padEnd(18)} ${r.m}x${r.n}x${r.k}: ${r.gflops.toFixed(1)} GFLOP/s (${((100 * r.gflops) / g.fmaPeak).toFixed(0)}% of peak)${r.blasGflops === null ? '' : `, BLAS ${r.blasGflops.toFixed(1)}`}`,
      );
    return g;
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    return `GEMM benchmark did not run: ${(err.stderr || err.message).trim().split('\n').pop()}`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Issue 16's targets, each met or missed with its figure. */
function targets(gemm: CpuGemm | string, steps: StepRow[]): CpuTarget[] {
  const out: CpuTarget[] = [];
  if (typeof gemm !== 'string') {
    for (const r of gemm.rows.filter((x) => x.network === 'L')) {
      const share = r.gflops / gemm.fmaPeak;
      out.push({
        target: `GEMM L ${r.product} >= 70% of FMA peak`,
        figure: `${r.gflops.toFixed(1)} GFLOP/s = ${(100 * share).toFixed(0)}% of ${gemm.fmaPeak.toFixed(1)}`,
        met: share >= 0.7,
      });
      if (r.blasGflops !== null)
        out.push({
          target: `GEMM L ${r.product} >= system BLAS`,
          figure: `${r.gflops.toFixed(1)} vs ${r.blasGflops.toFixed(1)} GFLOP/s`,
          met: r.gflops >= r.blasGflops,
        });
    }
  }
  for (const s of steps) {
    const ms = s.microsPerStep / 1e3,
      gf = s.tflops * 1e3;
    if (s.network === 'S') out.push({ target: `S ${s.optimizer} <= 1.2 ms/step`, figure: `${ms.toFixed(3)} ms`, met: ms <= 1.2 });
    if (s.network === 'M') out.push({ target: `M ${s.optimizer} <= 40 ms/step`, figure: `${ms.toFixed(1)} ms`, met: ms <= 40 });
    if (s.network === 'L')
      out.push({ target: `L ${s.optimizer} >= 200 GFLOP/s`, figure: `${gf.toFixed(1)} GFLOP/s (${ms.toFixed(0)} ms/step)`, met: gf >= 200 });
    if (s.torch)
      out.push({
        target: `${s.network} ${s.optimizer} ahead of PyTorch CPU`,
        figure: `${(s.torch.eager / 1e3).toFixed(3)} ms vs ${ms.toFixed(3)} ms (${(s.torch.eager / s.microsPerStep).toFixed(2)}x)`,
        met: s.microsPerStep < s.torch.eager,
      });
  }
  return out;
}

export async function benchCpu(quick: boolean, log: (s: string) => void): Promise<CpuResults> {
  const load0 = loadAvg();
  const nets = quick ? ['S', 'M'] : ['S', 'M', 'L'];
  log('  GEMM (bench/cpu/gemm_bench.cc)');
  const gemm = runGemmBench(quick, log);
  if (typeof gemm === 'string') log(`  ${gemm}`);
  log('  training steps (cpu backend)');
  const steps = await benchSteps('cpu', nets, (net) => (net === 'S' ? (quick ? 200 : 1000) : net === 'M' ? (quick ? 20 : 100) : 3), log);
  log('  PyTorch CPU (bench/torch_ref.py --device cpu, same cores, same call)');
  const threads = Number(process.env.NN_ARENA_THREADS) || cpus().length;
  const ref = runTorchReference(nets, log, ['--device', 'cpu', '--threads', String(threads)]);
  if (typeof ref === 'string') log(`  ${ref}`);
  else attachTorch(steps, ref, 'cpu');
  const t = targets(gemm, steps);
  for (const x of t) log(`  ${x.met ? 'met   ' : 'MISSED'} ${x.target}: ${x.figure}`);
  return { threads, torch: typeof ref === 'string' ? ref : `PyTorch ${ref.torch} (${ref.device})`, gemm, steps, targets: t, load: [load0, loadAvg()] };
}
