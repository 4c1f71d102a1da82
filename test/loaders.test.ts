// loaders.test.ts: data in (issue 31). .npy / .npz files NumPy wrote (test/fixtures/npy,
// make_fixtures.py) read to the same values, little-endian data as views over the file's bytes;
// CSV with a header row; Apache Arrow IPC through apache-arrow; toData for fit; malformed files
// (crafted and fuzzed) are DataError BAD_FILE and nothing else.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as zlib from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Arena, DataError, planLayout, Trainer } from '../src/index.js';
import { loadArrow, loadCsv, loadNpy, loadNpz, toData, toNpy, type NpyArray } from '../src/io.js';
import { optionalImport } from '../src/formats/optional.js';
import { codeOf } from './support/errors.js';

const fx = join(__dirname, 'fixtures', 'npy');
const expected = JSON.parse(readFileSync(join(fx, 'expected.json'), 'utf8')).arrays as Record<
  string,
  { shape: number[]; values: Array<number | string | boolean> }
>;
const values = (a: NpyArray) => Array.from(a.data as ArrayLike<number | bigint>, (v) => (typeof v === 'bigint' ? String(v) : v));
const want = (e: { values: Array<number | string | boolean> }) => e.values.map((v) => (typeof v === 'boolean' ? Number(v) : v));

/** An aligned copy of a file's bytes in a fresh ArrayBuffer (readFileSync may return a pooled Buffer). */
const fileBytes = (name: string) => new Uint8Array(readFileSync(join(fx, name)));

async function rejectsWith(p: Promise<unknown>) {
  try {
    await p;
  } catch (e) {
    return e;
  }
  return undefined;
}

describe('.npy', () => {
  for (const name of ['f4', 'f8be', 'fortran', 'u1', 'bool', 'i8', 'i2be', 'scalar', 'empty']) {
    it(`${name}.npy: NumPy's shape and values`, () => {
      const a = loadNpy(join(fx, `${name}.npy`));
      expect(a.shape).toEqual(expected[name]!.shape);
      expect(values(a)).toEqual(want(expected[name]!));
    });
  }

  it('little-endian float32 data is a Float32Array over the file buffer (no copy); big-endian and Fortran order are copies', () => {
    const bytes = fileBytes('f4.npy');
    const a = loadNpy(bytes);
    expect(a.data).toBeInstanceOf(Float32Array);
    expect(a.data.buffer).toBe(bytes.buffer);
    bytes[bytes.length - 4]! ^= 0xff; // the view sees writes to the bytes
    expect(a.data[11]).not.toBe(11 / 7);
    const be = fileBytes('f8be.npy');
    expect(loadNpy(be).data.buffer).not.toBe(be.buffer);
    // Misaligned in its buffer: a copy, the same values.
    const shifted = new Uint8Array(fileBytes('f4.npy').length + 1).fill(0);
    shifted.set(fileBytes('f4.npy'), 1);
    expect(values(loadNpy(shifted.subarray(1)))).toEqual(want(expected.f4!));
  });

  it("toNpy writes what loadNpy (and NumPy's header rules: 64-byte aligned data) reads", () => {
    const data = Float64Array.from({ length: 6 }, (_, i) => i / 3);
    const bytes = toNpy(data, [2, 3]);
    const h = (bytes[8]! | (bytes[9]! << 8)) + 10;
    expect(h % 64).toBe(0);
    const a = loadNpy(bytes);
    expect(a).toMatchObject({ dtype: 'float64', shape: [2, 3] });
    expect(Array.from(a.data as Float64Array)).toEqual(Array.from(data));
    expect(toNpy(Uint8Array.of(1, 2)).subarray(10, 70).toString()).toBeTruthy();
    expect(codeOf(() => toNpy(data, [4, 2]))).toBe('BAD_DATA');
  });

  it('malformed headers and data: BAD_FILE naming the part (crafted)', () => {
    const good = fileBytes('f4.npy');
    const withHeader = (dict: string, data = new Uint8Array(48)) => {
      const head = Buffer.from(dict + '\n', 'latin1');
      const out = new Uint8Array(10 + head.length + data.length);
      out.set(good.subarray(0, 8));
      new DataView(out.buffer).setUint16(8, head.length, true);
      out.set(head, 10);
      out.set(data, 10 + head.length);
      return out;
    };
    const cases: Array<[Uint8Array, string]> = [
      [new Uint8Array(4), 'npy magic'],
      [Uint8Array.from([...good.subarray(0, 6), 9, 0, ...good.subarray(8)]), 'npy version'],
      [good.subarray(0, 60), 'npy header length'],
      [withHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), "), 'npy header'],
      [withHeader("{'descr': '<f4', 'shape': (3, 4), }"), 'npy header'],
      [withHeader("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3, 4), }"), 'npy header'],
      [withHeader("{'descr': '<c8', 'fortran_order': False, 'shape': (3, 4), }"), 'npy descr'],
      [withHeader("{'descr': '|f4', 'fortran_order': False, 'shape': (3, 4), }"), 'npy descr'],
      [withHeader("{'descr': '<f4', 'fortran_order': 0, 'shape': (3, 4), }"), 'npy header'],
      [withHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (99999, 99999), }"), 'npy shape'],
      [withHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 5), }"), 'npy data'],
      [withHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), 'x': 1}"), 'npy header'],
    ];
    for (const [bytes, field] of cases) {
      let err: unknown;
      try {
        loadNpy(bytes);
      } catch (e) {
        err = e;
      }
      expect(err, field).toBeInstanceOf(DataError);
      expect((err as DataError).code, field).toBe('BAD_FILE');
      expect((err as DataError).field, String((err as Error).message)).toBe(field);
    }
    expect(codeOf(() => loadNpy(join(fx, 'missing.npy')))).toBe('BAD_PATH');
    expect(codeOf(() => loadNpy(fx))).toBe('BAD_PATH');
  });

  it('fuzzed: byte flips and truncations of a real file give its values or BAD_FILE, nothing else', () => {
    const good = fileBytes('fortran.npy');
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(127), fc.nat(255)), { maxLength: 4 }), fc.nat(good.length), (flips, cut) => {
        const b = good.slice(0, cut === 0 ? good.length : cut);
        for (const [i, v] of flips) if (i < b.length) b[i] = v;
        expect([undefined, 'BAD_FILE']).toContain(codeOf(() => loadNpy(b)));
      }),
      { numRuns: 1500 },
    );
  });
});

