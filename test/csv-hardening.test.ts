// csv-hardening.test.ts: the CSV reader under the inputs of issue 51. Its work is linear in the
// text (one column as well as many), lines end at \n, \r\n or a lone \r, a quoted field may
// sit next to any delimiter (tab and space too), and a cell is a decimal number: a hex, binary
// or octal literal, Infinity or blank text is a DataError BAD_FILE naming the line, the column
// and the text, never a number.
import { describe, expect, it } from 'vitest';
import { DataError } from '../src/index.js';
import { loadCsv, type CsvOptions } from '../src/io.js';

const text = (s: string) => Buffer.from(s, 'utf8');
const load = (s: string, options?: CsvOptions) => loadCsv(text(s), options);

function refusal(s: string, options?: CsvOptions): DataError {
  let err: unknown;
  try {
    load(s, options);
  } catch (e) {
    err = e;
  }
  expect(err, JSON.stringify(s)).toBeInstanceOf(DataError);
  expect((err as DataError).code).toBe('BAD_FILE');
  return err as DataError;
}

/** How many characters of strings are looked at while `f` runs: one per charCodeAt, and the
 *  span an indexOf scans (to its match, or to the end of the string). */
function charactersRead(f: () => void): number {
  const proto = String.prototype;
  const { charCodeAt, indexOf } = proto;
  let read = 0;
  proto.charCodeAt = function (this: string, i?: number) {
    read++;
    return charCodeAt.call(this, i as number);
  };
  proto.indexOf = function (this: string, search: string, from?: number) {
    const at = indexOf.call(this, search, from);
    read += (at < 0 ? this.length : at) - Math.max(0, Math.min(from ?? 0, this.length));
    return at;
  };
  try {
    f();
  } finally {
    proto.charCodeAt = charCodeAt;
    proto.indexOf = indexOf;
  }
  return read;
}

describe('one column is linear in the text', () => {
  it('the characters read stay within a few passes over the text, for one column as for two', () => {
    for (const width of [1, 2]) {
      const lines = [width === 1 ? 'a' : 'a,b'];
      for (let r = 0; r < 20_000; r++) lines.push(width === 1 ? `${r % 1000}` : `${r % 1000},${r % 7}`);
      const s = lines.join('\n') + '\n';
      let rows = 0;
      const read = charactersRead(() => {
        rows = load(s).rows;
      });
      expect(rows).toBe(20_000);
      expect(read, `${width} column(s)`).toBeLessThan(4 * s.length);
    }
  });

  it('400k rows of one column load whole and right', () => {
    const n = 400_000;
    const lines = ['value'];
    for (let r = 0; r < n; r++) lines.push(String((r % 2001) - 1000));
    const bytes = text(lines.join('\n') + '\n');
    const t0 = performance.now();
    const t = loadCsv(bytes, { dtype: 'float64' });
    console.log(`csv: 400k rows x 1 column loaded in ${(performance.now() - t0).toFixed(0)} ms`);
    expect(t.columns).toEqual(['value']);
    expect(t.rows).toBe(n);
    expect(t.data.length).toBe(n);
    let sum = 0;
    for (let r = 0; r < n; r++) {
      if (t.data[r] !== (r % 2001) - 1000) throw new Error(`row ${r}: ${t.data[r]}`);
      sum += t.data[r]!;
    }
    expect(sum).toBe(lines.slice(1).reduce((a, v) => a + Number(v), 0));
  });
});

