// header.ts: the TypeScript mirror of csrc/include/nn_arena.h, the one definition of the
// arena header. Every constant below is compared with the native module's sizeof/offsetof and
// enum values by test/header-drift.test.ts, so the two sides cannot drift silently.

import { ACTIVATION_TABLE } from './tables.generated.js';

export const MAGIC = 0x414e4e41;
/** Version written; version 1 (no kind table) is still read. */
export const VERSION = 2;
export const MAX_LAYERS = 4096;
/** User regions per arena (nna_extra entries), and the bytes of a name field (NUL-padded). */
export const MAX_EXTRAS = 64;
export const EXTRA_NAME_BYTES = 32;
/** Networks of one shape in one arena (nna_header.models; NNA_MAX_MODELS). */
export const MAX_MODELS = 65535;

/** Region kinds in enum order (nna_kind); kind-major placement follows this order. */
export const KINDS = ['z', 'b', 'w', 'd', 'db', 'dw', 'mw', 'mb', 'vw', 'vb', 'y', 'xdata', 'ydata', 'stats'] as const;
export type Kind = (typeof KINDS)[number];
export const KIND_INDEX: Readonly<Record<Kind, number>> = Object.fromEntries(KINDS.map((k, i) => [k, i])) as Record<Kind, number>;

/** Slots of the stats region (enum nna_stat). */
export const STATS = { loss: 0, correct: 1, rows: 2, badStep: 3, lossFixed: 4 } as const;
export const STATS_COUNT = 8;

export const DTYPES = { float32: 1, float64: 2 } as const;
export const DTYPE_BYTES = { float32: 4, float64: 8 } as const;
export type Dtype = keyof typeof DTYPES;

export const ORDERS = { 'layer-major': 0, 'kind-major': 1 } as const;
export type Order = keyof typeof ORDERS;

/** An optimizer's name: one of the native optimizer table (src/layout/optimizers.ts). */
export type Optimizer = string;

/** Activation codes by name, from the one table (NNA_ACTIVATIONS in nn_arena.h, generated). */
type ActivationRow = (typeof ACTIVATION_TABLE)[number];
export const ACTIVATIONS = Object.fromEntries(ACTIVATION_TABLE.map((a) => [a.name, a.code])) as { readonly [A in ActivationRow as A['name']]: A['code'] };
export type Activation = Exclude<ActivationRow['name'], 'input'>;
/** The table's row of an activation. */
export const activationInfo = (name: Activation | 'input'): ActivationRow => ACTIVATION_TABLE.find((a) => a.name === name)!;

/** Byte offsets of struct nna_header's fields. */
export const HEADER_FIELDS = {
  magic: 0, version: 4, dtype: 8, order: 12, optimizer: 16, num_layers: 20, num_kinds: 24, layer_size: 28,
  batch: 32, samples: 40, align: 48, header_bytes: 56, total_bytes: 64, layers_offset: 72,
  extras_offset: 80, num_extras: 88, extra_size: 92, flags: 96, models: 104, act_param: 112,
} as const;

/** Bits of nna_header.flags (NNA_FLAG_*). compact: regions share bytes (plan.ts, compact). */
export const FLAGS = { compact: 1 } as const;
export const HEADER_SIZE = 128;

/** Byte offsets inside struct nna_layer and struct nna_region. */
export const LAYER_FIELDS = { units: 0, fan_in: 8, activation: 16, region: 24, region_offset: 0, region_count: 8 } as const;
export const REGION_SIZE = 16;
export const LAYER_SIZE = LAYER_FIELDS.region + REGION_SIZE * KINDS.length;

/** Byte offsets inside struct nna_extra (an entry of the kind table), its size, its rules. */
export const EXTRA_FIELDS = { name: 0, rule: 32, like: 36, elem_bytes: 40, entries: 44, first: 48 } as const;
export const EXTRA_SIZE = 64;
export const EXTRA_RULES = { perLayer: 1, bytes: 2 } as const;
/** Built-in kinds a per-layer user region may be shaped like. */
export const EXTRA_LIKE = ['z', 'b', 'w'] as const;
export type ExtraLike = (typeof EXTRA_LIKE)[number];

export interface HeaderExtra {
  name: string;
  /** A per-layer region shaped like this kind (one entry per layer), or undefined: raw bytes (one entry). */
  like: ExtraLike | undefined;
  elemBytes: number;
  /** [offset, count] per entry; count 0 = absent. */
  regions: ReadonlyArray<readonly [offset: number, count: number]>;
}

export interface HeaderLayer {
  units: number;
  fanIn: number;
  activation: number;
  /** [offset, count] per kind in KINDS order; count 0 = absent. */
  regions: ReadonlyArray<readonly [offset: number, count: number]>;
}