describe('.npz', () => {
  for (const name of ['stored', 'deflated']) {
    it(`${name}.npz (np.savez${name === 'deflated' ? '_compressed' : ''}): every member, by name`, () => {
      const z = loadNpz(join(fx, `${name}.npz`));
      expect(Object.keys(z).sort()).toEqual(['labels', 'x']);
      for (const k of ['x', 'labels']) {
        expect(z[k]!.shape).toEqual((expected.npz as unknown as Record<string, { shape: number[] }>)[k]!.shape);
        expect(values(z[k]!)).toEqual(want((expected.npz as unknown as Record<string, { values: number[] }>)[k]!));
      }
    });
  }

  it('fuzzed: flips and truncations of both archives give a result or BAD_FILE (CRC-32 catches flipped data)', () => {
    for (const name of ['stored.npz', 'deflated.npz']) {
      const good = fileBytes(name);
      fc.assert(
        fc.property(fc.array(fc.tuple(fc.nat(good.length - 1), fc.nat(255)), { minLength: 1, maxLength: 4 }), fc.nat(good.length), (flips, cut) => {
          const b = good.slice(0, cut === 0 ? good.length : cut);
          for (const [i, v] of flips) if (i < b.length) b[i] = v;
          expect([undefined, 'BAD_FILE']).toContain(codeOf(() => loadNpz(b)));
        }),
        { numRuns: 800 },
      );
    }
    if ((zlib as { crc32?: unknown }).crc32) {
      const b = fileBytes('stored.npz');
      b[200]! ^= 1; // inside x's data
      expect(codeOf(() => loadNpz(b))).toBe('BAD_FILE');
    }
    expect(codeOf(() => loadNpz(fileBytes('f4.npy')))).toBe('BAD_FILE');
  });
});

describe('CSV', () => {
  const text = (s: string) => Buffer.from(s, 'utf8');
  it('parses a header row and numbers (quotes, CRLF, BOM, spaces) into one row-major array', () => {
    const t = loadCsv(text('\ufeffa, "b c",label\r\n1.5,2,0\r\n-3e2, "4" ,1\r\n'));
    expect(t.columns).toEqual(['a', 'b c', 'label']);
    expect(t.rows).toBe(2);
    expect(t.data).toBeInstanceOf(Float32Array);
    expect(Array.from(t.data)).toEqual([1.5, 2, 0, -300, 4, 1]);
    const t64 = loadCsv(text('x;y\n0.1;2\n'), { delimiter: ';', dtype: 'float64' });
    expect(Array.from(t64.data)).toEqual([0.1, 2]);
  });

  it('bad files: BAD_FILE naming the line and column; bad options: BAD_DATA', () => {
    const cases: Array<[string, string]> = [
      ['', 'csv'],
      ['a,b\n1,2\n3\n', 'line 3'],
      ['a,b\n1,x\n', 'line 2, column "b"'],
      ['a,b\n1,\n', 'line 2, column "b"'],
      ['a,b\n1,1e39\n', 'line 2, column "b"'],
      ['a,a\n1,2\n', 'line 1'],
      ['a,\n1,2\n', 'line 1'],
      ['a,b\n"1,2\n', 'line 2'],
    ];
    for (const [csv, field] of cases) {
      let err: unknown;
      try {
        loadCsv(text(csv));
      } catch (e) {
        err = e;
      }
      expect(err, csv).toBeInstanceOf(DataError);
      expect((err as DataError).code).toBe('BAD_FILE');
      expect((err as DataError).field).toBe(field);
    }
    expect(codeOf(() => loadCsv(text('a\n1\n'), { delimiter: '"' }))).toBe('BAD_DATA');
    expect(codeOf(() => loadCsv(Uint8Array.of(0xff, 0xfe, 0x41)))).toBe('BAD_FILE');
  });

  it('fuzzed text: a table or BAD_FILE', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[0-9a-c,.\-e"\r\n ]{0,60}$/), (s) => {
        expect([undefined, 'BAD_FILE']).toContain(codeOf(() => loadCsv(text(s))));
      }),
      { numRuns: 1500 },
    );
  });

  it('toData gives fit its { x, labels }: a network trains on a CSV file', async () => {
    const lines = ['f1,label,f2'];
    for (let i = 0; i < 40; i++) lines.push(`${Math.sin(i)},${i % 2},${Math.cos(i)}`);
    const d = toData(loadCsv(text(lines.join('\n'))), { labels: 'label' });
    expect(d.inputs).toBe(2);
    expect(Array.from((d.x as Float32Array).slice(0, 4))).toEqual([0, 1, Math.sin(1), Math.cos(1)].map(Math.fround));
    expect(Array.from(d.labels as Float64Array).slice(0, 4)).toEqual([0, 1, 0, 1]);
    const arena = Arena.create(planLayout({ layers: [2, 4, 2], batch: 8, samples: 40 }), { backend: 'cpu' });
    try {
      const t = new Trainer(arena);
      t.init(1);
      const r = await t.fit(d, { epochs: 2 });
      expect(r.steps).toBe(10);
    } finally {
      arena.dispose();
    }
    expect(codeOf(() => toData(loadCsv(text('a,b\n1,2\n')), { labels: 'c' }))).toBe('BAD_DATA');
    expect(codeOf(() => toData(loadCsv(text('a\n1\n')), { labels: 'a' }))).toBe('BAD_DATA');
  });
});

