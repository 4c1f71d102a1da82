// html.ts: the training report, one self-contained HTML page: inline CSS and SVG only, no script
// and no external reference, so it opens offline and fetches nothing.
import { OptionError } from '../core/errors.js';
import { requirePlan, type Plan } from '../layout/plan.js';
import { lineChart } from './chart.js';
import type { MachineInfo } from './machine.js';
import { estimatePytorchMemory, arenaBytesByStage, fullAndCompact } from './pytorch.js';
import { planToSVG, networkText } from './svg.js';
import { bytesText, esc, int } from './text.js';
import type { PurposeTotals } from './transfers.js';

export interface ProgressPoint {
  epoch: number;
  batch: number;
  batches: number;
  step: number;
  loss: number;
  accuracy: number;
  /** The learning rate of the report's last step; with clipping, the global gradient norm of
   *  each step since the previous report (before clipping). */
  lr?: number;
  gradNorms?: readonly number[];
  /** precision 'fp16': the loss scale after the report's last step. */
  lossScale?: number;
}

export interface TrainingReport {
  plan: Plan;
  /** Settings as shown (name -> value). */
  settings: Readonly<Record<string, string | number>>;
  machine: MachineInfo;
  backend: string;
  /** The code that ran the steps (FitResult.path). */
  path: string;
  /** One point per progress report of Trainer.fit. */
  progress: readonly ProgressPoint[];
  test: { loss: number; accuracy: number; count: number } | null;
  train: { loss: number; accuracy: number; seconds: number; samplesPerSecond: number };
  seconds: number;
  transfers: readonly PurposeTotals[];
  createdAt: Date;
}

/** The report's fields that the page reads, checked: OptionError BAD_OPTION naming the field. */
function checkReport(r: TrainingReport): void {
  const bad = (field: string, value: unknown, what: string): never => {
    throw new OptionError('BAD_OPTION', field, value, what);
  };
  if (r === null || typeof r !== 'object') bad('report', r, 'must be an object (TrainingReport)');
  requirePlan(r.plan, 'report.plan');
  for (const k of ['settings', 'machine', 'train'] as const) if (r[k] === null || typeof r[k] !== 'object') bad(`report.${k}`, r[k], 'must be an object');
  for (const k of ['backend', 'path'] as const) if (typeof r[k] !== 'string') bad(`report.${k}`, r[k], 'must be a string');
  if (!Array.isArray(r.progress)) bad('report.progress', r.progress, 'must be an array of progress points');
  r.progress.forEach((p, i) => {
    if (p === null || typeof p !== 'object') bad(`report.progress[${i}]`, p, 'must be a progress point');
    for (const k of ['epoch', 'batch', 'batches', 'step', 'loss', 'accuracy'] as const)
      if (typeof p[k] !== 'number') bad(`report.progress[${i}].${k}`, p[k], 'must be a number');
  });
  if (r.test !== null && (typeof r.test !== 'object' || r.test === undefined)) bad('report.test', r.test, 'must be an object or null');
  if (!Array.isArray(r.transfers)) bad('report.transfers', r.transfers, 'must be an array (recordTransfers().byPurpose())');
  if (typeof r.seconds !== 'number') bad('report.seconds', r.seconds, 'must be a number');
  if (!(r.createdAt instanceof Date) || Number.isNaN(r.createdAt.getTime())) bad('report.createdAt', r.createdAt, 'must be a valid Date');
}

const pct = (x: number) => `${(x * 100).toFixed(2)}%`;
const rows = (cells: string[][], numeric: boolean[] = []) =>
  cells.map((r) => `<tr>${r.map((c, i) => `<td${numeric[i] ? ' class="n"' : ''}>${c}</td>`).join('')}</tr>`).join('');

