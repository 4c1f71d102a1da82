// plan.ts: the one table that decides every region's size and offset. Sizes are computed in
// BigInt and must stay below 2^53 to be handed out as exact numbers; the native validator
// (csrc/core/validate.cc, expectedCount) checks the same shapes from the header side.
import { LayoutError } from '../errors.js';
import { ACTIVATIONS, DTYPE_BYTES, KINDS, KIND_INDEX, STATS_COUNT, encodeHeader, headerTableBytes, perModel, type Kind } from './header.js';
import { normalizeSpec, type LayoutSpec, type NormalizedExtra, type NormalizedSpec } from './spec.js';

interface RegionBase {
  /** Bytes from the arena base; a multiple of the plan's align. */
  readonly offset: number;
  readonly bytes: number;
  /** Elements of the plan's dtype of ONE model's copy (the header's count); bytes for a user
   *  region of raw bytes. */
  readonly length: number;
  /** Copies: the plan's models for a per-model region, 1 for a shared one (z[0], y, data). */
  readonly models: number;
  /** Bytes from one model's copy to the next (0 with one copy); `bytes` spans every copy. */
  readonly stride: number;
}

/** A region of a built-in kind. */
export interface KindRegion extends RegionBase {
  readonly layer: number;
  readonly kind: Kind;
  readonly extra?: undefined;
}

/** A region of a user region (spec.extra[extra]); `kind` is its name. */
export interface ExtraRegion extends RegionBase {
  /** -1 for a global region (raw bytes), which belongs to no layer. */
  readonly layer: number;
  readonly kind: string;
  /** Index of the user region in spec.extra (and in the header's kind table). */
  readonly extra: number;
}

export type Region = KindRegion | ExtraRegion;

/** Bytes per built-in kind, 'header' (struct, layer table, kind table), 'padding', and per user
 *  region name. */
export type BytesByKind = Readonly<Record<Kind | 'header' | 'padding', number>> & Readonly<Record<string, number>>;

export interface Plan {
  readonly spec: NormalizedSpec;
  readonly totalBytes: number;
  /** Header struct + layer table + padding up to the first region. */
  readonly headerBytes: number;
  /** Every region in offset order (built-in kinds and user regions). */
  readonly regions: readonly Region[];
  /** The encoded header: exactly what the arena holds at offset 0. */
  readonly header: Uint8Array;
  /** Region (layer, kind) of a built-in kind or a per-layer user region; undefined where that
   *  layer has none. A global user region: layer -1 (or find(name)). */
  region(layer: number, kind: string): Region | undefined;
  /** The regions of a built-in kind or a user region, by name, in layer order ([] for an unknown name). */
  find(name: string): readonly Region[];
  bytesByKind(): BytesByKind;
}

/** Element count of (layer, kind); 0 where the layer has no such region. Mirrors validate.cc. */
function regionCount(s: NormalizedSpec, l: number, kind: Kind): bigint {
  const L = s.layers.length;
  const units = BigInt(s.layers[l]!);
  const fanIn = l > 0 ? BigInt(s.layers[l - 1]!) : 0n;
  const hidden = l > 0;
  const last = l === L - 1;
  const opt1 = s.optimizer !== 'sgd';
  const opt2 = s.optimizer === 'adam';
  switch (kind) {
    case 'z': return BigInt(s.batch) * units;
    case 'd': return hidden ? BigInt(s.batch) * units : 0n;
    case 'y': return last ? BigInt(s.batch) * units : 0n;
    case 'b': case 'db': return hidden ? units : 0n;
    case 'w': case 'dw': return hidden ? units * fanIn : 0n;
    case 'mb': return hidden && opt1 ? units : 0n;
    case 'mw': return hidden && opt1 ? units * fanIn : 0n;
    case 'vb': return hidden && opt2 ? units : 0n;
    case 'vw': return hidden && opt2 ? units * fanIn : 0n;
    case 'xdata': return l === 0 ? BigInt(s.samples) * units : 0n;
    case 'ydata': return last ? BigInt(s.samples) * units : 0n;
    case 'stats': return last ? BigInt(STATS_COUNT) : 0n;
  }
}

/** Count of user region `e` in layer l (-1: a global one): the count of the kind it is shaped
 *  like where it is planned, else 0. Mirrors checkExtras in validate.cc. */
function extraCount(s: NormalizedSpec, e: NormalizedExtra, l: number): bigint {
  if (e.like === undefined) return l === -1 ? BigInt(e.bytes) : 0n;
  return l >= 0 && e.layers.includes(l) ? regionCount(s, l, e.like) : 0n;
}

const DATA_KINDS: readonly Kind[] = ['xdata', 'ydata'];
const NETWORK_KINDS = KINDS.filter((k) => !DATA_KINDS.includes(k));

/** A slot of the placement order: a built-in kind, or user region `extra` (layer -1: global). */
type Slot = readonly [layer: number, kind: Kind, extra?: undefined] | readonly [layer: number, kind: undefined, extra: number];

/** Placement order: layer-major keeps each layer's regions together (one range per layer, its
 *  user regions after its built-in ones); kind-major keeps each kind together (all weights one
 *  range; user regions after the built-in kinds). Global user regions follow the network, and the
 *  resident data set goes last in both, so it never splits a layer's range. */
