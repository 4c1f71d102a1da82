// decode.ts: the spec an encoded header describes, so a saved arena can be re-planned and its
// header compared byte for byte with what the planner would write (see checkpoint.ts).
import { ACTIVATIONS, DTYPES, HEADER_FIELDS, HEADER_SIZE, LAYER_FIELDS, LAYER_SIZE, MAGIC, OPTIMIZERS, ORDERS, type Activation } from './header.js';
import type { LayoutSpec } from './spec.js';

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
  const layers = u32(F.num_layers);
  if (bytes.length < HEADER_SIZE + layers * LAYER_SIZE) return `the layer table of ${layers} layers is cut short`;
  const dtype = keyOf(DTYPES, u32(F.dtype));
  const order = keyOf(ORDERS, u32(F.order));
  const optimizer = keyOf(OPTIMIZERS, u32(F.optimizer));
  if (!dtype || !order || !optimizer) return 'unknown dtype, order or optimizer code';
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
  return { layers: units, batch: u64(F.batch), dtype, order, optimizer, activations, align: u64(F.align), samples: u64(F.samples) };
}
