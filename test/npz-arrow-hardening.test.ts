// npz-arrow-hardening.test.ts: the .npz and Arrow loaders neither hang nor read silently wrong
// data (issue 51). An .npz whose directory names one deflated member many times, or hides a
// member inside another, is refused before anything inflates; what deflated members inflate to
// is bounded by maxInflatedBytes. Every single-bit flip of a small Arrow stream (and file) either
// loads consistent typed arrays or is a DataError, quickly and in bounded memory; blocks of an
// Arrow file that share bytes and a second stream after the end-of-stream marker are refused.
import * as zlib from 'node:zlib';
import { beforeAll, describe, expect, it } from 'vitest';
import { DataError, OptionError } from '../src/index.js';
import { loadArrow, loadNpz, toNpy } from '../src/io.js';

const crc = (d: Uint8Array) => (zlib as { crc32?: (d: Uint8Array) => number }).crc32?.(d) ?? 0;
const gc = () => (globalThis as { gc?: () => void }).gc?.();
const MiB = 2 ** 20;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the tests read whatever fields the error carries
function caught(f: () => unknown): any {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error('did not throw');
}

/** One member's local record (header, name, data) and what the directory says of it. */
interface Entry {
  name: string;
  local: number;
  method: number;
  crc: number;
  comp: number;
  size: number;
  zip64Size?: boolean;
}

function localRecord(name: string, data: Uint8Array, deflate: boolean, local: number): { bytes: Buffer; entry: Entry } {
  const body = deflate ? zlib.deflateRawSync(data) : Buffer.from(data);
  const n = Buffer.from(name, 'utf8');
  const h = Buffer.alloc(30);
  h.writeUInt32LE(0x04034b50, 0);
  h.writeUInt16LE(20, 4);
  h.writeUInt16LE(deflate ? 8 : 0, 8);
  h.writeUInt32LE(crc(data) >>> 0, 14);
  h.writeUInt32LE(body.length, 18);
  h.writeUInt32LE(data.length, 22);
  h.writeUInt16LE(n.length, 26);
  return { bytes: Buffer.concat([h, n, body]), entry: { name, local, method: deflate ? 8 : 0, crc: crc(data) >>> 0, comp: body.length, size: data.length } };
}

/** The archive of `records` (laid end to end) with a central directory of `entries`. */
function archive(records: Buffer[], entries: Entry[]): Uint8Array {
  const cd = entries.map((e) => {
    const n = Buffer.from(e.name, 'utf8');
    const extra = e.zip64Size ? Buffer.alloc(12) : Buffer.alloc(0);
    if (e.zip64Size) {
      extra.writeUInt16LE(1, 0);
      extra.writeUInt16LE(8, 2);
      extra.writeBigUInt64LE(BigInt(e.size), 4);
    }
    const h = Buffer.alloc(46);
    h.writeUInt32LE(0x02014b50, 0);
    h.writeUInt16LE(45, 4);
    h.writeUInt16LE(20, 6);
    h.writeUInt16LE(e.method, 10);
    h.writeUInt32LE(e.crc, 16);
    h.writeUInt32LE(e.comp, 20);
    h.writeUInt32LE(e.zip64Size ? 0xffffffff : e.size, 24);
    h.writeUInt16LE(n.length, 28);
    h.writeUInt16LE(extra.length, 30);
    h.writeUInt32LE(e.local, 42);
    return Buffer.concat([h, n, extra]);
  });
  const body = Buffer.concat(records),
    dir = Buffer.concat(cd);
  const eocd = Buffer.alloc(22);
  eocd.writeUInt32LE(0x06054b50, 0);
  eocd.writeUInt16LE(entries.length, 8);
  eocd.writeUInt16LE(entries.length, 10);
  eocd.writeUInt32LE(dir.length, 12);
  eocd.writeUInt32LE(body.length, 16);
  return new Uint8Array(Buffer.concat([body, dir, eocd]));
}

/** A plain archive: each member once. */
function npz(members: Array<[string, Uint8Array, boolean]>): Uint8Array {
  const records: Buffer[] = [],
    entries: Entry[] = [];
  let at = 0;
  for (const [name, data, deflate] of members) {
    const r = localRecord(name, data, deflate, at);
    records.push(r.bytes);
    entries.push(r.entry);
    at += r.bytes.length;
  }
  return archive(records, entries);
}

