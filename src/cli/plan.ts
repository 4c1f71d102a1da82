// plan.ts (CLI): `nn-arena plan` prints the region table and the totals by kind.
import type { Plan } from '../layout/plan.js';
import { bytes, int, table } from './format.js';

/** The plan's totals by kind (user regions by name, after the built-in kinds); with `only` (a
 *  checkpoint's saved kinds and user regions), just those. */
export function planSummary(plan: Plan, only?: readonly string[]): string {
  const s = plan.spec;
  const totals = plan.bytesByKind();
  const kinds = Object.entries(totals).filter(([k, b]) => b > 0 && (!only || only.includes(k)));
  return [
    `network ${s.layers.join('-')}  batch ${s.batch}  ${s.dtype}  ${s.optimizer}  ${s.order}  align ${s.align}${s.samples ? `  samples ${s.samples}` : ''}${s.compact ? '  compact' : ''}`,
    `arena ${int(plan.totalBytes)} bytes (${bytes(plan.totalBytes)}) in ${plan.regions.length} regions${s.compact ? `; ${plan.shared.length} of them share ${int(totals.shared)} bytes with regions never live at the same time` : ''}`,
    ...s.extra.map(
      (e) =>
        `user region ${e.name}: ${e.bytes !== undefined ? `${int(e.bytes)} raw bytes, global` : `like ${e.like} in layer${e.layers.length > 1 ? 's' : ''} ${e.layers.join(', ')}`}`,
    ),
    table([['kind', 'bytes', ''], ...kinds.map(([k, b]) => [k, int(b), bytes(b)])], [false, true, true]),
  ].join('\n');
}

export function regionTable(plan: Plan): string {
  // A compact plan: which regions each one shares bytes with.
  const shares = new Map(plan.shared.map((s) => [s.region, s.with.map((q) => `${q.kind}[${q.layer}]`).join(' ')]));
  const head = ['layer', 'kind', 'offset', 'bytes', 'length', ...(plan.spec.compact ? ['shares bytes with'] : [])];
  return table(
    [
      head,
      ...plan.regions.map((r) => [
        r.layer < 0 ? '-' : String(r.layer),
        r.extra !== undefined ? `${r.kind} (user)` : r.kind,
        int(r.offset),
        int(r.bytes),
        int(r.length),
        ...(plan.spec.compact ? [shares.get(r) ?? ''] : []),
      ]),
    ],
    [true, false, true, true, true, false],
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
    ...(plan.spec.compact
      ? { shared: plan.shared.map((s) => ({ layer: s.region.layer, kind: s.region.kind, with: s.with.map((q) => ({ layer: q.layer, kind: q.kind })) })) }
      : {}),
  };
}
