// doctor.ts (CLI): `nn-arena doctor [--json]`, the report of src/native/doctor.ts as text or JSON;
// `nn-arena doctor --data-parallel ...`, the measured advice of src/report/data-parallel-advice.ts.
import type { Optimizer } from '../layout/header.js';
import type { GradientWire, PrecisionName } from '../native/addon.js';
import { doctor, type DoctorReport } from '../native/doctor.js';
import { adviseDataParallel } from '../report/data-parallel-advice.js';

export function runDoctor(json: boolean): void {
  const r = doctor();
  console.log(json ? JSON.stringify(r, null, 2) : doctorText(r));
}

/** The report as the text `nn-arena doctor` prints: one line a fact. */
export function doctorText(r: DoctorReport): string {
  const yes = (b: boolean) => (b ? 'yes' : 'no');
  const b = r.binary;
  const rows: Array<[string, string]> = [
    ['nn-arena', `${r.version} (Node ${r.node}, ${r.platform})`],
    ['binary', b.loaded ? `${b.variant} ${b.flavor === 'cuda' ? 'CUDA' : 'CPU-only'}: ${b.path} (${b.reason})` : `none: ${b.code}: ${b.message}`],
  ];
  if (b.loaded && b.flavor === 'cuda') rows.push(['CUDA', `runtime ${b.cudaRuntime}; kernels for ${b.archs.join(' ')}`]);
  const simd = r.cpu.neon ? 'NEON yes' : `AVX2 ${yes(r.cpu.avx2)}, AVX-512 ${yes(r.cpu.avx512)}, FMA ${yes(r.cpu.fma)}`;
  rows.push(['CPU', `${r.cpu.model}; ${r.cpu.threads} threads; ${simd}`]);
  rows.push([
    'GPU',
    r.gpu
      ? `${r.gpu.name}, compute capability ${r.gpu.computeCapability}, driver ${r.gpu.driver ?? 'unknown'}; ${r.gpu.covered === null ? 'not usable by a CPU-only binary' : r.gpu.covered ? 'the binary has kernels for it' : 'the binary has NO kernels for it'}`
      : 'none found',
  ]);
  rows.push(['cuBLAS', r.cublas === null ? 'not checked (no usable GPU)' : r.cublas === 'cublas' ? 'found' : `not used: ${r.cublas}`]);
  rows.push([
    'cuBLASLt',
    r.cublasLt === null
      ? 'not checked (no usable GPU)'
      : r.cublasLt === 'found'
        ? 'found (the forward products take their bias and ReLU in its epilogues; NN_ARENA_CUBLASLT=0 turns them off, 1 adds the backward ones)'
        : `not found: ${r.cublasLt}`,
  ]);
  rows.push(["backend 'auto'", `${r.auto.backend}: ${r.auto.why}`]);
  const w = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n');
}

export interface AdviceArgs {
  layers: number[];
  batch: number;
  precision: PrecisionName;
  optimizer: Optimizer;
  devices: number[] | undefined;
  gradients: GradientWire;
  steps: number;
  json: boolean;
}

export async function runDataParallelAdvice(a: AdviceArgs): Promise<void> {
  const r = await adviseDataParallel(
    { layers: a.layers, batch: a.batch, optimizer: a.optimizer },
    { precision: a.precision, gradients: a.gradients, steps: a.steps, ...(a.devices ? { devices: a.devices } : {}) },
  );
  console.log(a.json ? JSON.stringify(r, null, 2) : `data parallelism: ${r.advice === 'group' ? 'use the group' : 'use one GPU'}: ${r.why}`);
}
