// torch-memory-compare.mjs: bench/torch_memory.py's measurements against the estimate of
// src/report/pytorch.ts, per network, optimizer, dtype (and AMP precision) and stage; writes a
// markdown table.
//   node bench/torch-memory-compare.mjs MEASURED.json [--md OUT.md] [--tolerance 0.01]   (uses dist/)
// Exit status 1 when any stage's allocated or peak bytes differ from the estimate by more than
// the tolerance (default 1%), or when GradScaler skipped a measured step (the estimate has one).
import { readFileSync, writeFileSync } from 'node:fs';
import { planLayout } from '../dist/index.js';
import { estimatePytorchMemory } from '../dist/tools.js';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const file = args.find((a, i) => !a.startsWith('--') && !(i > 0 && args[i - 1].startsWith('--')));
if (!file) {
  console.error('usage: node bench/torch-memory-compare.mjs MEASURED.json [--md OUT.md] [--tolerance 0.01]');
  process.exit(2);
}
const tolerance = Number(opt('--tolerance', '0.01'));
const measured = JSON.parse(readFileSync(file, 'utf8'));
const int = (n) => n.toLocaleString('en-US');
const pct = (est, got) => (got === 0 ? (est === 0 ? 0 : Infinity) : (est - got) / got);

const lines = [
  `PyTorch ${measured.torch}, CUDA ${measured.cuda}, ${measured.device}; measured ${measured.date}; cuBLAS workspaces ${int(measured.workspaceBytes ?? 0)} B (baseline, subtracted). Tolerance ${(tolerance * 100).toFixed(1)}%.`,
  '',
  '| network | optimizer | dtype | stage | measured allocated | estimate | diff | measured peak | estimate | diff | reserved measured / estimate | nn-arena arena |',
  '|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|',
];
let worst = 0;
let failures = 0;
const unmodelled = [];
for (const row of measured.rows) {
  const spec = {
    layers: row.layers,
    batch: row.batch,
    dtype: row.dtype,
    optimizer: row.optimizer,
    ...(row.ops ? { ops: row.ops } : {}),
    ...(row.activations ? { activations: row.activations } : {}),
  };
  const precision = row.precision ?? 'fp32'; // older files: fp32 only
  let est;
  try {
    est = estimatePytorchMemory(spec, { precision });
  } catch (e) {
    // a network the estimate refuses (a layer it does not model, e.g. an op under AMP) is listed, not compared
    if (e?.code !== 'BAD_LAYERS') throw e;
    unmodelled.push(`${row.network ?? row.layers.join('-')} ${row.optimizer}: ${e.message}`);
    continue;
  }
  const dtype = precision === 'fp32' ? row.dtype : `${row.dtype} ${precision}`;
  const arena = planLayout(spec).totalBytes;
  for (const m of row.stages) {
    const e = est.stages.find((s) => s.stage === m.stage);
    const dA = pct(e.allocatedBytes, m.allocated);
    // A source that recorded only memory_allocated (as seed002 did) has no peaks.
    const hasPeak = typeof m.peak === 'number';
    const dP = hasPeak ? pct(e.peakBytes, m.peak) : 0;
    const bad = Math.abs(dA) > tolerance || Math.abs(dP) > tolerance;
    if (bad) failures++;
    worst = Math.max(worst, Math.abs(dA), Math.abs(dP));
    const f = (d) => `${d >= 0 ? '+' : ''}${(d * 100).toFixed(2)}%${Math.abs(d) > tolerance ? ' ✗' : ''}`;
    lines.push(
      `| ${row.network} ${row.layers.join('-')} b${row.batch} | ${row.optimizer} | ${dtype} | ${m.stage} | ${int(m.allocated)} | ${int(e.allocatedBytes)} | ${f(dA)} | ${hasPeak ? int(m.peak) : '—'} | ${int(e.peakBytes)} | ${hasPeak ? f(dP) : '—'} | ${typeof m.reserved === 'number' ? int(m.reserved) : '—'} / ${int(e.reservedBytes)} | ${m.stage === 'step' ? int(arena) : ''} |`,
    );
  }
  if (row.scalerSkippedStep) {
    failures++;
    lines.push(
      `| ${row.network} | ${row.optimizer} | ${dtype} | step | GradScaler skipped the optimizer step (inf/NaN gradients): not the step the estimate models ✗ | | | | | | | |`,
    );
  }
  if (row.leftoverAfter)
    lines.push(
      `| ${row.network} | ${row.optimizer} | ${dtype} | (after) | leftover ${int(row.leftoverAfter)} B not freed: a workspace or cache the warm-up missed | | | | | | | |`,
    );
}
if (unmodelled.length) lines.push('', 'Not compared (the estimate refuses them):', ...unmodelled.map((u) => `- ${u}`));
lines.push(
  '',
  `${measured.rows.length - unmodelled.length} runs, largest difference ${(worst * 100).toFixed(2)}%, ${failures} stage(s) beyond ${(tolerance * 100).toFixed(1)}%.`,
);
const md = lines.join('\n');
console.log(md);
const out = opt('--md', undefined);
if (out) writeFileSync(out, `${md}\n`);
process.exitCode = failures ? 1 : 0;