function placementOrder(s: NormalizedSpec): Slot[] {
  const layers = s.layers.map((_, l) => l);
  const perLayer = s.extra.flatMap((e, i) => (e.like === undefined ? [] : [i]));
  const global = s.extra.flatMap((e, i) => (e.like === undefined ? [i] : []));
  const network: Slot[] = s.order === 'layer-major'
    ? layers.flatMap((l) => [...NETWORK_KINDS.map((k): Slot => [l, k]), ...perLayer.map((i): Slot => [l, undefined, i])])
    : [...NETWORK_KINDS.flatMap((k) => layers.map((l): Slot => [l, k])), ...perLayer.flatMap((i) => layers.map((l): Slot => [l, undefined, i]))];
  return [...network, ...global.map((i): Slot => [-1, undefined, i]), ...DATA_KINDS.flatMap((k) => layers.map((l): Slot => [l, k]))];
}

const alignUp = (x: bigint, a: bigint) => ((x + a - 1n) / a) * a;

function exact(x: bigint, what: string, spec: NormalizedSpec): number {
  if (x > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new LayoutError('TOO_LARGE', 'layers', spec.layers, `${what} of ${x} bytes exceeds 2^53 - 1, the largest exact size`);
  }
  return Number(x);
}

export function planLayout(input: LayoutSpec): Plan {
  const s = normalizeSpec(input);
  const elem = BigInt(DTYPE_BYTES[s.dtype]);
  const align = BigInt(s.align);
  const tableBytes = headerTableBytes(s.layers.length, s.extra);
  const headerBytes = alignUp(BigInt(tableBytes), align);

  let cursor = headerBytes;
  const regions: Region[] = [];
  for (const [layer, kind, extra] of placementOrder(s)) {
    const e = extra === undefined ? undefined : s.extra[extra]!;
    const length = e ? extraCount(s, e, layer) : regionCount(s, layer, kind!);
    if (length === 0n) continue;
    // K models: a per-model region holds K copies back to back, each starting aligned
    // (nna_region_stride in nn_arena.h); shared regions one copy. User regions are refused with
    // models > 1 (spec.ts), so they always have one copy.
    const copies = !e && s.models > 1 && perModel(layer, kind!) ? BigInt(s.models) : 1n;
    const one = e && e.like === undefined ? length : length * elem;  // raw bytes: count is bytes
    const stride = copies > 1n ? alignUp(one, align) : 0n;
    const bytes = (copies - 1n) * stride + one;
    const name = e ? e.name : kind!;
    const at = {
      offset: exact(cursor, 'a region offset', s), bytes: exact(bytes, `region ${name} of layer ${layer}`, s), length: exact(length, 'a region length', s),
      models: Number(copies), stride: exact(stride, 'a model stride', s),
    };
    regions.push(e ? { layer, kind: e.name, extra: extra!, ...at } : { layer, kind: kind!, ...at });
    cursor = alignUp(cursor + bytes, align);
  }
  const totalBytes = exact(cursor, 'the arena', s);

  const byKey = new Map(regions.map((r) => [`${r.layer}:${r.kind}`, Object.freeze(r)]));
  const byName = new Map<string, Region[]>();
  for (const r of [...regions].sort((a, b) => a.layer - b.layer)) byName.set(r.kind, [...(byName.get(r.kind) ?? []), byKey.get(`${r.layer}:${r.kind}`)!]);
  for (const list of byName.values()) Object.freeze(list);
  const entry = (l: number, name: string): readonly [number, number] => { const r = byKey.get(`${l}:${name}`); return [r?.offset ?? 0, r?.length ?? 0]; };
  const header = encodeHeader({
    dtype: s.dtype, order: s.order, optimizer: s.optimizer, batch: s.batch, samples: s.samples, align: s.align, models: s.models,
    headerBytes: Number(headerBytes), totalBytes,
    layers: s.layers.map((units, l) => ({
      units, fanIn: l > 0 ? s.layers[l - 1]! : 0,
      activation: l === 0 ? ACTIVATIONS.input : ACTIVATIONS[s.activations[l - 1]!],
      regions: KINDS.map((k) => entry(l, k)),
    })),
    extras: s.extra.map((e) => ({
      name: e.name, like: e.like, elemBytes: e.like === undefined ? 1 : DTYPE_BYTES[s.dtype],
      regions: e.like === undefined ? [entry(-1, e.name)] : s.layers.map((_, l) => entry(l, e.name)),
    })),
  });

  const byKind: Record<string, number> = Object.fromEntries([...KINDS, 'header', 'padding', ...s.extra.map((e) => e.name)].map((k) => [k, 0]));
  // Bytes held by the copies; padding between one model's copy and the next counts as padding.
  const held = (r: Region) => (r.models === 1 ? r.bytes : r.models * r.length * DTYPE_BYTES[s.dtype]);
  for (const r of regions) byKind[r.kind]! += held(r);
  byKind.header = tableBytes;
  byKind.padding = totalBytes - regions.reduce((a, r) => a + held(r), 0) - byKind.header;
  Object.freeze(byKind);

  return Object.freeze({
    spec: s,
    totalBytes,
    headerBytes: Number(headerBytes),
    regions: Object.freeze(regions),
    header,
    region: (layer: number, kind: string) => {
      if (!Object.prototype.hasOwnProperty.call(KIND_INDEX, kind) && !s.extra.some((e) => e.name === kind)) {
        throw new LayoutError('BAD_KIND', 'kind', kind, `must be one of ${[...KINDS, ...s.extra.map((e) => e.name)].join(', ')}`);
      }
      return byKey.get(`${layer}:${kind}`);
    },
    find: (name: string) => byName.get(name) ?? [],
    bytesByKind: () => byKind as BytesByKind,
  });
}
