// csv.ts: numeric CSV with a header row, parsed straight into one row-major typed array (no
// intermediate arrays of numbers or strings per row). Fields may be double-quoted (RFC 4180,
// "" for a quote, no line breaks inside, spaces around them ignored); lines end in \n or \r\n; a UTF-8 byte-order mark and a
// last empty line are allowed. Every cell must be a finite number: a refusal is a DataError
// BAD_FILE naming the line and column.
import { DataError } from '../errors.js';
import type { Dtype } from '../layout/header.js';
import { bytesOf } from './file.js';
import type { RowTable } from './table.js';

export interface CsvOptions {
  /** One character (default ','). */
  delimiter?: string;
  /** Element type of `data` (default 'float32'). */
  dtype?: Dtype;
}


const bad = (field: string, value: unknown, why: string) => new DataError('BAD_FILE', field, value, why);

/** Splits one line into fields; `line` is for messages. */
function fields(text: string, start: number, end: number, delim: string, line: number): string[] {
  const out: string[] = [];
  let i = start;
  const blank = (j: number) => text[j] === ' ' || text[j] === '\t';
  for (;;) {
    let j = i;
    while (j < end && blank(j)) j++;  // spaces around a quoted field are not part of it
    if (text[j] === '"') {
      let s = '';
      i = j + 1;
      for (;;) {
        const q = text.indexOf('"', i);
        if (q < 0 || q >= end) throw bad(`line ${line}`, text.slice(start, Math.min(end, start + 80)), 'has an unterminated quoted field');
        s += text.slice(i, q);
        if (text[q + 1] === '"') { s += '"'; i = q + 2; continue; }
        i = q + 1;
        break;
      }
      out.push(s);
      while (i < end && blank(i)) i++;
      if (i < end && text[i] !== delim) throw bad(`line ${line}`, text.slice(start, Math.min(end, start + 80)), 'has text after a closing quote');
    } else {
      const d = text.indexOf(delim, i);
      const e = d < 0 || d > end ? end : d;
      out.push(text.slice(i, e));
      i = e;
    }
    if (i >= end) return out;
    i++;  // the delimiter
    if (i === end) { out.push(''); return out; }
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
  try { text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytesOf(source)); } catch (e) {
    if (e instanceof DataError || (e as { code?: string }).code === 'BAD_PATH') throw e;
    throw bad('csv', 'bytes', 'is not UTF-8 text');
  }
  // Line starts and ends (a \r before \n is not part of the line).
  const lines: Array<[number, number]> = [];
  for (let s = 0; s < text.length;) {
    let e = text.indexOf('\n', s);
    const next = e < 0 ? text.length : e + 1;
    if (e < 0) e = text.length;
    lines.push([s, e > s && text[e - 1] === '\r' ? e - 1 : e]);
    s = next;
  }
  if (lines.length > 0 && lines[lines.length - 1]![0] === lines[lines.length - 1]![1]) lines.pop();
  if (lines.length === 0) throw bad('csv', '', 'is empty: a header row is needed');
  const columns = fields(text, lines[0]![0], lines[0]![1], delimiter, 1).map((c) => c.trim());
  columns.forEach((c, i) => {
    if (c === '') throw bad('line 1', i, `column ${i + 1} has no name`);
    if (columns.indexOf(c) !== i) throw bad('line 1', c, 'names a column twice');
  });
  const rows = lines.length - 1;
  const width = columns.length;
  let data: Float32Array | Float64Array;
  try { data = dtype === 'float64' ? new Float64Array(rows * width) : new Float32Array(rows * width); } catch { throw bad('csv', rows, 'has too many rows to hold in memory'); }
  for (let r = 0; r < rows; r++) {
    const [s, e] = lines[r + 1]!;
    const f = fields(text, s, e, delimiter, r + 2);
    if (f.length !== width) throw bad(`line ${r + 2}`, f.length, `has ${f.length} fields; the header names ${width}`);
    for (let c = 0; c < width; c++) {
      const cell = f[c]!.trim();
      const v = cell === '' ? NaN : Number(cell);
      const stored = dtype === 'float32' ? Math.fround(v) : v;
      if (!Number.isFinite(stored)) throw bad(`line ${r + 2}, column "${columns[c]}"`, f[c], `is not a finite ${dtype} number`);
      data[r * width + c] = v;
    }
  }
  return { columns, rows, data };
}
