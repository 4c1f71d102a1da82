// header.ts: the arena header's encoder, and names for the parts of FORMAT it writes. Every
// size, offset, code and limit comes from FORMAT, which scripts/gen-tables.cjs generates from
// csrc/include/nn_arena.h (the one definition of the header); no number of the format is kept here.

import { ACTIVATION_TABLE, FORMAT, OP_TABLE } from '../native/tables.generated.js';

export const MAGIC = FORMAT.magic;
/** The newest version; a header is written with the lowest that holds it (version 2 where every
 *  layer is dense, 3 with ops), and versions 1 (no kind table) and 2 (no ops) are still read.
 *  Version 4 (16-bit z / d regions, nn_arena.h) is read, not yet written. */
export const VERSION = FORMAT.version;
/** The version a header of dense layers only is written with. */
export const DENSE_VERSION = 2;
/** The version a header with ops is written with. */
export const OPS_VERSION = 3;
export const MAX_LAYERS = FORMAT.maxLayers;
/** User regions per arena (nna_extra entries), and the bytes of a name field (NUL-padded). */
export const MAX_EXTRAS = FORMAT.maxExtras;
export const EXTRA_NAME_BYTES = FORMAT.extraNameBytes;
/** Networks of one shape in one arena (nna_header.models; NNA_MAX_MODELS). */
export const MAX_MODELS = FORMAT.maxModels;

/** Region kinds in enum order (nna_kind); kind-major placement follows this order. */
export const KINDS = FORMAT.kinds;
export type Kind = (typeof KINDS)[number];
export const KIND_INDEX: Readonly<Record<Kind, number>> = Object.fromEntries(KINDS.map((k, i) => [k, i])) as Record<Kind, number>;

/** Slots of the stats region (enum nna_stat). */
export const STATS = FORMAT.stats;
export const STATS_COUNT = FORMAT.statsCount;

export const DTYPES = FORMAT.dtypes;
/** Bytes of an element: C's float and double. */
export const DTYPE_BYTES = { float32: 4, float64: 8 } as const;
export type Dtype = keyof typeof DTYPES;

export const ORDERS = FORMAT.orders;
export type Order = keyof typeof ORDERS;

/** An optimizer's name: one of the native optimizer table (src/layout/optimizers.ts). */
export type Optimizer = string;

/** Activation codes by name, from the one table (NNA_ACTIVATIONS in nn_arena.h, generated). */
type ActivationRow = (typeof ACTIVATION_TABLE)[number];
export const ACTIVATIONS = Object.fromEntries(ACTIVATION_TABLE.map((a) => [a.name, a.code])) as { readonly [A in ActivationRow as A['name']]: A['code'] };
export type Activation = Exclude<ActivationRow['name'], 'input'>;
/** The table's row of an activation. */
export const activationInfo = (name: Activation | 'input'): ActivationRow => ACTIVATION_TABLE.find((a) => a.name === name)!;

/** Op codes by name, from the one table (NNA_OPS in nn_arena.h, generated). */
type OpRow = (typeof OP_TABLE)[number];
export type OpName = OpRow['name'];
export const OP_CODES = Object.fromEntries(OP_TABLE.map((o) => [o.name, o.code])) as { readonly [O in OpRow as O['name']]: O['code'] };
/** The table's row of an op. */
export const opInfo = (name: OpName): OpRow => OP_TABLE.find((o) => o.name === name)!;
/** Byte offsets inside struct nna_op_param (an entry of the op parameter table), and its size. */
export const OP_PARAM_FIELDS = FORMAT.opParam;
export const OP_PARAM_SIZE = FORMAT.opParam.size;
/** Byte offsets inside struct nna_embed_col (an entry of the embedding column table), its size. */
export const EMBED_COL_FIELDS = FORMAT.embedCol;
export const EMBED_COL_SIZE = FORMAT.embedCol.size;
/** The largest cardinality of an embedding column (every index exact in float32). */
export const MAX_CARDINALITY = FORMAT.maxCardinality;

/** A categorical column of an embedding layer: its table has `cardinality` rows of `dim`. */
export interface EmbedColumn {
  readonly cardinality: number;
  readonly dim: number;
}

/** Byte offsets of struct nna_header's fields (and its size). */
export const HEADER_FIELDS = FORMAT.header;
/** Bits of nna_header.flags (NNA_FLAG_*). compact: regions share bytes (plan.ts, compact). */
export const FLAGS = FORMAT.flags;
export const HEADER_SIZE = FORMAT.header.size;