describe('.npz: overlapping members and the bound on inflated bytes', () => {
  // One deflated member of 64 MiB of zeros: about 65 KB of archive.
  let zeros: { bytes: Buffer; entry: Entry };
  beforeAll(() => {
    zeros = localRecord('a.npy', toNpy(new Uint8Array(64 * MiB)), true, 0);
  });

  it('a directory naming one deflated member many times is refused, naming the member, before anything inflates', () => {
    const entries = Array.from({ length: 16 }, (_, i) => ({ ...zeros.entry, name: `a${i}.npy` }));
    const bytes = archive([zeros.bytes], entries);
    gc();
    const rss = process.memoryUsage().rss;
    const e = caught(() => loadNpz(bytes));
    expect(e).toBeInstanceOf(DataError);
    expect(e.code).toBe('BAD_FILE');
    expect(e.field).toBe('a1.npy local header');
    expect(e.message).toContain('inside member "a0.npy"');
    expect(process.memoryUsage().rss - rss).toBeLessThan(64 * MiB); // the bound
  });

  it("a member hidden inside another member's data is refused", () => {
    const y = localRecord('y.npy', toNpy(Float32Array.of(1, 2, 3)), false, 0);
    const xData = toNpy(new Uint8Array(y.bytes)); // x's array is y's whole local record
    const x = localRecord('x.npy', xData, false, 0);
    const yAt = 30 + 'x.npy'.length + (xData.length - y.bytes.length);
    const e = caught(() => loadNpz(archive([x.bytes], [x.entry, { ...y.entry, local: yAt }])));
    expect(e).toBeInstanceOf(DataError);
    expect(e.code).toBe('BAD_FILE');
    expect(e.field).toBe('y.npy local header');
    expect(e.message).toContain('inside member "x.npy"');
  });

  it('maxInflatedBytes bounds what deflated members inflate to in all; stored members do not count', () => {
    const a = toNpy(Float32Array.from({ length: 1000 }, (_, i) => i)),
      b = toNpy(new Int32Array(500));
    const bytes = npz([
      ['a.npy', a, true],
      ['b.npy', b, true],
    ]);
    const z = loadNpz(bytes, { maxInflatedBytes: a.length + b.length });
    expect(Array.from((z.a!.data as Float32Array).subarray(0, 3))).toEqual([0, 1, 2]);
    expect(z.b!.shape).toEqual([500]);
    for (const bound of [a.length + b.length - 1, a.length - 1, 0]) {
      const e = caught(() => loadNpz(bytes, { maxInflatedBytes: bound }));
      expect(e).toBeInstanceOf(DataError);
      expect(e.code).toBe('DATA_TOO_LARGE');
      expect(e.field).toBe('maxInflatedBytes');
      expect(e.value).toBe(bound);
      expect(e.message).toContain(bound < a.length ? 'a.npy' : 'b.npy');
    }
    expect(Object.keys(loadNpz(npz([['a.npy', a, false]]), { maxInflatedBytes: 0 }))).toEqual(['a']);
  });

  it('by default a small archive may not inflate to many times its size; a larger maxInflatedBytes reads it', () => {
    const bytes = archive([zeros.bytes], [zeros.entry]);
    const e = caught(() => loadNpz(bytes));
    expect(e).toBeInstanceOf(DataError);
    expect(e.code).toBe('DATA_TOO_LARGE');
    expect(e.field).toBe('maxInflatedBytes');
    expect(e.message).toContain('a.npy');
    const z = loadNpz(bytes, { maxInflatedBytes: 65 * MiB });
    expect(z.a!.shape).toEqual([64 * MiB]);
  });

  it('a zip64 size larger than the archive is read (the bound, not the archive, limits it)', () => {
    const data = toNpy(new Float64Array(4096));
    const r = localRecord('x.npy', data, true, 0);
    const bytes = archive([r.bytes], [{ ...r.entry, zip64Size: true }]);
    expect(bytes.length).toBeLessThan(data.length);
    expect(loadNpz(bytes).x!.shape).toEqual([4096]);
  });

  it('a bad maxInflatedBytes is OptionError BAD_OPTION; a misspelled option UNKNOWN_OPTION', () => {
    const bytes = npz([['a.npy', toNpy(Float32Array.of(1)), true]]);
    for (const v of [-1, 1.5, NaN, '10', null]) {
      const e = caught(() => loadNpz(bytes, { maxInflatedBytes: v as number }));
      expect(e).toBeInstanceOf(OptionError);
      expect(e.code).toBe('BAD_OPTION');
      expect(e.field).toBe('maxInflatedBytes');
    }
    expect(loadNpz(bytes, { maxInflatedBytes: Infinity }).a!.shape).toEqual([1]);
    const e = caught(() => loadNpz(bytes, { maxInflatedByte: 10 } as never));
    expect(e).toBeInstanceOf(OptionError);
    expect(e.code).toBe('UNKNOWN_OPTION');
    expect(e.message).toContain("'maxInflatedBytes'");
  });
});

/** loadArrow's outcome: consistent typed arrays, or a DataError (anything else throws). */
async function outcome(bytes: Uint8Array): Promise<'loaded' | 'refused'> {
  let t;
  try {
    t = await loadArrow(bytes);
  } catch (e) {
    if (e instanceof DataError && e.code === 'BAD_FILE') return 'refused';
    throw e;
  }
  expect(t.arrays.length).toBe(t.columns.length);
  for (const a of t.arrays) {
    expect(ArrayBuffer.isView(a)).toBe(true);
    expect(a.length).toBe(t.rows);
  }
  return 'loaded';
}

