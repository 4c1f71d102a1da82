// csv.ts: numeric CSV with a header row, parsed straight into one row-major typed array (no
// intermediate arrays of numbers per row). Fields may be double-quoted (RFC 4180, "" for a
// quote, no line breaks inside, spaces and tabs around them ignored unless they are the
// delimiter); a line ends at \n, \r\n or a lone \r (so files with any of those endings, or a mix,
// split where each break is); a UTF-8 byte-order mark and a last empty line are allowed. Every
// cell must be a finite decimal number: a refusal is a DataError BAD_FILE naming the line and
// column. Every scan is bounded by its line, so the work is linear in the text.
import { DataError } from '../core/errors.js';
import type { Dtype } from '../layout/header.js';
import { bytesOf } from './file.js';
import type { RowTable } from './table.js';

export interface CsvOptions {
  /** One character (default ','). */
  delimiter?: string;
  /** Element type of `data` (default 'float32'). */
  dtype?: Dtype;
}

const LF = 10,
  CR = 13,
  SPACE = 32,
  TAB = 9,
  QUOTE = 34;

/** A decimal number, as written in a data file. Number() also takes hex, binary and octal
 *  literals, Infinity and blank text (as 0), none of which is a value a CSV cell means. */
const DECIMAL = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

const bad = (field: string, value: unknown, why: string) => new DataError('BAD_FILE', field, value, why);

/** Splits text[start, end) (one line, without its break) into `out`; `line` is for messages. */
function fields(text: string, start: number, end: number, delim: number, line: number, out: string[]): string[] {
  out.length = 0;
  // Spaces and tabs around a quoted field are not part of it, unless one is the delimiter.
  const blank = (c: number) => (c === SPACE || c === TAB) && c !== delim;
  const shown = () => text.slice(start, Math.min(end, start + 80));
  let i = start;
  for (;;) {
    let j = i;
    while (j < end && blank(text.charCodeAt(j))) j++;
    if (j < end && text.charCodeAt(j) === QUOTE) {
      let s = '';
      i = j + 1;
      for (;;) {
        let q = i;
        while (q < end && text.charCodeAt(q) !== QUOTE) q++;
        if (q >= end) throw bad(`line ${line}`, shown(), 'has an unterminated quoted field');
        s += text.slice(i, q);
        if (q + 1 < end && text.charCodeAt(q + 1) === QUOTE) {
          s += '"';
          i = q + 2;
          continue;
        }
        i = q + 1;
        break;
      }
      out.push(s);
      while (i < end && blank(text.charCodeAt(i))) i++;
      if (i < end && text.charCodeAt(i) !== delim) throw bad(`line ${line}`, shown(), 'has text after a closing quote');
    } else {
      let e = i;
      while (e < end && text.charCodeAt(e) !== delim) e++;
      out.push(text.slice(i, e));
      i = e;
    }
    if (i >= end) return out;
    i++; // the delimiter
    if (i === end) {
      out.push('');
      return out;
    }
  }
}

/** Reads a numeric CSV file with a header row (a path, or its bytes). */
export function loadCsv(source: string | Uint8Array, options: CsvOptions = {}): RowTable {
  if (options === null || typeof options !== 'object') throw new DataError('BAD_DATA', 'options', options, 'must be an object { delimiter?, dtype? }');
  const { delimiter = ',', dtype = 'float32' } = options;
  if (typeof delimiter !== 'string' || delimiter.length !== 1 || delimiter === '"' || delimiter === '\n' || delimiter === '\r') {
    throw new DataError('BAD_DATA', 'delimiter', delimiter, 'must be one character other than a quote or a line break');
  }
  if (dtype !== 'float32' && dtype !== 'float64') throw new DataError('BAD_DATA', 'dtype', dtype, "must be 'float32' or 'float64'");
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytesOf(source));
  } catch (e) {
    if (e instanceof DataError || (e as { code?: string }).code === 'BAD_PATH') throw e;
    throw bad('csv', 'bytes', 'is not UTF-8 text');
  }
  // Line starts and ends, without their breaks (\n, \r\n or \r).
  const starts: number[] = [];
  const ends: number[] = [];
  let s = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c !== LF && c !== CR) continue;
    starts.push(s);
    ends.push(i);
    if (c === CR && text.charCodeAt(i + 1) === LF) i++;
    s = i + 1;
  }
  if (s < text.length) {
    starts.push(s);
    ends.push(text.length);
  }
  if (starts.length > 0 && starts[starts.length - 1] === ends[ends.length - 1]) {
    starts.pop();
    ends.pop();
  }
  if (starts.length === 0) throw bad('csv', '', 'is empty: a header row is needed');
  const delim = delimiter.charCodeAt(0);
  const f: string[] = [];
  const columns = fields(text, starts[0]!, ends[0]!, delim, 1, f).map((c) => c.trim());
  const seen = new Set<string>();
  columns.forEach((c, i) => {
    if (c === '') throw bad('line 1', i, `column ${i + 1} has no name`);
    if (seen.has(c)) throw bad('line 1', c, 'names a column twice');
    seen.add(c);
  });
  const rows = starts.length - 1;
  const width = columns.length;
  let data: Float32Array | Float64Array;
  try {
    data = dtype === 'float64' ? new Float64Array(rows * width) : new Float32Array(rows * width);
  } catch {
    throw bad('csv', rows, 'has too many rows to hold in memory');
  }
  for (let r = 0; r < rows; r++) {
    fields(text, starts[r + 1]!, ends[r + 1]!, delim, r + 2, f);
    if (f.length !== width) throw bad(`line ${r + 2}`, f.length, `has ${f.length} fields; the header names ${width}`);
    for (let c = 0; c < width; c++) {
      const cell = f[c]!.trim();
      if (!DECIMAL.test(cell)) throw bad(`line ${r + 2}, column "${columns[c]}"`, f[c], 'is not a decimal number');
      const v = Number(cell);
      const stored = dtype === 'float32' ? Math.fround(v) : v;
      if (!Number.isFinite(stored)) throw bad(`line ${r + 2}, column "${columns[c]}"`, f[c], `is not a finite ${dtype} number`);
      data[r * width + c] = v;
    }
  }
  return { columns, rows, data };
}
