// vs-pytorch.ts (CLI): `nn-arena plan --vs-pytorch`: PyTorch's caching allocator, stage by stage,
// beside the arena's exact regions for the same work.
import type { Plan } from '../layout/plan.js';
import { activationInfo } from '../layout/header.js';
import { arenaBytesByStage, estimatePytorchMemory, fullAndCompact, type TorchStage } from '../report/pytorch.js';
import { bytes, int, table } from './format.js';

const WHAT: Record<TorchStage, string> = {
  model: 'model.to(cuda): weights, biases',
  inputs: 'x, labels to cuda',
  forward: 'output = model(x)',
  loss: 'loss = CrossEntropyLoss(output, labels)',
  backward: 'loss.backward()',
  step: 'optimizer.step()',
};

const ARENA: Record<TorchStage, string> = {
  model: 'w, b', inputs: 'z[0], y (+ xdata, ydata)', forward: 'z[1..]', loss: 'stats', backward: 'd, db, dw', step: 'mw, mb, vw, vb',
};

/** nn.Sequential(Linear, ReLU, Linear) for the plan's layers. */
function moduleText(plan: Plan): string {
  const acts = plan.spec.activations;
  const mods = acts.flatMap((a, i) => (i < acts.length - 1 && activationInfo(a).torch ? ['Linear', activationInfo(a).torch] : ['Linear']));
  return `nn.Sequential(${mods.length > 7 ? `${mods.slice(0, 4).join(', ')}, …, Linear` : mods.join(', ')})`;
}

const names = (list: Array<{ name: string }>, max = 4) =>
  list.length <= max ? list.map((t) => t.name).join(', ') : `${list.slice(0, max).map((t) => t.name).join(', ')}, … ${list.length} in all`;

export function vsPytorchText(plan: Plan): string {
  const est = estimatePytorchMemory(plan.spec);
  const arena = arenaBytesByStage(plan);
  const rows: string[][] = [['stage', 'PyTorch: what runs', 'allocated after', 'peak in stage', 'reserved', '|', 'nn-arena regions', 'bytes (exact)']];
  est.stages.forEach((st, i) => {
    const a = arena.stages[i]!;
    rows.push([st.stage, WHAT[st.stage], int(st.allocatedBytes), int(st.peakBytes), int(st.reservedBytes), '|', ARENA[st.stage], int(a.bytes)]);
  });
  if (arena.extras) rows.push(['', '', '', '', '', '|', 'user regions', int(arena.extras)]);
  rows.push(['', '', '', '', '', '|', 'header + padding', int(arena.headerAndPadding)]);
  if (arena.shared) rows.push(['', '', '', '', '', '|', 'shared (counted twice above)', `-${int(arena.shared)}`]);
  const ratio = plan.totalBytes / est.peakBytes;
  const { full, compact } = fullAndCompact(plan);
  const lines = [
    `PyTorch estimate: caching allocator model (one block per tensor, 512-byte rounding, 2 / 20 MiB segments), first training step of ${moduleText(plan)} + CrossEntropyLoss, ${est.optimizer} (foreach), ${plan.spec.dtype}, int64 labels, batch ${plan.spec.batch}`,
    '',
    table(rows, [false, false, true, true, true, false, false, true]),
    '',
    `peak: PyTorch ${int(est.peakBytes)} B (${bytes(est.peakBytes)}, max_memory_allocated, during ${est.peakStage}); nn-arena ${int(plan.totalBytes)} B (${bytes(plan.totalBytes)}, the whole arena, allocated once) = ${ratio.toFixed(2)}x PyTorch's peak`,
    `PyTorch holds ${int(est.stages[est.stages.length - 1]!.allocatedBytes)} B after the step (${int(est.tensorBytes)} B of tensor elements); it reserves ${int(est.stages[est.stages.length - 1]!.reservedBytes)} B of segments`,
  ];
  lines.push(`plans: full ${int(full.totalBytes)} B = ${(full.totalBytes / est.peakBytes).toFixed(2)}x; compact (regions never live together share bytes${plan.spec.optimizer === 'sgd' ? ', no dw' : ''}) ${int(compact.totalBytes)} B = ${(compact.totalBytes / est.peakBytes).toFixed(2)}x PyTorch's peak${plan.spec.compact ? '' : ' (plan --compact)'}`);
  lines.push('', 'PyTorch tensors per stage (allocated +, freed -):');
  for (const st of est.stages) {
    if (st.allocated.length || st.freed.length) lines.push(`  ${st.stage}: + ${names(st.allocated) || 'nothing'}${st.freed.length ? `; - ${names(st.freed)}` : ''}`);
  }
  return lines.join('\n');
}

export function vsPytorchJson(plan: Plan): object {
  const est = estimatePytorchMemory(plan.spec);
  const { full, compact } = fullAndCompact(plan);
  return { pytorch: est, arena: { ...arenaBytesByStage(plan), totalBytes: plan.totalBytes, fullBytes: full.totalBytes, compactBytes: compact.totalBytes } };
}