/** Byte offsets inside struct nna_layer, and inside its nna_region entries. */
export const LAYER_FIELDS = { ...FORMAT.layer, region_offset: FORMAT.region.offset, region_count: FORMAT.region.count } as const;
export const REGION_SIZE = FORMAT.region.size;
export const LAYER_SIZE = FORMAT.layer.size;

/** Byte offsets inside struct nna_extra (an entry of the kind table), its size, its rules. */
export const EXTRA_FIELDS = FORMAT.extra;
export const EXTRA_SIZE = FORMAT.extra.size;
export const EXTRA_RULES = FORMAT.extraRules;
/** Built-in kinds a per-layer user region may be shaped like (NNA_EXTRA_LIKE_KINDS). */
export const EXTRA_LIKE = FORMAT.extraLike;
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
  /** The op's code (OP_CODES; 0 dense) and its entry of the op parameter table. */
  op: number;
  opValue: number;
  opFrom: number;
  /** [offset, count] per kind in KINDS order; count 0 = absent. */
  regions: ReadonlyArray<readonly [offset: number, count: number]>;
}

export interface HeaderFields {
  /** The embedding column table, where layer 1 is an embedding (its op parameter's count). */
  embedding?: readonly EmbedColumn[];
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

/** Bytes of the header struct, the layer table, the op parameter table (`ops`: where a layer is
 *  not dense), the embedding column table (`columns` entries) and the kind table (before
 *  alignment padding). */
export function headerTableBytes(layers: number, extras: ReadonlyArray<{ like?: unknown }>, ops = false, columns = 0): number {
  const entries = extras.reduce((a, e) => a + (e.like === undefined ? 1 : layers), 0);
  return opTablesEnd(layers, ops, columns) + (extras.length ? extras.length * EXTRA_SIZE + entries * REGION_SIZE : 0);
}

/** Where the layer, op parameter and embedding column tables end: the kind table's offset. */
export function opTablesEnd(layers: number, ops: boolean, columns: number): number {
  return HEADER_SIZE + layers * LAYER_SIZE + (ops ? layers * OP_PARAM_SIZE + columns * EMBED_COL_SIZE : 0);
}

/** Encodes the bytes at offset 0 of the arena (header, layer table, zero padding). */
export function encodeHeader(h: HeaderFields): Uint8Array {
  const bytes = new Uint8Array(h.headerBytes);
  const v = new DataView(bytes.buffer);
  const u32 = (at: number, x: number) => v.setUint32(at, x, true);
  const u64 = (at: number, x: number) => v.setBigUint64(at, BigInt(x), true);
  const F = HEADER_FIELDS;
  const ops = h.layers.some((L) => L.op !== 0);
  u32(F.magic, MAGIC);
  u32(F.version, ops ? OPS_VERSION : DENSE_VERSION);
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
    u32(at + LAYER_FIELDS.op, L.op);
    L.regions.forEach(([offset, count], k) => {
      const r = at + LAYER_FIELDS.region + k * REGION_SIZE;
      u64(r + LAYER_FIELDS.region_offset, offset);
      u64(r + LAYER_FIELDS.region_count, count);
    });
  });
  const layersEnd = HEADER_SIZE + h.layers.length * LAYER_SIZE;
  if (ops) {
    // The op parameter table right after the layer table: one entry per layer.
    u64(F.ops_offset, layersEnd);
    h.layers.forEach((L, l) => {
      v.setFloat64(layersEnd + l * OP_PARAM_SIZE + OP_PARAM_FIELDS.value, L.opValue, true);
      u32(layersEnd + l * OP_PARAM_SIZE + OP_PARAM_FIELDS.from, L.opFrom);
    });
    // The embedding column table after it (layer 1's count: its entries).
    const cols = h.embedding ?? [];
    if (cols.length) u32(layersEnd + OP_PARAM_SIZE + OP_PARAM_FIELDS.count, cols.length);
    const tableAt = opTablesEnd(h.layers.length, true, 0);
    cols.forEach((c, j) => {
      u32(tableAt + j * EMBED_COL_SIZE + EMBED_COL_FIELDS.cardinality, c.cardinality);
      u32(tableAt + j * EMBED_COL_SIZE + EMBED_COL_FIELDS.dim, c.dim);
    });
  }
  if (h.extras.length) {
    // The kind table after the layer and op tables: the structs, then every extra's entries.
    const at = opTablesEnd(h.layers.length, ops, h.embedding?.length ?? 0);
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
