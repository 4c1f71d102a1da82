// A streamed .npy window whose element type is not the network's is converted natively on the
// gather pool (csrc/addon/decode_values.cc): every .npy type, both byte orders, into float32 and
// float64, equal to what JS gives storing each value as a Number into the typed array.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { toNpy, type NpyData } from '../src/formats/npy.js';
import { closeNpy, gatherRows, openNpy } from '../src/train/npy-rows.js';
import { native } from '../src/native/addon.js';

const dir = mkdtempSync(join(tmpdir(), 'nn-arena-decode-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ROWS = 3000,
  WIDTH = 7,
  N = ROWS * WIDTH; // 21k values: more than one part of the pool
// Values that exercise each type: signs, extremes, and (64-bit) values that round twice.
const cases: [string, NpyData, (i: number) => number][] = [
  ['int8', Int8Array.from({ length: N }, (_, i) => ((i * 37) % 256) - 128), (v) => v],
  ['uint8', Uint8Array.from({ length: N }, (_, i) => (i * 41) % 256), (v) => v],
  ['int16', Int16Array.from({ length: N }, (_, i) => ((i * 7919) % 65536) - 32768), (v) => v],
  ['uint16', Uint16Array.from({ length: N }, (_, i) => (i * 7919) % 65536), (v) => v],
  ['int32', Int32Array.from({ length: N }, (_, i) => (i * 2654435761) | 0), (v) => v],
  ['uint32', Uint32Array.from({ length: N }, (_, i) => (i * 2654435761) >>> 0), (v) => v],
  ['int64', BigInt64Array.from({ length: N }, (_, i) => ((BigInt(i) * 0x9e3779b97f4a7c15n) % (1n << 63n)) - (i % 2 ? 1n << 62n : 0n)), (v) => v],
  ['uint64', BigUint64Array.from({ length: N }, (_, i) => (BigInt(i) * 0x9e3779b97f4a7c15n) % (1n << 64n)), (v) => v],
  ['float32', Float32Array.from({ length: N }, (_, i) => Math.sin(i) * 1e3), (v) => v],
  ['float64', Float64Array.from({ length: N }, (_, i) => Math.sin(i) * 1e39), (v) => v], // beyond float32: Infinity there
];

/** The npy bytes of `data` big-endian (its header says '>'). */
function bigEndian(bytes: Uint8Array, itemBytes: number, count: number, descr: string): Uint8Array {
  const b = Uint8Array.from(bytes),
    head = b.length - count * itemBytes;
  for (let i = head; i < b.length; i += itemBytes) b.subarray(i, i + itemBytes).reverse();
  const at = Buffer.from(b.subarray(0, head)).toString('latin1').indexOf(`'<${descr}'`);
  if (at >= 0) b.set(Buffer.from(`'>${descr}'`, 'latin1'), at);
  return b;
}

describe('streamed .npy rows of another element type: converted natively', () => {
  for (const [name, data] of cases) {
    for (const order of ['little', 'big'] as const) {
      it(`${name}, ${order}-endian, into float32 and float64: as JS converts each value`, async () => {
        const item = data.BYTES_PER_ELEMENT;
        let bytes = toNpy(data, [ROWS, WIDTH]);
        if (order === 'big' && item > 1) bytes = bigEndian(bytes, item, N, `${name.startsWith('float') ? 'f' : name.startsWith('u') ? 'u' : 'i'}${item}`);
        const file = join(dir, `${name}-${order}.npy`);
        writeFileSync(file, bytes);
        const f = await openNpy(file, 'x');
        try {
          if (order === 'big' && item > 1) expect(f.h.littleEndian).toBe(false);
          for (const Out of [Float32Array, Float64Array]) {
            const out = new Out(N);
            await gatherRows(f, { a: 1, c: 0 }, 0, ROWS, WIDTH, out);
            const want = Out.from(Array.from(data as ArrayLike<number | bigint>, (v) => Number(v)));
            expect(Buffer.from(out.buffer).equals(Buffer.from(want.buffer)), `${name} ${order} into ${Out.name}`).toBe(true);
          }
        } finally {
          await closeNpy(f);
        }
      });
    }
  }

  it('bad arguments are typed errors, not crashes', async () => {
    const d = native();
    expect(() => d.decodeValues(new Uint8Array(8), 'float16', true, new Float32Array(4), 4)).toThrow(expect.objectContaining({ code: 'BAD_ARGUMENT' }));
    expect(() => d.decodeValues(new Uint8Array(8), 'int32', true, new Float32Array(4), 3)).toThrow(expect.objectContaining({ code: 'BAD_ARGUMENT' }));
    expect(() => d.decodeValues(new Uint8Array(8), 'uint8', true, new Int32Array(8) as never, 8)).toThrow(expect.objectContaining({ code: 'BAD_ARGUMENT' }));
    await expect(d.decodeValues(Uint8Array.of(1, 2, 3, 250), 'uint8', true, new Float32Array(4), 4)).resolves.toBe(4);
  });
});