function transfersTable(t: readonly PurposeTotals[]): string {
  const total = (dir: string) =>
    t
      .filter((x) => x.direction === dir)
      .reduce((a, x) => ({ calls: a.calls + x.calls, transfers: a.transfers + x.transfers, bytes: a.bytes + x.bytes }), { calls: 0, transfers: 0, bytes: 0 });
  const body = t.map((x) => [
    `<span class="purpose" data-purpose="${esc(x.purpose)}" data-direction="${esc(x.direction)}" data-transfers="${x.transfers}" data-bytes="${x.bytes}">${esc(x.purpose)}</span>`,
    esc(x.direction),
    int(x.calls),
    int(x.transfers),
    int(x.bytes),
    esc(bytesText(x.bytes)),
    esc(x.what.join('; ')),
  ]);
  const sums = (['to device', 'to host'] as const).map((d) => {
    const s = total(d);
    return [`<b>all ${d}</b>`, '', int(s.calls), int(s.transfers), int(s.bytes), esc(bytesText(s.bytes)), ''];
  });
  return `<table id="transfers"><thead><tr><th>purpose</th><th>direction</th><th>calls</th><th>transfers</th><th>bytes</th><th></th><th>what moved</th></tr></thead><tbody>${rows([...body, ...sums], [false, false, true, true, true, true, false])}</tbody></table>`;
}

