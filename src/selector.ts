// selector.ts: which regions a transfer, prefetch or advice touches, as the fewest byte ranges.
import { OptionError } from './errors.js';
import { KINDS, KIND_INDEX, type Kind } from './layout/header.js';
import type { Plan } from './layout/plan.js';

export type SelectorKind = Kind | 'header';

export interface Selector {
  /** Kinds to include ('header' = the header bytes). Default: every kind. */
  kinds?: readonly SelectorKind[];
  /** Layers to include. Default: every layer. */
  layers?: readonly number[];
}

export interface ByteRange { offset: number; bytes: number }

function checkSelector(plan: Plan, sel: Selector): void {
  if (sel === null || typeof sel !== 'object') throw new OptionError('BAD_SELECTOR', 'selector', sel, 'must be an object { kinds?, layers? }');
  for (const k of sel.kinds ?? []) {
    if (k !== 'header' && !Object.prototype.hasOwnProperty.call(KIND_INDEX, k)) {
      throw new OptionError('BAD_SELECTOR', 'selector.kinds', k, `is not a kind (expected header, ${KINDS.join(', ')})`);
    }
  }
  const L = plan.spec.layers.length;
  for (const l of sel.layers ?? []) {
    if (!Number.isInteger(l) || l < 0 || l >= L) throw new OptionError('BAD_SELECTOR', 'selector.layers', l, `is not a layer index in [0, ${L - 1}]`);
  }
}

/**
 * Byte ranges covering the selected regions. No selector: the whole arena, one range.
 * Regions that follow each other with no unselected region between them merge into one range
 * (the alignment padding between them is copied along; it belongs to no region).
 */
export function selectRanges(plan: Plan, sel?: Selector): ByteRange[] {
  if (sel === undefined) return [{ offset: 0, bytes: plan.totalBytes }];
  checkSelector(plan, sel);
  const kinds = sel.kinds ? new Set<SelectorKind>(sel.kinds) : undefined;
  const layers = sel.layers ? new Set(sel.layers) : undefined;
  const all = [
    { offset: 0, bytes: plan.headerBytes, selected: kinds ? kinds.has('header') : !layers },
    ...plan.regions.map((r) => ({ offset: r.offset, bytes: r.bytes, selected: (!kinds || kinds.has(r.kind)) && (!layers || layers.has(r.layer)) })),
  ];
  const out: ByteRange[] = [];
  let open: ByteRange | undefined;
  for (const r of all) {
    if (!r.selected) { open = undefined; continue; }
    if (open) open.bytes = r.offset + r.bytes - open.offset;
    else out.push((open = { offset: r.offset, bytes: r.bytes }));
  }
  return out;
}

export const flatten = (ranges: readonly ByteRange[]): number[] => ranges.flatMap((r) => [r.offset, r.bytes]);