describe('Arrow IPC: every single-bit flip loads or is refused, quickly', () => {
  let arrow: typeof import('apache-arrow');
  beforeAll(async () => {
    arrow = await import('apache-arrow');
  });

  it('the reported flip (byte 215, 0x40: a buffer count of a billion) is BAD_FILE', async () => {
    const bytes = arrow.tableToIPC(arrow.tableFromArrays({ a: new Float32Array(8) }), 'stream');
    expect(bytes.length).toBe(312);
    bytes[215]! ^= 0x40;
    const e = await loadArrow(bytes).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(DataError);
    expect((e as DataError).code).toBe('BAD_FILE');
  }, 10_000);

  for (const format of ['stream', 'file'] as const) {
    it(`all ${format === 'stream' ? '312 * 8' : "of the file format's"} single-bit flips: typed arrays of the table's length, or BAD_FILE`, async () => {
      const good = arrow.tableToIPC(arrow.tableFromArrays({ a: Float32Array.from({ length: 8 }, (_, i) => i) }), format);
      gc();
      const rss = process.memoryUsage().rss;
      let loaded = 0,
        refused = 0,
        grew = 0;
      for (let bit = 0; bit < good.length * 8; bit++) {
        const b = good.slice();
        b[bit >> 3]! ^= 1 << (bit & 7);
        if ((await outcome(b)) === 'loaded') loaded++;
        else refused++;
        if (bit % 128 === 0) grew = Math.max(grew, process.memoryUsage().rss - rss);
      }
      expect(loaded + refused).toBe(good.length * 8);
      expect(loaded).toBeGreaterThan(0); // flips in the data (and in what nothing reads) still load
      expect(grew).toBeLessThan(64 * MiB); // the bound
    }, 20_000);
  }

  it('an Arrow file whose footer names one record batch twice is refused, not read twice', async () => {
    const a = Float32Array.from({ length: 10 }, (_, i) => i);
    const bytes = arrow.tableToIPC(arrow.tableFromArrays({ a: a.subarray(0, 4) }).concat(arrow.tableFromArrays({ a: a.subarray(4) })), 'file');
    expect((await loadArrow(bytes)).rows).toBe(10);
    // The footer's two blocks (offset: int64, metadata length: int32, padding, body length:
    // int64): the first one ends where the second starts.
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const footLen = dv.getInt32(bytes.length - 10, true),
      footAt = bytes.length - 10 - footLen;
    const block = (p: number) => [Number(dv.getBigInt64(p, true)), dv.getInt32(p + 8, true), Number(dv.getBigInt64(p + 16, true))] as const;
    let at = -1;
    for (let p = footAt; p + 48 <= bytes.length - 10 && at < 0; p += 4) {
      const [o, m, b] = block(p);
      if (o >= 8 && m > 0 && b > 0 && o + m + b === block(p + 24)[0]) at = p;
    }
    expect(at).toBeGreaterThan(0);
    bytes.copyWithin(at + 24, at, at + 24); // the second block := the first
    const e = await loadArrow(bytes).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(DataError);
    expect((e as DataError).code).toBe('BAD_FILE');
    expect((e as Error).message).toContain('inside the one before it');
  });

  it('a second stream after the end-of-stream marker is refused, not dropped', async () => {
    const one = arrow.tableToIPC(arrow.tableFromArrays({ a: Float32Array.of(1, 2) }), 'stream');
    const two = new Uint8Array([...one, ...arrow.tableToIPC(arrow.tableFromArrays({ a: Float32Array.of(3) }), 'stream')]);
    expect((await loadArrow(one)).rows).toBe(2);
    const e = await loadArrow(two).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(DataError);
    expect((e as Error).message).toContain('after its end-of-stream marker');
  });

  it('tables of many column types still pass the check (their numeric columns load)', async () => {
    const n = 6;
    const table = new arrow.Table({
      x: arrow.vectorFromArray(Float64Array.from({ length: n }, (_, i) => i / 2)),
      s: arrow.vectorFromArray(['a', 'b', null, 'dd', 'e', 'f'], new arrow.Utf8()),
      d: arrow.vectorFromArray(['p', 'q', 'p', 'q', 'p', 'q']), // dictionary-encoded
      l: arrow.vectorFromArray([[1], [], [2, 3], [4], [5], [6]], new arrow.List(new arrow.Field('v', new arrow.Int32()))),
      st: arrow.vectorFromArray(
        Array.from({ length: n }, (_, i) => ({ k: i })),
        new arrow.Struct([new arrow.Field('k', new arrow.Int16())]),
      ),
      b: arrow.vectorFromArray([true, false, true, null, false, true], new arrow.Bool()),
      f: arrow.vectorFromArray(
        Array.from({ length: n }, () => [1, 2]),
        new arrow.FixedSizeList(2, new arrow.Field('v', new arrow.Uint8())),
      ),
      z: arrow.vectorFromArray(
        Array.from({ length: n }, () => null),
        new arrow.Null(),
      ),
    });
    for (const format of ['stream', 'file'] as const) {
      const t = await loadArrow(arrow.tableToIPC(table, format), { columns: ['x'] });
      expect(Array.from(t.arrays[0] as Float64Array)).toEqual([0, 0.5, 1, 1.5, 2, 2.5]);
    }
  });
});