function pytorchTable(plan: Plan): string {
  let est;
  try {
    est = estimatePytorchMemory(plan.spec);
  } catch {
    return '<p>No PyTorch estimate for this network (its output layer or its ops).</p>';
  }
  const arena = arenaBytesByStage(plan);
  const k = plan.bytesByKind();
  const resident = k.xdata + k.ydata;
  const { full, compact } = fullAndCompact(plan);
  const body = est.stages.map((s, i) => [esc(s.stage), int(s.allocatedBytes), int(s.peakBytes), int(arena.stages[i]!.bytes)]);
  return `<table id="pytorch"><thead><tr><th>stage</th><th>PyTorch allocated after</th><th>PyTorch peak in stage</th><th>nn-arena regions (exact)</th></tr></thead><tbody>${rows(body, [false, true, true, true])}</tbody></table>
<p>Peak: PyTorch ${int(est.peakBytes)} B (estimated, first step, during ${esc(est.peakStage)}); nn-arena ${int(plan.totalBytes)} B${plan.spec.compact ? ' (compact plan)' : ''}, the whole arena allocated once${resident ? `, of which ${int(resident)} B hold the resident training set (${int(plan.spec.samples)} samples; PyTorch's figures hold one batch): ${int(plan.totalBytes - resident)} B without it` : ''}.</p>
<p id="plans">Without the data set: the full plan ${int(full.totalBytes - resident)} B = ${((full.totalBytes - resident) / est.peakBytes).toFixed(2)}x, the compact plan (regions never live together share bytes) ${int(compact.totalBytes - resident)} B = ${((compact.totalBytes - resident) / est.peakBytes).toFixed(2)}x PyTorch's peak. Estimate: <code>nn-arena plan --vs-pytorch</code>.</p>`;
}

export function trainingReportHtml(r: TrainingReport): string {
  checkReport(r);
  const s = r.plan.spec;
  const xs = r.progress.map((p) => p.epoch - 1 + p.batch / p.batches);
  const lossChart = lineChart({
    id: 'loss-chart',
    title: "training loss (mean over each report's batches)",
    xs,
    ys: r.progress.map((p) => p.loss),
    xLabel: 'epoch',
    format: (y) => y.toFixed(3),
    color: '#dc2626',
  });
  const accChart = lineChart({
    id: 'accuracy-chart',
    title: 'training accuracy',
    xs,
    ys: r.progress.map((p) => p.accuracy),
    xLabel: 'epoch',
    format: (y) => `${(y * 100).toFixed(1)}%`,
    color: '#16a34a',
  });
  // The learning rate when a schedule changes it; the gradient norm of every step when clipping.
  const lrs = r.progress.map((p) => p.lr ?? NaN);
  const lrChart =
    new Set(lrs).size > 1
      ? lineChart({
          id: 'lr-chart',
          title: 'learning rate (last step of each report)',
          xs,
          ys: lrs,
          xLabel: 'epoch',
          format: (y) => y.toExponential(2),
          color: '#7c3aed',
        })
      : '';
  const normXs: number[] = [],
    norms: number[] = [];
  r.progress.forEach((p, i) => {
    const n = p.gradNorms ?? [];
    const from = i > 0 ? xs[i - 1]! : 0;
    n.forEach((v, k) => {
      normXs.push(from + ((xs[i]! - from) * (k + 1)) / n.length);
      norms.push(v);
    });
  });
  const normChart = norms.length
    ? lineChart({
        id: 'grad-norm-chart',
        title: 'global gradient norm of each step (before clipping)',
        xs: normXs,
        ys: norms,
        xLabel: 'epoch',
        format: (y) => y.toPrecision(3),
        color: '#ea580c',
      })
    : '';
  // fp16: the dynamic loss scale (halved at each skipped step, grown after good ones).
  const scaleChart = r.progress.some((p) => p.lossScale !== undefined)
    ? lineChart({
        id: 'loss-scale-chart',
        title: 'loss scale (fp16), after each report',
        xs,
        ys: r.progress.map((p) => p.lossScale ?? NaN),
        xLabel: 'epoch',
        format: (y) => y.toExponential(2),
        color: '#0891b2',
      })
    : '';
  const m = r.machine;
  const machine = [
    ['CPU', esc(`${m.cpu}, ${m.cores} cores`)],
    ['memory', esc(bytesText(m.memoryBytes))],
    ['OS', esc(m.os)],
    ['Node.js', esc(m.node)],
    [
      'GPU',
      m.gpu
        ? esc(
            `${m.gpu.name} (compute ${m.gpu.computeCapability}, ${bytesText(m.gpu.memoryBytes)}, CUDA runtime ${m.gpu.runtimeVersion}, driver API ${m.gpu.driverVersion})`,
          )
        : esc(`none (${m.noGpu})`),
    ],
    ['backend', esc(`${r.backend} (${r.path})`)],
  ];
  const results = [
    ['test accuracy', r.test ? esc(`${pct(r.test.accuracy)} (loss ${r.test.loss.toFixed(4)}) on ${int(r.test.count)} held-out samples`) : '—'],
    ['last training report', esc(`${pct(r.train.accuracy)} (loss ${r.train.loss.toFixed(4)})`)],
    ['time', esc(`${r.seconds.toFixed(2)} s in all, ${r.train.seconds.toFixed(2)} s training, ${int(Math.round(r.train.samplesPerSecond))} samples/s`)],
    ['arena', esc(`${int(r.plan.totalBytes)} bytes (${bytesText(r.plan.totalBytes)}) in ${r.plan.regions.length} regions`)],
  ];
  const settings = Object.entries(r.settings).map(([k, v]) => [esc(k), esc(String(v))]);
  const title = `nn-arena training report: ${networkText(s.layers)}, ${s.optimizer}, batch ${s.batch}`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>${esc(title)}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1000px;color:#111;padding:0 12px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}.charts{display:flex;flex-wrap:wrap;gap:16px}
.c-title{font:600 12px sans-serif}.c-tick{font:10px sans-serif;fill:#555}.c-axis{font:11px sans-serif;fill:#333}
.map{overflow-x:auto}small{color:#555}
</style></head>
<body data-created="${esc(r.createdAt.toISOString())}">
<h1>${esc(title)}</h1>
<p><small>Written ${esc(r.createdAt.toISOString())} by <code>nn-arena train --report</code>.</small></p>
<h2>Results</h2><table id="results">${rows(results)}</table>
<h2>Loss and accuracy per progress report (${r.progress.length} reports)</h2>
<div class="charts">${lossChart}${accChart}${lrChart}${normChart}${scaleChart}</div>
<h2>Memory map</h2>
<div class="map">${planToSVG(r.plan)}</div>
<h2>Transfers by purpose</h2>
${transfersTable(r.transfers)}
<p><small>Counted by the native layer at each copy. "header" is Arena.create's copy of the header; "network" the first upload (what init wrote: weights, biases, optimizer state; never the still-empty data regions) and any later upload of the whole arena; "data" the resident training set and any per-batch uploads; "stats" the 32-byte reads of the loss and accuracy accumulators; "weights back" the download of the trained weights and biases (and a checkpoint's whole arena).</small></p>
<h2>Beside PyTorch</h2>
${pytorchTable(r.plan)}
<h2>Machine</h2><table id="machine">${rows(machine)}</table>
<h2>Settings</h2><table id="settings">${rows(settings)}</table>
</body></html>
`;
}
