// vs-pytorch.ts (CLI): `nn-arena plan --vs-pytorch`: PyTorch's caching allocator, stage by stage,
// beside the arena's exact regions for the same work.
import type { Plan } from '../layout/plan.js';
import { activationInfo } from '../layout/header.js';
import { arenaBytesByStage, estimatePytorchMemory, fullAndCompact, type PytorchPrecision, type TorchStage } from '../report/pytorch.js';
import { bf16CopyBytes } from '../report/bf16-copies.js';
import { bytes, int, table } from './format.js';

const WHAT: Record<TorchStage, string> = {
  model: 'model.to(cuda): weights, biases',
  inputs: 'x, labels to cuda',
  forward: 'output = model(x)',
  loss: 'loss = CrossEntropyLoss(output, labels)',
  backward: 'loss.backward()',
  step: 'optimizer.step()',
};

/** PyTorch's AMP recipe where it differs from the plain step. */
const AMP_WHAT: Partial<Record<TorchStage, string>> = {
  forward: 'with autocast: output = model(x)',
  loss: 'loss = CrossEntropyLoss(...); autocast exits',
};
const SCALER_WHAT: Partial<Record<TorchStage, string>> = {
  backward: 'scaler.scale(loss).backward()',
  step: 'scaler.step(opt); scaler.update()',
};

const ARENA: Record<TorchStage, string> = {
  model: 'w, b',
  inputs: 'z[0], y (+ xdata, ydata)',
  forward: 'z[1..]',
  loss: 'stats',
  backward: 'd, db, dw',
  step: 'mw, mb, vw, vb',
};

/** nn.Sequential(Linear, ReLU, Linear) for the plan's layers. */
function moduleText(plan: Plan): string {
  const acts = plan.spec.activations;
  const mods = acts.flatMap((a, i) => (i < acts.length - 1 && activationInfo(a).torch ? ['Linear', activationInfo(a).torch] : ['Linear']));
  return `nn.Sequential(${mods.length > 7 ? `${mods.slice(0, 4).join(', ')}, …, Linear` : mods.join(', ')})`;
}

const names = (list: Array<{ name: string }>, max = 4) =>
  list.length <= max
    ? list.map((t) => t.name).join(', ')
    : `${list
        .slice(0, max)
        .map((t) => t.name)
        .join(', ')}, … ${list.length} in all`;

/** What the arena side adds for `precision`: bf16's or fp16's copies beside the arena (made by each run, kept from the first run to dispose)
 *  (CUDA; the CPU emulates both without copies). */
function arenaSide(plan: Plan, precision: PytorchPrecision): { copies: number; note?: string } {
  if (precision === 'fp32') return { copies: 0 };
  const scaler = precision === 'fp16' ? ', and dynamic loss scaling keeps its scale on the device (a few bytes)' : '';
  return {
    copies: bf16CopyBytes(plan),
    note: `nn-arena ${precision} (CUDA${precision === 'fp16' ? ', one model' : ''}): the plan stays fp32 (the masters, dw, db, optimizer state); the products read ${precision} copies of z, w and d that a run allocates beside the arena (HalfCopies, run_buffers.cuh)${scaler}`,
  };
}

