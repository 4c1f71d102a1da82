// decode.ts: the spec an encoded header describes, so a saved arena can be re-planned and its
// header compared byte for byte with what the planner would write (see checkpoint/checkpoint.ts). Whether
// the bytes are a sound header is the native validator's call (csrc/core/validate.cc, the
// check every arena's header passes); this file only reads what it accepted, at the offsets
// FORMAT gives (generated from nn_arena.h).
import { call, native } from '../native/addon.js';
import {
  ACTIVATIONS,
  DTYPES,
  EMBED_COL_FIELDS,
  EMBED_COL_SIZE,
  EXTRA_FIELDS,
  EXTRA_NAME_BYTES,
  EXTRA_RULES,
  EXTRA_SIZE,
  FLAGS,
  HEADER_FIELDS,
  HEADER_SIZE,
  KINDS,
  LAYER_FIELDS,
  LAYER_SIZE,
  MAX_EXTRAS,
  OP_CODES,
  OP_PARAM_FIELDS,
  OP_PARAM_SIZE,
  ORDERS,
  REGION_SIZE,
  activationInfo,
  opTablesEnd,
  type Activation,
} from './header.js';
import { optimizerCoded } from './optimizers.js';
import { decodeOp } from './ops/index.js';
import type { ExtraSpec, LayerOp, LayoutSpec } from './spec.js';

const keyOf = <T extends Record<string, number>>(table: T, v: number): keyof T => (Object.keys(table) as Array<keyof T>).find((k) => table[k] === v)!;

/** The spec behind header bytes (the struct and its tables), or the validator's reason it is none. */
export function decodeSpec(bytes: Uint8Array): LayoutSpec | string {
  const why = call(() => native().validateHeader(bytes, Number.MAX_SAFE_INTEGER));
  if (why) return why;
  // Sound: every code is known, every count and size below total_bytes <= 2^53.
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (v.getBigUint64(HEADER_FIELDS.flags, true) & BigInt(FLAGS.regionDtypes))
    return 'a version-4 header with 16-bit activation or error regions: this version of nn-arena reads their format, no plan or run of it yet';
  const u32 = (at: number) => v.getUint32(at, true);
  const u64 = (at: number) => Number(v.getBigUint64(at, true));
  const F = HEADER_FIELDS;
  const layers = u32(F.num_layers);
  const units = Array.from({ length: layers }, (_, l) => u64(HEADER_SIZE + l * LAYER_SIZE + LAYER_FIELDS.units));
  const activations = units.slice(1).map((_, l) => keyOf(ACTIVATIONS, u32(HEADER_SIZE + (l + 1) * LAYER_SIZE + LAYER_FIELDS.activation)) as Activation);
  const ops = decodeOps(v, layers);
  const extra = decodeExtras(bytes, v, layers);
  // models and act_param: version 1's reserved[3] and [4], 0 in older headers (one model, no parameter).
  const models = u64(F.models);
  const takesParam = activations.some((a) => activationInfo(a).param !== 0);
  return {
    layers: units,
    batch: u64(F.batch),
    dtype: keyOf(DTYPES, u32(F.dtype)),
    order: keyOf(ORDERS, u32(F.order)),
    optimizer: optimizerCoded(u32(F.optimizer))!.name,
    activations,
    align: u64(F.align),
    samples: u64(F.samples),
    ...(takesParam ? { leakyReluSlope: v.getFloat64(F.act_param, true) } : {}),
    ...(v.getBigUint64(F.flags, true) & BigInt(FLAGS.compact) ? { compact: true } : {}), // the bit alone
    ...(models > 1 ? { models } : {}),
    ...(extra.length ? { extra } : {}),
    ...(ops ? { ops } : {}),
  };
}