describe('line endings', () => {
  it('CR-only lines are rows, as LF and CRLF lines are', () => {
    for (const eol of ['\r', '\n', '\r\n']) {
      const t = load(['a,b', '1,2', '3,4', '5,6'].join(eol) + eol);
      expect(t.columns, JSON.stringify(eol)).toEqual(['a', 'b']);
      expect(t.rows).toBe(3);
      expect(Array.from(t.data)).toEqual([1, 2, 3, 4, 5, 6]);
    }
    const cr = load('x;"y z"\r"1";2.5\r-3;"4"', { delimiter: ';' });
    expect(cr.columns).toEqual(['x', 'y z']);
    expect(Array.from(cr.data)).toEqual([1, 2.5, -3, 4]);
  });

  it('mixed endings split at each break; a CR-only file with a bad row names its line', () => {
    const t = load('a\r\n1\r2\n3\r\n4');
    expect(t.rows).toBe(4);
    expect(Array.from(t.data)).toEqual([1, 2, 3, 4]);
    expect(refusal('a,b\r1,2\r3\r').field).toBe('line 3');
    expect(refusal('a,b\r1,2\r3,x\r').field).toBe('line 3, column "b"');
    // A last empty line is allowed after any ending; two are not.
    expect(load('a\r1\r\r').rows).toBe(1);
    expect(refusal('a\r1\r\r\r').field).toBe('line 3, column "a"');
  });
});

describe('quoted fields with any delimiter', () => {
  it('tab-separated values with quoted fields (spaces around them ignored)', () => {
    const t = load('"a"\t "b c" \t"d"\n"1"\t2\t "3" \n-4\t"5"\t6\n', { delimiter: '\t' });
    expect(t.columns).toEqual(['a', 'b c', 'd']);
    expect(Array.from(t.data)).toEqual([1, 2, 3, -4, 5, 6]);
  });

  it('an empty first field before a tab is a field, not a blank to skip', () => {
    expect(refusal('a\tb\n\t"2"\n', { delimiter: '\t' }).field).toBe('line 2, column "a"');
  });

  it('semicolon, space and pipe delimiters with quoted fields', () => {
    for (const d of [';', ' ', '|', ',']) {
      const t = load(`"a"${d}"b"\n"1"${d}"-2.5"\n3${d}"4"\n`, { delimiter: d });
      expect(t.columns, d).toEqual(['a', 'b']);
      expect(Array.from(t.data), d).toEqual([1, -2.5, 3, 4]);
    }
  });

  it('text after a closing quote is still refused', () => {
    expect(refusal('a\tb\n"1"x\t2\n', { delimiter: '\t' }).field).toBe('line 2');
  });
});

describe('decimal numbers only', () => {
  it('decimals in their usual forms are read', () => {
    const cells = ['1', '-2.5', '1e-3', '.5', '+3', '5.', '1E+2', ' 7 ', '"8"', '007', '-0'];
    const t = load(`${cells.map((_, i) => `c${i}`).join(',')}\n${cells.join(',')}\n`, { dtype: 'float64' });
    expect(Array.from(t.data)).toEqual([1, -2.5, 1e-3, 0.5, 3, 5, 100, 7, 8, 7, -0]);
  });

  it('hex, binary, octal, Infinity, NaN and empty-looking text: BAD_FILE naming the line, the column and the text', () => {
    const cells = [
      '0x10',
      '0b11',
      '0o7',
      '0X1F',
      ' 0x10 ',
      '"0x10"',
      'Infinity',
      '-Infinity',
      'NaN',
      '',
      ' ',
      '""',
      '" "',
      '1_000',
      '.',
      '-',
      'e5',
      '1e',
      '1.2.3',
      '١٢',
    ];
    for (const cell of cells) {
      const err = refusal(`a,b\n1,2\n3,${cell}\n`);
      expect(err.field, cell).toBe('line 3, column "b"');
      const raw = cell.startsWith('"') ? cell.slice(1, -1) : cell;
      expect(err.value, cell).toBe(raw);
      expect(err.message).toContain(`line 3, column "b"`);
      expect(err.message).toContain(JSON.stringify(raw));
    }
  });

  it('a decimal too large for the dtype is still refused', () => {
    expect(refusal('a\n1e39\n').message).toMatch(/not a finite float32 number/);
    expect(load('a\n1e39\n', { dtype: 'float64' }).data[0]).toBe(1e39);
  });
});
