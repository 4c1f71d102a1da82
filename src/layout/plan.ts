// plan.ts: the one table that decides every region's offset. What each region is comes from the
// native rules (the addon's regionRules): its element count (csrc/core/validate.cc expectedCount,
// which the validator checks headers with), whether it keeps its bytes after a run
// (aliasing.cc outlivesRun) and whether each model has a copy (nna_kind_per_model); sizes are
// BigInt and must stay below 2^53 to be exact numbers.
import { LayoutError } from '../core/errors.js';
import { call, native, OPS, REGION_FLAGS, type PlannerShape } from '../native/addon.js';
import { ACTIVATIONS, DTYPE_BYTES, FLAGS, KINDS, KIND_INDEX, OP_CODES, encodeHeader, headerTableBytes, type Dtype, type Kind } from './header.js';
import { optimizerNamed } from './optimizers.js';
import { opParams } from './ops/index.js';
import { normalizeSpec, type DtypeOf, type EmbeddingOp, type LayerSpec, type LayoutSpec, type NormalizedExtra, type NormalizedSpec } from './spec.js';

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

/** Bytes per built-in kind, 'header' (struct, layer table, kind table), 'padding', per user
 *  region name, and 'shared': bytes counted under more than one region (a compact plan), so that
 *  the kinds + user regions + header + padding - shared = totalBytes. */
export type BytesByKind = Readonly<Record<Kind | 'header' | 'padding' | 'shared', number>> & Readonly<Record<string, number>>;

/** A plan of element type D (its spec's dtype): an Arena of it gives views of that type. */
export interface Plan<D extends Dtype = Dtype> {
  readonly spec: NormalizedSpec<D>;
  readonly totalBytes: number;
  /** Header struct + layer table + padding up to the first region. */
  readonly headerBytes: number;
  /** Every region in offset order (built-in kinds and user regions; in a compact plan, built-in
   *  regions that share bytes overlap: a user region never does). */
  readonly regions: readonly Region[];
  /** Regions of a compact plan that share bytes with another, each with the ones it shares with. */
  readonly shared: ReadonlyArray<{ readonly region: Region; readonly with: readonly Region[] }>;
  /** The encoded header: exactly what the arena holds at offset 0. */
  readonly header: Uint8Array;
  /** Region (layer, kind) of a built-in kind or a per-layer user region; undefined where that
   *  layer has none. A global user region: layer -1 (or find(name)). */
  region(layer: number, kind: string): Region | undefined;
  /** The regions of a built-in kind or a user region, by name, in layer order ([] for an unknown name). */
  find(name: string): readonly Region[];
  bytesByKind(): BytesByKind;
}

/** `value` as a Plan (what planLayout returns), else LayoutError BAD_PLAN naming `field`: the
 *  one check every function that takes a plan makes before it reads one. */
export function requirePlan(value: unknown, field = 'plan'): Plan {
  const p = value as Partial<Plan> | null;
  const ok =
    p !== null &&
    typeof p === 'object' &&
    p.header instanceof Uint8Array &&
    Array.isArray(p.regions) &&
    Number.isSafeInteger(p.totalBytes) &&
    typeof p.spec === 'object' &&
    p.spec !== null &&
    typeof p.region === 'function' &&
    typeof p.bytesByKind === 'function';
  if (!ok) throw new LayoutError('BAD_PLAN', field, value, 'must be a plan from planLayout()');
  return p as Plan;
}

/** The spec's shape as the native rules take it (region counts, the phase table). */
export function plannerShape(s: NormalizedSpec): PlannerShape {
  return {
    batch: s.batch,
    samples: s.samples,
    optimizer: optimizerNamed(s.optimizer)!.code,
    compact: s.compact,
    models: s.models,
    extras: s.extra.length,
    units: [...s.layers],
    activations: s.layers.map((_, l) => (l === 0 ? ACTIVATIONS.input : ACTIVATIONS[s.activations[l - 1]!])),
    ...(s.ops ? { ops: [OP_CODES.dense, ...s.ops.map((o) => OP_CODES[o.op])], opFrom: [0, ...s.ops.map((o) => opParams(o).from)] } : {}),
    ...(embeddingOf(s) ? { embedding: embeddingOf(s)!.categorical } : {}),
  };
}