export interface HeaderFields {
  /** NNA_FLAG_* bits; 0 = a plan where every region has bytes of its own. */
  flags: number;
  dtype: Dtype;
  order: Order;
  /** The optimizer's code (OptimizerInfo.code). */
  optimizer: number;
  batch: number;
  samples: number;
  align: number;
  headerBytes: number;
  totalBytes: number;
  /** Networks of this shape in the arena; 1 is written as 0 (the version-1 meaning). */
  models: number;
  /** The parameter of the activations that take one (leaky-relu's slope); 0 when none does. */
  actParam: number;
  layers: readonly HeaderLayer[];
  extras: readonly HeaderExtra[];
}

/** Bytes of the header struct, the layer table and the kind table (before alignment padding). */
export function headerTableBytes(layers: number, extras: ReadonlyArray<{ like?: unknown }>): number {
  const entries = extras.reduce((a, e) => a + (e.like === undefined ? 1 : layers), 0);
  return HEADER_SIZE + layers * LAYER_SIZE + (extras.length ? extras.length * EXTRA_SIZE + entries * REGION_SIZE : 0);
}

/** Whether region `kind` of layer `l` has one copy per model (nna_kind_per_model): all but the
 *  input batch z[0], the targets y and the resident data set, which every model shares. */
export function perModel(layer: number, kind: Kind): boolean {
  return !(kind === 'xdata' || kind === 'ydata' || kind === 'y' || (kind === 'z' && layer === 0));
}

/** Encodes the bytes at offset 0 of the arena (header, layer table, zero padding). */
export function encodeHeader(h: HeaderFields): Uint8Array {
  const bytes = new Uint8Array(h.headerBytes);
  const v = new DataView(bytes.buffer);
  const u32 = (at: number, x: number) => v.setUint32(at, x, true);
  const u64 = (at: number, x: number) => v.setBigUint64(at, BigInt(x), true);
  const F = HEADER_FIELDS;
  u32(F.magic, MAGIC);
  u32(F.version, VERSION);
  u32(F.dtype, DTYPES[h.dtype]);
  u32(F.order, ORDERS[h.order]);
  u32(F.optimizer, h.optimizer);
  u32(F.num_layers, h.layers.length);
  u32(F.num_kinds, KINDS.length);
  u32(F.layer_size, LAYER_SIZE);
  u64(F.batch, h.batch);
  u64(F.samples, h.samples);
  u64(F.align, h.align);
  u64(F.header_bytes, h.headerBytes);
  u64(F.total_bytes, h.totalBytes);
  u64(F.layers_offset, HEADER_SIZE);
  u64(F.flags, h.flags);
  u64(F.models, h.models === 1 ? 0 : h.models);
  v.setFloat64(F.act_param, h.actParam, true);
  h.layers.forEach((L, l) => {
    const at = HEADER_SIZE + l * LAYER_SIZE;
    u64(at + LAYER_FIELDS.units, L.units);
    u64(at + LAYER_FIELDS.fan_in, L.fanIn);
    u32(at + LAYER_FIELDS.activation, L.activation);
    L.regions.forEach(([offset, count], k) => {
      const r = at + LAYER_FIELDS.region + k * REGION_SIZE;
      u64(r + LAYER_FIELDS.region_offset, offset);
      u64(r + LAYER_FIELDS.region_count, count);
    });
  });
  if (h.extras.length) {
    // The kind table right after the layer table: the structs, then every extra's entries.
    const at = HEADER_SIZE + h.layers.length * LAYER_SIZE;
    u64(F.extras_offset, at);
    u32(F.num_extras, h.extras.length);
    u32(F.extra_size, EXTRA_SIZE);
    let entry = at + h.extras.length * EXTRA_SIZE;
    let first = 0;
    h.extras.forEach((e, i) => {
      const x = at + i * EXTRA_SIZE;
      for (let c = 0; c < e.name.length; c++) bytes[x + EXTRA_FIELDS.name + c] = e.name.charCodeAt(c);
      u32(x + EXTRA_FIELDS.rule, e.like === undefined ? EXTRA_RULES.bytes : EXTRA_RULES.perLayer);
      u32(x + EXTRA_FIELDS.like, e.like === undefined ? 0 : KIND_INDEX[e.like]);
      u32(x + EXTRA_FIELDS.elem_bytes, e.elemBytes);
      u32(x + EXTRA_FIELDS.entries, e.regions.length);
      u32(x + EXTRA_FIELDS.first, first);
      first += e.regions.length;
      for (const [offset, count] of e.regions) {
        u64(entry + LAYER_FIELDS.region_offset, offset);
        u64(entry + LAYER_FIELDS.region_count, count);
        entry += REGION_SIZE;
      }
    });
  }
  return bytes;
}
