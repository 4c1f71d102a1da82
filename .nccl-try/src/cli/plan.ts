// plan.ts (CLI): `nn-arena plan` prints the region table and the totals by kind.
import type { Plan } from '../layout/plan.js';
import { bytes, int, table } from './format.js';

/** The plan's totals by kind; with `only` (a checkpoint's saved kinds), just those. */
export function planSummary(plan: Plan, only?: readonly string[]): string {
  const s = plan.spec;
  const totals = plan.bytesByKind();
  const kinds = Object.entries(totals).filter(([k, b]) => b > 0 && (!only || only.includes(k)));
  return [
    `network ${s.layers.join('-')}  batch ${s.batch}  ${s.dtype}  ${s.optimizer}  ${s.order}  align ${s.align}${s.samples ? `  samples ${s.samples}` : ''}`,
    `arena ${int(plan.totalBytes)} bytes (${bytes(plan.totalBytes)}) in ${plan.regions.length} regions`,
    table([['kind', 'bytes', ''], ...kinds.map(([k, b]) => [k, int(b), bytes(b)])], [false, true, true]),
  ].join('\n');
}

export function regionTable(plan: Plan): string {
  return table(
    [['layer', 'kind', 'offset', 'bytes', 'length'], ...plan.regions.map((r) => [String(r.layer), r.kind, int(r.offset), int(r.bytes), int(r.length)])],
    [true, false, true, true, true],
  );
}

export function planJson(plan: Plan, only?: readonly string[]): object {
  const byKind = Object.fromEntries(Object.entries(plan.bytesByKind()).filter(([k]) => !only || only.includes(k)));
  return {
    spec: plan.spec,
    totalBytes: plan.totalBytes,
    headerBytes: plan.headerBytes,
    bytesByKind: byKind,
    regions: plan.regions,
  };
}
