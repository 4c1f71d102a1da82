// decode.ts: the spec an encoded header describes, so a saved arena can be re-planned and its
// header compared byte for byte with what the planner would write (see checkpoint.ts).
import {
  ACTIVATIONS, DTYPES, EXTRA_FIELDS, EXTRA_LIKE, EXTRA_NAME_BYTES, EXTRA_RULES, EXTRA_SIZE, FLAGS, HEADER_FIELDS, HEADER_SIZE, KINDS, LAYER_FIELDS,
  LAYER_SIZE, MAGIC, MAX_EXTRAS, ORDERS, REGION_SIZE, VERSION, activationInfo, type Activation,
} from './header.js';
import { optimizerCoded } from './optimizers.js';
import type { ExtraSpec, LayoutSpec } from './spec.js';

const keyOf = <T extends Record<string, number>>(table: T, v: number): keyof T | undefined =>
  (Object.keys(table) as Array<keyof T>).find((k) => table[k] === v);

/** The spec behind header bytes, or a reason it cannot be read. */
export function decodeSpec(bytes: Uint8Array): LayoutSpec | string {
  if (bytes.length < HEADER_SIZE) return `header needs ${HEADER_SIZE} bytes, have ${bytes.length}`;
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const u32 = (at: number) => v.getUint32(at, true);
  const u64 = (at: number) => {
    const x = v.getBigUint64(at, true);
    return x > BigInt(Number.MAX_SAFE_INTEGER) ? NaN : Number(x);
  };
  const F = HEADER_FIELDS;
  if (u32(F.magic) !== MAGIC) return 'bad magic: not an nn-arena header (or another byte order)';
  const version = u32(F.version);
  if (version !== 1 && version !== VERSION) return `unsupported header version ${version}`;
  const layers = u32(F.num_layers);
  if (bytes.length < HEADER_SIZE + layers * LAYER_SIZE) return `the layer table of ${layers} layers is cut short`;
  const dtype = keyOf(DTYPES, u32(F.dtype));
  const order = keyOf(ORDERS, u32(F.order));
  const optimizer = optimizerCoded(u32(F.optimizer))?.name;
  if (!dtype || !order || !optimizer) return 'unknown dtype, order or optimizer code';
  const flags = v.getBigUint64(F.flags, true);
  if (flags & ~BigInt(FLAGS.compact)) return `unknown flags ${flags}`;
  const units: number[] = [];
  const activations: Activation[] = [];
  for (let l = 0; l < layers; l++) {
    const at = HEADER_SIZE + l * LAYER_SIZE;
    units.push(u64(at + LAYER_FIELDS.units));
    if (l > 0) {
      const a = keyOf(ACTIVATIONS, u32(at + LAYER_FIELDS.activation));
      if (!a || a === 'input') return `layer ${l} has an unknown activation`;
      activations.push(a);
    }
  }
  const extra = decodeExtras(bytes, v, layers);
  if (typeof extra === 'string') return extra;
  // models: version 1's reserved[3], which older writers left 0 (one model) and K-model writers
  // of version 1 already filled; read in both versions.
  const models = u64(F.models);
  const actParam = v.getFloat64(F.act_param, true);  // version 1's reserved[4]: 0 in older headers
  if (actParam !== 0 && !activations.some((a) => activationInfo(a).param !== 0)) return 'act_param is set, and no layer takes it';
  return {
    layers: units, batch: u64(F.batch), dtype, order, optimizer, activations, align: u64(F.align), samples: u64(F.samples),
    ...(actParam !== 0 || activations.some((a) => activationInfo(a).param !== 0) ? { leakyReluSlope: actParam } : {}),
    ...(flags ? { compact: true } : {}), ...(models > 1 || Number.isNaN(models) ? { models } : {}), ...(extra.length ? { extra } : {}),
  };
}

/** Bytes the header's tables take (struct, layer table, kind table), read from the header itself
 *  as far as `bytes` holds it; a reason when it cannot be. With only the struct and the layer
 *  table in `bytes`, the answer covers the kind table's structs, not yet its entries: call again
 *  with that much. */
export function tableBytes(bytes: Uint8Array): number | string {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const layers = v.getUint32(HEADER_FIELDS.num_layers, true);
  const n = v.getUint32(HEADER_FIELDS.num_extras, true);
  const layersEnd = HEADER_SIZE + layers * LAYER_SIZE;
  if (n === 0) return layersEnd;
  if (n > MAX_EXTRAS) return `${n} user regions (at most ${MAX_EXTRAS})`;
  const structsEnd = layersEnd + n * EXTRA_SIZE;
  if (bytes.length < structsEnd) return structsEnd;
  let entries = 0;
  for (let i = 0; i < n; i++) entries += Math.min(v.getUint32(layersEnd + i * EXTRA_SIZE + EXTRA_FIELDS.entries, true), layers);
  return structsEnd + entries * REGION_SIZE;
}

/** The `extra` list a version-2 header's kind table describes (layers: those with a region). */
function decodeExtras(bytes: Uint8Array, v: DataView, layers: number): ExtraSpec[] | string {
  const F = HEADER_FIELDS;
  const n = v.getUint32(F.num_extras, true);
  if (n === 0) return [];
  const at = HEADER_SIZE + layers * LAYER_SIZE;
  if (v.getUint32(F.version, true) === 1 || n > MAX_EXTRAS || Number(v.getBigUint64(F.extras_offset, true)) !== at) return 'bad kind table fields';
  const total = tableBytes(bytes);
  if (typeof total === 'string') return total;
  if (bytes.length < total) return `the kind table of ${n} user regions is cut short`;
  const entriesAt = at + n * EXTRA_SIZE;
  const out: ExtraSpec[] = [];
  for (let i = 0; i < n; i++) {
    const x = at + i * EXTRA_SIZE;
    const raw = bytes.subarray(x + EXTRA_FIELDS.name, x + EXTRA_FIELDS.name + EXTRA_NAME_BYTES);
    const end = raw.indexOf(0);
    const name = String.fromCharCode(...raw.subarray(0, end < 0 ? raw.length : end));
    const rule = v.getUint32(x + EXTRA_FIELDS.rule, true);
    const first = v.getUint32(x + EXTRA_FIELDS.first, true);
    const entries = v.getUint32(x + EXTRA_FIELDS.entries, true);
    // The planner writes one entry for raw bytes and one per layer otherwise; anything else
    // (an entry count of 0 included) would send the reads below past the table.
    const want = rule === EXTRA_RULES.bytes ? 1 : layers;
    if (entries !== want) return `user region ${i} has ${entries} entries (its rule needs ${want})`;
    if (first + entries > (total - entriesAt) / REGION_SIZE) return `user region ${i} has entries beyond the kind table`;
    const count = (e: number) => v.getBigUint64(entriesAt + (first + e) * REGION_SIZE + LAYER_FIELDS.region_count, true);
    if (rule === EXTRA_RULES.bytes) {
      const b = count(0);
      if (b > BigInt(Number.MAX_SAFE_INTEGER)) return `user region ${i} is too large`;
      out.push({ name, bytes: Number(b) });
    } else if (rule === EXTRA_RULES.perLayer) {
      const like = KINDS[v.getUint32(x + EXTRA_FIELDS.like, true)];
      if (!like || !(EXTRA_LIKE as readonly string[]).includes(like)) return `user region ${i} has an unknown shape`;
      const present = Array.from({ length: entries }, (_, l) => l).filter((l) => count(l) !== 0n);
      out.push({ name, like: like as ExtraSpec['like'], layers: present });
    } else {
      return `user region ${i} has an unknown rule ${rule}`;
    }
  }
  return out;
}
