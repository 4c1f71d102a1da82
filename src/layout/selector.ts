// selector.ts: which regions a transfer, prefetch or advice touches, as the fewest byte ranges.
import { OptionError } from '../core/errors.js';
import { KINDS, KIND_INDEX, type Kind } from './header.js';
import { requirePlan, type Plan } from './plan.js';

/** A built-in kind, 'header', or the name of a user region of the plan. */
export type SelectorKind = Kind | 'header' | (string & {});

export interface Selector {
  /** Kinds to include ('header' = the header bytes; user regions by name). Default: every kind. */
  kinds?: readonly SelectorKind[];
  /** Layers to include. Default: every layer. A global user region, like the header, belongs to
   *  no layer: it is selected by naming it in `kinds` (or by a selector of neither). */
  layers?: readonly number[];
}

export interface ByteRange {
  offset: number;
  bytes: number;
}

interface SelectorSnapshot {
  kinds: Set<SelectorKind> | undefined;
  layers: Set<number> | undefined;
}

/** Reads an optional array field of the selector once: its length, then each element once. */
function readList(field: string, v: unknown): unknown[] | undefined {
  if (v === undefined) return undefined;
  if (!Array.isArray(v)) throw new OptionError('BAD_SELECTOR', `selector.${field}`, v, 'must be an array');
  const n: unknown = v.length;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n > 2 ** 16)
    throw new OptionError('BAD_SELECTOR', `selector.${field}.length`, n, 'must be at most 65536');
  const out: unknown[] = [];
  for (let i = 0; i < n; i++) out.push(v[i]);
  return out;
}

/** The selector read once into a plain snapshot, checked; only the snapshot is used. */
function readSelector(plan: Plan, sel: unknown): SelectorSnapshot {
  if (sel === null || typeof sel !== 'object') throw new OptionError('BAD_SELECTOR', 'selector', sel, 'must be an object { kinds?, layers? }');
  const { kinds: rawKinds, layers: rawLayers } = sel as Selector;
  const kinds = readList('kinds', rawKinds);
  const layers = readList('layers', rawLayers);
  const extras = plan.spec.extra.map((e) => e.name);
  for (const k of kinds ?? []) {
    if (k !== 'header' && (typeof k !== 'string' || (!Object.prototype.hasOwnProperty.call(KIND_INDEX, k) && !extras.includes(k)))) {
      throw new OptionError('BAD_SELECTOR', 'selector.kinds', k, `is not a kind (expected header, ${[...KINDS, ...extras].join(', ')})`);
    }
  }
  const L = plan.spec.layers.length;
  for (const l of layers ?? []) {
    if (typeof l !== 'number' || !Number.isInteger(l) || l < 0 || l >= L)
      throw new OptionError('BAD_SELECTOR', 'selector.layers', l, `is not a layer index in [0, ${L - 1}]`);
  }
  return { kinds: kinds && new Set(kinds as SelectorKind[]), layers: layers && new Set(layers as number[]) };
}

/**
 * Byte ranges covering the selected regions. No selector: the whole arena, one range.
 * Regions that follow each other with no unselected region between them merge into one range
 * (the alignment padding between them is copied along; it belongs to no region). In a compact
 * plan a selected region's bytes go even where another region shares them.
 */
export function selectRanges(plan: Plan, sel?: Selector): ByteRange[] {
  requirePlan(plan);
  if (sel === undefined) return [{ offset: 0, bytes: plan.totalBytes }];
  const { kinds, layers } = readSelector(plan, sel);
  const all = [
    { offset: 0, bytes: plan.headerBytes, selected: kinds ? kinds.has('header') : !layers },
    ...plan.regions.map((r) => ({
      offset: r.offset,
      bytes: r.bytes,
      selected: r.layer < 0 ? (kinds ? kinds.has(r.kind) : !layers) : (!kinds || kinds.has(r.kind)) && (!layers || layers.has(r.layer)),
    })),
  ];
  // In a compact plan regions overlap: a range grows over what it already covers, an unselected
  // region that reaches past it closes it, and a new range starts past the bytes already sent.
  const out: ByteRange[] = [];
  let open: ByteRange | undefined;
  let reach = 0; // end of the ranges so far
  for (const r of all) {
    const end = r.offset + r.bytes;
    if (!r.selected) {
      if (!open || end > open.offset + open.bytes) open = undefined;
      continue;
    }
    if (open) open.bytes = Math.max(open.bytes, end - open.offset);
    else if (end > reach) out.push((open = { offset: Math.max(r.offset, reach), bytes: end - Math.max(r.offset, reach) }));
    reach = Math.max(reach, end);
  }
  return out;
}

export const flatten = (ranges: readonly ByteRange[]): number[] => ranges.flatMap((r) => [r.offset, r.bytes]);