describe('Apache Arrow IPC', () => {
  it('numeric columns as typed arrays over the IPC bytes (one batch), joined over several; toData', async () => {
    const arrow = await import('apache-arrow');
    const a = Float32Array.from({ length: 10 }, (_, i) => i / 4);
    const b = Int32Array.from({ length: 10 }, (_, i) => i % 3);
    const c = BigInt64Array.from({ length: 10 }, (_, i) => BigInt(i * 1000));
    for (const format of ['file', 'stream'] as const) {
      const bytes = arrow.tableToIPC(arrow.tableFromArrays({ a, b, c }), format);
      const t = await loadArrow(bytes);
      expect(t.columns).toEqual(['a', 'b', 'c']);
      expect(t.rows).toBe(10);
      expect(t.arrays[0]).toBeInstanceOf(Float32Array);
      expect(t.arrays[0]!.buffer).toBe(bytes.buffer); // no copy
      expect(Array.from(t.arrays[0] as Float32Array)).toEqual(Array.from(a));
      expect(Array.from(t.arrays[2] as BigInt64Array)).toEqual(Array.from(c));
      const d = toData(t, { y: ['a'], x: ['c', 'b'] });
      expect(Array.from(d.x as Float32Array).slice(0, 4)).toEqual([0, 0, 1000, 1]);
      expect(Array.from(d.y as Float32Array)).toEqual(Array.from(a));
    }
    const two = arrow.tableFromArrays({ a: a.subarray(0, 4) }).concat(arrow.tableFromArrays({ a: a.subarray(4) }));
    const joined = await loadArrow(arrow.tableToIPC(two));
    expect(Array.from(joined.arrays[0] as Float32Array)).toEqual(Array.from(a));
    const picked = await loadArrow(arrow.tableToIPC(arrow.tableFromArrays({ a, b })), { columns: ['b'] });
    expect(picked.columns).toEqual(['b']);
  });

  it('nulls, non-numeric columns, unknown columns and bad bytes are typed errors naming them', async () => {
    const arrow = await import('apache-arrow');
    const cases: Array<[Promise<unknown>, string, string]> = [
      [loadArrow(arrow.tableToIPC(new arrow.Table({ n: arrow.vectorFromArray([1, null, 3], new arrow.Float64()) }))), 'BAD_FILE', 'column "n"'],
      [loadArrow(arrow.tableToIPC(arrow.tableFromArrays({ s: ['x', 'y'] }))), 'BAD_FILE', 'column "s"'],
      [loadArrow(arrow.tableToIPC(arrow.tableFromArrays({ a: Float32Array.of(1) })), { columns: ['z'] }), 'BAD_DATA', 'columns[0]'],
      [loadArrow(Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8, 9)), 'BAD_FILE', 'arrow'],
    ];
    for (const [p, code, field] of cases) {
      const e = await rejectsWith(p);
      expect(e, field).toBeInstanceOf(DataError);
      expect((e as DataError).code).toBe(code);
      expect((e as DataError).field).toBe(field);
    }
  });

  it('a missing optional package is ArenaError NO_PACKAGE naming it', async () => {
    const e = await rejectsWith(optionalImport('nn-arena-no-such-package', 'loadArrow'));
    expect((e as { code?: string }).code).toBe('NO_PACKAGE');
    expect((e as Error).message).toContain("'nn-arena-no-such-package'");
  });
});
