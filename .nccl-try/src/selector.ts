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

interface SelectorSnapshot { kinds: Set<SelectorKind> | undefined; layers: Set<number> | undefined }

/** Reads an optional array field of the selector once: its length, then each element once. */
function readList(field: string, v: unknown): unknown[] | undefined {
  if (v === undefined) return undefined;
  if (!Array.isArray(v)) throw new OptionError('BAD_SELECTOR', `selector.${field}`, v, 'must be an array');
  const n: unknown = v.length;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n > 2 ** 16) throw new OptionError('BAD_SELECTOR', `selector.${field}.length`, n, 'must be at most 65536');
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
  for (const k of kinds ?? []) {
    if (k !== 'header' && (typeof k !== 'string' || !Object.prototype.hasOwnProperty.call(KIND_INDEX, k))) {
      throw new OptionError('BAD_SELECTOR', 'selector.kinds', k, `is not a kind (expected header, ${KINDS.join(', ')})`);
    }
  }
  const L = plan.spec.layers.length;
  for (const l of layers ?? []) {
    if (typeof l !== 'number' || !Number.isInteger(l) || l < 0 || l >= L) throw new OptionError('BAD_SELECTOR', 'selector.layers', l, `is not a layer index in [0, ${L - 1}]`);
  }
  return { kinds: kinds && new Set(kinds as SelectorKind[]), layers: layers && new Set(layers as number[]) };
}

/**
 * Byte ranges covering the selected regions. No selector: the whole arena, one range.
 * Regions that follow each other with no unselected region between them merge into one range
 * (the alignment padding between them is copied along; it belongs to no region).
 */
export function selectRanges(plan: Plan, sel?: Selector): ByteRange[] {
  if (sel === undefined) return [{ offset: 0, bytes: plan.totalBytes }];
  const { kinds, layers } = readSelector(plan, sel);
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