export function vsPytorchText(plan: Plan, precision: PytorchPrecision = 'fp32'): string {
  const est = estimatePytorchMemory(plan.spec, { precision });
  const arena = arenaBytesByStage(plan);
  const side = arenaSide(plan, precision);
  const what = { ...WHAT, ...(precision === 'fp32' ? {} : AMP_WHAT), ...(precision === 'fp16' ? SCALER_WHAT : {}) };
  const rows: string[][] = [['stage', 'PyTorch: what runs', 'allocated after', 'peak in stage', 'reserved', '|', 'nn-arena regions', 'bytes (exact)']];
  est.stages.forEach((st, i) => {
    const a = arena.stages[i]!;
    rows.push([st.stage, what[st.stage], int(st.allocatedBytes), int(st.peakBytes), int(st.reservedBytes), '|', ARENA[st.stage], int(a.bytes)]);
  });
  if (arena.extras) rows.push(['', '', '', '', '', '|', 'user regions', int(arena.extras)]);
  rows.push(['', '', '', '', '', '|', 'header + padding', int(arena.headerAndPadding)]);
  if (arena.shared) rows.push(['', '', '', '', '', '|', 'shared (counted twice above)', `-${int(arena.shared)}`]);
  if (side.copies) rows.push(['', '', '', '', '', '|', `${precision} copies beside the arena`, int(side.copies)]);
  const total = plan.totalBytes + side.copies;
  const { full, compact } = fullAndCompact(plan);
  const x = (bytes: number) => `${((bytes + side.copies) / est.peakBytes).toFixed(2)}x`;
  const amp =
    precision === 'fp32'
      ? ''
      : `, AMP: autocast(${precision === 'bf16' ? 'bfloat16' : 'float16'}) forward and loss${precision === 'fp16' ? ', GradScaler' : ''}`;
  const arenaPeak = side.copies
    ? `${int(plan.totalBytes)} B (arena) + ${int(side.copies)} B (${precision} copies) = ${int(total)} B (${bytes(total)})`
    : `${int(plan.totalBytes)} B (${bytes(plan.totalBytes)}, the whole arena, allocated once)`;
  const lines = [
    `PyTorch estimate: caching allocator model (one block per tensor, 512-byte rounding, 2 / 20 MiB segments), first training step of ${moduleText(plan)} + CrossEntropyLoss, ${est.optimizer} (foreach), ${plan.spec.dtype}${amp}, int64 labels, batch ${plan.spec.batch}`,
    '',
    table(rows, [false, false, true, true, true, false, false, true]),
    '',
    `peak: PyTorch ${int(est.peakBytes)} B (${bytes(est.peakBytes)}, max_memory_allocated, during ${est.peakStage}); nn-arena ${arenaPeak} = ${x(plan.totalBytes)} PyTorch's peak`,
    `PyTorch holds ${int(est.stages[est.stages.length - 1]!.allocatedBytes)} B after the step (${int(est.tensorBytes)} B of tensor elements); it reserves ${int(est.stages[est.stages.length - 1]!.reservedBytes)} B of segments`,
  ];
  lines.push(
    `plans${side.copies ? ` (+ the ${precision} copies)` : ''}: full ${int(full.totalBytes)} B = ${x(full.totalBytes)}; compact (regions never live together share bytes${plan.spec.optimizer === 'sgd' ? ', no dw' : ''}) ${int(compact.totalBytes)} B = ${x(compact.totalBytes)} PyTorch's peak${plan.spec.compact ? '' : ' (plan --compact)'}`,
  );
  if (side.note) lines.push(side.note);
  lines.push('', 'PyTorch tensors per stage (allocated +, freed -):');
  for (const st of est.stages) {
    if (st.allocated.length || st.freed.length)
      lines.push(`  ${st.stage}: + ${names(st.allocated) || 'nothing'}${st.freed.length ? `; - ${names(st.freed)}` : ''}`);
  }
  return lines.join('\n');
}

export function vsPytorchJson(plan: Plan, precision: PytorchPrecision = 'fp32'): object {
  const est = estimatePytorchMemory(plan.spec, { precision });
  const { full, compact } = fullAndCompact(plan);
  const side = arenaSide(plan, precision);
  return {
    precision,
    pytorch: est,
    arena: {
      ...arenaBytesByStage(plan),
      totalBytes: plan.totalBytes,
      fullBytes: full.totalBytes,
      compactBytes: compact.totalBytes,
      ...(precision === 'bf16' ? { bf16CopyBytes: side.copies } : precision === 'fp16' ? { fp16CopyBytes: side.copies } : {}),
    },
    ...(side.note ? { note: side.note } : {}),
  };
}