/** Layer 1's embedding, where it is one. */
function embeddingOf(s: NormalizedSpec): EmbeddingOp | undefined {
  const o = s.ops?.[0];
  return o?.op === 'embedding' ? o : undefined;
}

/** Layer l's entry of the op parameter table: eps or p, residual's from, an embedding's numeric
 *  columns (its column count: encodeHeader, from the column table). */
function layerOpParams(s: NormalizedSpec, l: number): { op: number; opValue: number; opFrom: number } {
  const o = (l > 0 ? s.ops?.[l - 1] : undefined) ?? { op: 'dense' };
  const p = opParams(o);
  return { op: OP_CODES[o.op], opValue: p.value, opFrom: p.from };
}

/** The native rules of a shape's regions, asked once per plan: count (2^64 - 1 where one
 *  overflows: then TOO_LARGE below) and the REGION_FLAGS bits of (layer, kind). */
interface RegionRules {
  count(l: number, kind: Kind): bigint;
  has(l: number, kind: Kind, flag: number): boolean;
}
function regionRules(s: NormalizedSpec, shape: PlannerShape): RegionRules {
  const { counts, flags } = call(() => native().regionRules(shape), { compact: s.compact, extra: s.extra.map((e) => e.name) });
  const at = (l: number, kind: Kind) => l * KINDS.length + KIND_INDEX[kind];
  return { count: (l, kind) => counts[at(l, kind)]!, has: (l, kind, flag) => (flags[at(l, kind)]! & flag) !== 0 };
}

/** Count of user region `e` in layer l (-1: a global one): where it is planned, the count of the
 *  kind it is shaped like (what `like` means, nn_arena.h); raw bytes: its bytes. */
