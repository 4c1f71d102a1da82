// plan.ts: the one table that decides every region's size and offset. Sizes are computed in
// BigInt and must stay below 2^53 to be handed out as exact numbers; the native validator
// (csrc/core/validate.cc, expectedCount) checks the same shapes from the header side.
import { LayoutError } from '../errors.js';
import { ACTIVATIONS, DTYPE_BYTES, HEADER_SIZE, KINDS, KIND_INDEX, LAYER_SIZE, STATS_COUNT, encodeHeader, type Kind } from './header.js';
import { normalizeSpec, type LayoutSpec, type NormalizedSpec } from './spec.js';

export interface Region {
  readonly layer: number;
  readonly kind: Kind;
  /** Bytes from the arena base; a multiple of the plan's align. */
  readonly offset: number;
  readonly bytes: number;
  /** Elements of the plan's dtype. */
  readonly length: number;
}

export type BytesByKind = Readonly<Record<Kind | 'header' | 'padding', number>>;

export interface Plan {
  readonly spec: NormalizedSpec;
  readonly totalBytes: number;
  /** Header struct + layer table + padding up to the first region. */
  readonly headerBytes: number;
  /** Every region in offset order. */
  readonly regions: readonly Region[];
  /** The encoded header: exactly what the arena holds at offset 0. */
  readonly header: Uint8Array;
  region(layer: number, kind: Kind): Region | undefined;
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

const DATA_KINDS: readonly Kind[] = ['xdata', 'ydata'];
const NETWORK_KINDS = KINDS.filter((k) => !DATA_KINDS.includes(k));

/** Placement order: layer-major keeps each layer's regions together (one range per layer);
 *  kind-major keeps each kind together (all weights one range). The resident data set goes
 *  last in both, so it never splits a layer's range. */
function placementOrder(s: NormalizedSpec): Array<[number, Kind]> {
  const layers = s.layers.map((_, l) => l);
  const network: Array<[number, Kind]> = s.order === 'layer-major'
    ? layers.flatMap((l) => NETWORK_KINDS.map((k): [number, Kind] => [l, k]))
    : NETWORK_KINDS.flatMap((k) => layers.map((l): [number, Kind] => [l, k]));
  return [...network, ...DATA_KINDS.flatMap((k) => layers.map((l): [number, Kind] => [l, k]))];
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
  const headerBytes = alignUp(BigInt(HEADER_SIZE + s.layers.length * LAYER_SIZE), align);

  let cursor = headerBytes;
  const regions: Region[] = [];
  for (const [layer, kind] of placementOrder(s)) {
    const length = regionCount(s, layer, kind);
    if (length === 0n) continue;
    const bytes = length * elem;
    regions.push({ layer, kind, offset: exact(cursor, 'a region offset', s), bytes: exact(bytes, `region ${kind} of layer ${layer}`, s), length: exact(length, 'a region length', s) });
    cursor = alignUp(cursor + bytes, align);
  }
  const totalBytes = exact(cursor, 'the arena', s);

  const byKey = new Map(regions.map((r) => [`${r.layer}:${r.kind}`, Object.freeze(r)]));
  const header = encodeHeader({
    dtype: s.dtype, order: s.order, optimizer: s.optimizer, batch: s.batch, samples: s.samples, align: s.align,
    headerBytes: Number(headerBytes), totalBytes,
    layers: s.layers.map((units, l) => ({
      units, fanIn: l > 0 ? s.layers[l - 1]! : 0,
      activation: l === 0 ? ACTIVATIONS.input : ACTIVATIONS[s.activations[l - 1]!],
      regions: KINDS.map((k) => { const r = byKey.get(`${l}:${k}`); return [r?.offset ?? 0, r?.length ?? 0] as const; }),
    })),
  });

  const byKind = Object.fromEntries([...KINDS, 'header', 'padding'].map((k) => [k, 0])) as Record<Kind | 'header' | 'padding', number>;
  for (const r of regions) byKind[r.kind] += r.bytes;
  byKind.header = HEADER_SIZE + s.layers.length * LAYER_SIZE;
  byKind.padding = totalBytes - regions.reduce((a, r) => a + r.bytes, 0) - byKind.header;
  Object.freeze(byKind);

  return Object.freeze({
    spec: s,
    totalBytes,
    headerBytes: Number(headerBytes),
    regions: Object.freeze(regions),
    header,
    region: (layer: number, kind: Kind) => {
      if (!Object.prototype.hasOwnProperty.call(KIND_INDEX, kind)) throw new LayoutError('BAD_KIND', 'kind', kind, `must be one of ${KINDS.join(', ')}`);
      return byKey.get(`${layer}:${kind}`);
    },
    bytesByKind: () => byKind,
  });
}