/** The ops of a validated header (one per non-input layer), undefined where every layer is dense. */
function decodeOps(v: DataView, layers: number): LayerOp[] | undefined {
  const at = Number(v.getBigUint64(HEADER_FIELDS.ops_offset, true));
  if (!at) return undefined;
  return Array.from({ length: layers - 1 }, (_, i): LayerOp => {
    const l = i + 1;
    const op = keyOf(OP_CODES, v.getUint32(HEADER_SIZE + l * LAYER_SIZE + LAYER_FIELDS.op, true));
    const entry = at + l * OP_PARAM_SIZE;
    // The embedding column table follows the op parameter table; an entry's count says how
    // many of its columns are the layer's (an embedding's: layer 1, the table's first).
    const table = at + layers * OP_PARAM_SIZE;
    const columns = Array.from({ length: v.getUint32(entry + OP_PARAM_FIELDS.count, true) }, (_, j) => ({
      cardinality: v.getUint32(table + j * EMBED_COL_SIZE + EMBED_COL_FIELDS.cardinality, true),
      dim: v.getUint32(table + j * EMBED_COL_SIZE + EMBED_COL_FIELDS.dim, true),
    }));
    const value = v.getFloat64(entry + OP_PARAM_FIELDS.value, true);
    return decodeOp(op, { value, from: v.getUint32(entry + OP_PARAM_FIELDS.from, true), ...(columns.length ? { columns } : {}) });
  });
}

/** Bytes the header's tables take (struct, layer table, kind table), read from the header itself
 *  as far as `bytes` holds it; a reason when it cannot be. With only the struct and the layer
 *  table in `bytes`, the answer covers the kind table's structs, not yet its entries: call again
 *  with that much. */
export function tableBytes(bytes: Uint8Array): number | string {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const layers = v.getUint32(HEADER_FIELDS.num_layers, true);
  const n = v.getUint32(HEADER_FIELDS.num_extras, true);
  // The op parameter table (version 3) and, where layer 1 is an embedding, its column table sit
  // between the layer table and the kind table.
  const ops = v.getBigUint64(HEADER_FIELDS.ops_offset, true) !== 0n;
  let layersEnd = opTablesEnd(layers, ops, 0);
  if (ops) {
    if (bytes.length < layersEnd) return layersEnd; // layer 1's op parameter: its column count
    if (layers > 1 && v.getUint32(HEADER_SIZE + LAYER_SIZE + LAYER_FIELDS.op, true) === OP_CODES.embedding)
      layersEnd = opTablesEnd(layers, ops, v.getUint32(HEADER_SIZE + layers * LAYER_SIZE + OP_PARAM_SIZE + OP_PARAM_FIELDS.count, true));
  }
  if (n === 0) return layersEnd;
  // A bound on what is read next; the validator checks the table itself.
  if (n > MAX_EXTRAS) return `${n} user regions (at most ${MAX_EXTRAS})`;
  const structsEnd = layersEnd + n * EXTRA_SIZE;
  if (bytes.length < structsEnd) return structsEnd;
  let entries = 0;
  for (let i = 0; i < n; i++) entries += Math.min(v.getUint32(layersEnd + i * EXTRA_SIZE + EXTRA_FIELDS.entries, true), layers);
  return structsEnd + entries * REGION_SIZE;
}

/** The `extra` list of a validated header's kind table (layers: those with a region). */
function decodeExtras(bytes: Uint8Array, v: DataView, layers: number): ExtraSpec[] {
  const n = v.getUint32(HEADER_FIELDS.num_extras, true);
  const at = Number(v.getBigUint64(HEADER_FIELDS.extras_offset, true));
  const entriesAt = at + n * EXTRA_SIZE;
  return Array.from({ length: n }, (_, i): ExtraSpec => {
    const x = at + i * EXTRA_SIZE;
    const raw = bytes.subarray(x + EXTRA_FIELDS.name, x + EXTRA_FIELDS.name + EXTRA_NAME_BYTES);
    const end = raw.indexOf(0);
    const name = String.fromCharCode(...raw.subarray(0, end < 0 ? raw.length : end));
    const first = v.getUint32(x + EXTRA_FIELDS.first, true);
    const count = (e: number) => v.getBigUint64(entriesAt + (first + e) * REGION_SIZE + LAYER_FIELDS.region_count, true);
    if (v.getUint32(x + EXTRA_FIELDS.rule, true) === EXTRA_RULES.bytes) return { name, bytes: Number(count(0)) };
    const like = KINDS[v.getUint32(x + EXTRA_FIELDS.like, true)] as ExtraSpec['like'];
    return { name, like, layers: Array.from({ length: layers }, (_, l) => l).filter((l) => count(l) !== 0n) };
  });
}