function extraCount(rules: RegionRules, e: NormalizedExtra, l: number): bigint {
  if (e.like === undefined) return l === -1 ? BigInt(e.bytes) : 0n;
  return l >= 0 && e.layers.includes(l) ? rules.count(l, e.like) : 0n;
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
  const network: Slot[] =
    s.order === 'layer-major'
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

/** Live intervals of every region in every run a compact arena can make, from the native phase
 *  table (csrc/train/phases.cc; the native replay, aliasing.cc, walks the same runs): per
 *  region, [first, last] phase index per run (-1 when unused), or null when the region must keep
 *  its bytes (it outlives a run, or is read before it is written). */
function liveness(s: NormalizedSpec, shape: PlannerShape, rules: RegionRules, keys: readonly string[]): Map<string, Int32Array | null> {
  const runs: Array<[keyof typeof OPS, boolean, boolean]> = [];
  for (const op of ['train', 'eval', 'forward'] as const)
    for (const resident of s.samples > 0 ? [false, true] : [false]) for (const fused of [false, true]) runs.push([op, resident, fused]);
  const live = new Map<string, Int32Array | null>();
  for (const key of keys) {
    const [l, k] = key.split(':') as [string, Kind];
    live.set(key, rules.has(Number(l), k, REGION_FLAGS.outlivesRun) ? null : new Int32Array(runs.length * 2).fill(-1));
  }
  runs.forEach(([op, resident, fused], r) => {
    call(() => native().stepPhases(shape, OPS[op], resident, fused)).forEach((ph, i) => {
      for (const [layer, kind, reads] of ph.uses) {
        const key = `${layer}:${kind}`;
        const iv = live.get(key);
        if (!iv) continue;
        if (iv[2 * r]! < 0) {
          if (reads) {
            live.set(key, null);
            continue;
          } // its value comes from before the run
          iv[2 * r] = i;
        }
        iv[2 * r + 1] = i;
      }
    });
  });
  return live;
}

const overlapsInTime = (a: Int32Array, b: Int32Array) => {
  for (let r = 0; r < a.length; r += 2) if (a[r]! >= 0 && b[r]! >= 0 && a[r]! <= b[r + 1]! && b[r]! <= a[r + 1]!) return true;
  return false;
};

/** Plans a spec; the plan's type carries the dtype (float32 unless the spec says otherwise), so
 *  views of an arena of it are Float32Array or Float64Array without a cast. */
export function planLayout<S extends LayoutSpec<LayerSpec>>(input: S): Plan<DtypeOf<S>>;
export function planLayout(input: LayoutSpec<LayerSpec>): Plan {
  const s = normalizeSpec(input);
  const elem = BigInt(DTYPE_BYTES[s.dtype]);
  const align = BigInt(s.align);
  const tableBytes = headerTableBytes(s.layers.length, s.extra, s.ops !== undefined, embeddingOf(s)?.categorical.length ?? 0);
  const headerBytes = alignUp(BigInt(tableBytes), align);

  const shape = plannerShape(s);
  const rules = regionRules(s, shape);
  const order = placementOrder(s).filter(([l, k, x]) => (x === undefined ? rules.count(l, k!) : extraCount(rules, s.extra[x]!, l)) > 0n);
  // Compact: regions with a live interval are placed after the kept ones (and the user regions),
  // sharing bytes.
  const live = s.compact
    ? liveness(
        s,
        shape,
        rules,
        order.flatMap(([l, k, x]) => (x === undefined ? [`${l}:${k}`] : [])),
      )
    : null;
  // hull: the smallest and largest phase index of any run it is live in: two regions live at the
  // same phase of a run have hulls that meet, so the hulls are a cheap first test.
  interface Placed {
    layer: number;
    kind: string;
    extra: number | undefined;
    offset: bigint;
    bytes: bigint;
    length: bigint;
    copies: bigint;
    stride: bigint;
    rank: number;
    live: Int32Array | null;
    lo: number;
    hi: number;
  }
  const placed: Placed[] = [];
  const shareable: Placed[] = [];
  let cursor = headerBytes;
  order.forEach(([layer, kind, extra], rank) => {
    const e = extra === undefined ? undefined : s.extra[extra]!;
    const length = e ? extraCount(rules, e, layer) : rules.count(layer, kind!);
    // User regions are the user's data: never shared (no live interval), like the kept kinds.
    const iv = e ? null : (live?.get(`${layer}:${kind}`) ?? null);
    let lo = Infinity,
      hi = -1;
    for (let i = 0; iv && i < iv.length; i += 2)
      if (iv[i]! >= 0) {
        lo = Math.min(lo, iv[i]!);
        hi = Math.max(hi, iv[i + 1]!);
      }
    // K models: a per-model region holds K copies back to back, each starting aligned
    // (nna_region_stride in nn_arena.h); shared regions one copy. User regions and compact plans
    // are refused with models > 1 (regionRules), so they always have one copy.
    const copies = !e && s.models > 1 && rules.has(layer, kind!, REGION_FLAGS.perModel) ? BigInt(s.models) : 1n;
    const one = e && e.like === undefined ? length : length * elem; // raw bytes: count is bytes
    const stride = copies > 1n ? alignUp(one, align) : 0n;
    const r: Placed = {
      layer,
      kind: e ? e.name : kind!,
      extra,
      offset: cursor,
      bytes: (copies - 1n) * stride + one,
      length,
      copies,
      stride,
      rank,
      live: iv,
      lo,
      hi,
    };
    if (r.live) {
      shareable.push(r);
      return;
    }
    placed.push(r);
    cursor = alignUp(cursor + r.bytes, align);
  });
  // Largest first, each at the lowest aligned offset past the kept regions where it overlaps no
  // region live at the same time in any run (first fit over those, in offset order).
  // In exact numbers: none of it can pass the end of an unshared layout, checked first.
  exact(
    shareable.reduce((a, r) => alignUp(a + r.bytes, align), cursor),
    'the arena',
    s,
  );
  const base = Number(cursor),
    al = Number(align);
  const up = (x: number) => Math.ceil(x / al) * al;
  const pool: Array<{ r: Placed; at: number; end: number }> = [];
  shareable.sort((a, b) => (a.bytes === b.bytes ? a.rank - b.rank : a.bytes > b.bytes ? -1 : 1));
  for (const r of shareable) {
    const bytes = Number(r.bytes);
    const busy = pool.filter((q) => q.r.lo <= r.hi && r.lo <= q.r.hi && overlapsInTime(q.r.live!, r.live!)).sort((a, b) => a.at - b.at);
    let at = base;
    for (const q of busy) {
      if (q.at >= at + bytes) break;
      if (q.end > at) at = up(q.end);
    }
    r.offset = BigInt(at);
    pool.push({ r, at, end: at + bytes });
    placed.push(r);
    if (BigInt(up(at + bytes)) > cursor) cursor = BigInt(up(at + bytes));
  }
  placed.sort((a, b) => (a.offset === b.offset ? a.rank - b.rank : a.offset < b.offset ? -1 : 1));
  const regions: Region[] = placed.map((r) => {
    const at = {
      offset: exact(r.offset, 'a region offset', s),
      bytes: exact(r.bytes, `region ${r.kind} of layer ${r.layer}`, s),
      length: exact(r.length, 'a region length', s),
      models: Number(r.copies),
      stride: exact(r.stride, 'a model stride', s),
    };
    return r.extra === undefined ? { layer: r.layer, kind: r.kind as Kind, ...at } : { layer: r.layer, kind: r.kind, extra: r.extra, ...at };
  });
  const totalBytes = exact(cursor, 'the arena', s);

  const byKey = new Map(regions.map((r) => [`${r.layer}:${r.kind}`, Object.freeze(r)]));
  const byName = new Map<string, Region[]>();
  for (const r of [...regions].sort((a, b) => a.layer - b.layer)) byName.set(r.kind, [...(byName.get(r.kind) ?? []), byKey.get(`${r.layer}:${r.kind}`)!]);
  for (const list of byName.values()) Object.freeze(list);
  const entry = (l: number, name: string): readonly [number, number] => {
    const r = byKey.get(`${l}:${name}`);
    return [r?.offset ?? 0, r?.length ?? 0];
  };
  const header = encodeHeader({
    ...(embeddingOf(s) ? { embedding: embeddingOf(s)!.categorical } : {}),
    flags: s.compact ? FLAGS.compact : 0,
    dtype: s.dtype,
    order: s.order,
    optimizer: optimizerNamed(s.optimizer)!.code,
    batch: s.batch,
    samples: s.samples,
    align: s.align,
    models: s.models,
    actParam: s.leakyReluSlope ?? 0,
    headerBytes: Number(headerBytes),
    totalBytes,
    layers: s.layers.map((units, l) => ({
      units,
      fanIn: l > 0 ? s.layers[l - 1]! : 0,
      activation: l === 0 ? ACTIVATIONS.input : ACTIVATIONS[s.activations[l - 1]!],
      ...layerOpParams(s, l),
      regions: KINDS.map((k) => entry(l, k)),
    })),
    extras: s.extra.map((e) => ({
      name: e.name,
      like: e.like,
      elemBytes: e.like === undefined ? 1 : DTYPE_BYTES[s.dtype],
      regions: e.like === undefined ? [entry(-1, e.name)] : s.layers.map((_, l) => entry(l, e.name)),
    })),
  });

  const byKind: Record<string, number> = Object.fromEntries([...KINDS, 'header', 'padding', 'shared', ...s.extra.map((e) => e.name)].map((k) => [k, 0]));
  // Bytes held by the copies; padding between one model's copy and the next counts as padding.
  const held = (r: Region) => (r.models === 1 ? r.bytes : r.models * r.length * DTYPE_BYTES[s.dtype]);
  for (const r of regions) byKind[r.kind]! += held(r);
  // Bytes covered by some region's span (regions are in offset order) and who shares with whom.
  let covered = 0,
    reach = 0;
  const partners = new Map<Region, Region[]>();
  regions.forEach((r, i) => {
    covered += Math.max(0, r.offset + r.bytes - Math.max(r.offset, reach));
    reach = Math.max(reach, r.offset + r.bytes);
    for (let j = i + 1; j < regions.length && regions[j]!.offset < r.offset + r.bytes; j++) {
      const q = regions[j]!;
      for (const [a, b] of [
        [r, q],
        [q, r],
      ] as const) {
        const list = partners.get(a);
        if (list) list.push(b);
        else partners.set(a, [b]);
      }
    }
  });
  byKind.header = tableBytes;
  const spans = regions.reduce((a, r) => a + r.bytes, 0);
  byKind.shared = spans - covered;
  // Padding: outside every span, plus the gaps between one model's copy and the next.
  byKind.padding = totalBytes - covered - byKind.header + spans - regions.reduce((a, r) => a + held(r), 0);
  Object.freeze(byKind);

  return Object.freeze({
    spec: s,
    totalBytes,
    headerBytes: Number(headerBytes),
    regions: Object.freeze(regions),
    shared: Object.freeze(regions.filter((r) => partners.has(r)).map((r) => Object.freeze({ region: r, with: Object.freeze(partners.get(r)!) }))),
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
