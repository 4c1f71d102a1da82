// table.ts: from a loaded table (CSV rows, Arrow columns) to the { x, labels } / { x, y } that
// fit, evaluate and predict take: chosen columns become the targets, the rest (or the chosen
// x columns) the row-major inputs, in one pass.
import { DataError, OptionError } from '../core/errors.js';
import type { Dtype } from '../layout/header.js';

/** A data set as the Trainer takes it (fit, evaluate, step, predict): inputs and labels or targets. */
export interface Data {
  /** count x inputs values, row-major. */
  x: ArrayLike<number>;
  /** Integer class labels in [0, outputs): one-hot targets are made from them. */
  labels?: ArrayLike<number>;
  /** Or count x outputs target values (one-hot rows for cross-entropy, any values for mse). */
  y?: ArrayLike<number>;
  /** Optional: the width the data was made for; must equal the input layer's units. */
  inputs?: number;
}

/** A table of numbers, row-major: `data[r * columns.length + c]` is row r's value in column c
 *  (loadCsv). */
export interface RowTable {
  columns: string[];
  rows: number;
  data: Float32Array | Float64Array;
}

/** A table of numbers, by column: `arrays[c][r]` is row r's value in column `columns[c]`
 *  (loadArrow). */
export interface ColumnTable {
  columns: string[];
  rows: number;
  arrays: NumericArray[];
}

export type NumericArray =
  Float32Array | Float64Array | Int8Array | Uint8Array | Int16Array | Uint16Array | Int32Array | Uint32Array | BigInt64Array | BigUint64Array;

export interface ColumnChoice {
  /** The column of integer class labels. */
  labels?: string;
  /** Or the columns of target values. */
  y?: readonly string[];
  /** The input columns (default: every column that is not a target). */
  x?: readonly string[];
  /** Element type of x and y (default 'float32'). */
  dtype?: Dtype;
}

const DTYPES: readonly Dtype[] = ['float32', 'float64'];

/** A list of column names (DataError BAD_DATA naming `field`). */
function names(v: unknown, field: string): readonly string[] {
  if (!Array.isArray(v) || !v.every((n) => typeof n === 'string')) throw new DataError('BAD_DATA', field, v, 'must be an array of column names');
  return v;
}

/** The table's shape checked against its values: every row of every column is there to read
 *  (a short array would give NaN for the rows it lacks). */
function checkTable(table: unknown): asserts table is RowTable | ColumnTable {
  if (table === null || typeof table !== 'object')
    throw new DataError('BAD_DATA', 'table', table, 'must be a table { columns, rows, data } (loadCsv) or { columns, rows, arrays } (loadArrow)');
  const { columns, rows } = table as Partial<RowTable & ColumnTable>;
  const n = names(columns, 'table.columns').length;
  if (typeof rows !== 'number' || !Number.isSafeInteger(rows) || rows < 0) throw new DataError('BAD_DATA', 'table.rows', rows, 'must be a whole number');
  if ('data' in table) {
    const { data } = table as RowTable;
    if (!(data instanceof Float32Array || data instanceof Float64Array) || data.length !== rows * n) {
      throw new DataError(
        'BAD_DATA',
        'table.data',
        ArrayBuffer.isView(data) ? `${data.constructor.name} of ${(data as Float32Array).length}` : data,
        `must be a Float32Array or Float64Array of the ${rows} rows x ${n} columns`,
      );
    }
    return;
  }
  const { arrays } = table as ColumnTable;
  if (!Array.isArray(arrays) || arrays.length !== n)
    throw new DataError('BAD_DATA', 'table.arrays', Array.isArray(arrays) ? `${arrays.length} arrays` : arrays, `must be ${n} arrays, one per column`);
  arrays.forEach((a, i) => {
    if (!ArrayBuffer.isView(a) || a instanceof DataView || a.length < rows)
      throw new DataError(
        'BAD_DATA',
        `table.arrays[${i}]`,
        ArrayBuffer.isView(a) ? `${a.constructor.name} of ${(a as NumericArray).length}` : a,
        `must be a typed array of the ${rows} rows`,
      );
  });
}

/** `table`'s columns as training data: `{ x, labels, inputs }` or `{ x, y, inputs }`. */
export function toData(table: RowTable | ColumnTable, choice: ColumnChoice): Data & { inputs: number } {
  checkTable(table);
  if (choice === null || typeof choice !== 'object') throw new DataError('BAD_DATA', 'choice', choice, 'must be an object { labels } or { y }');
  const { labels, y, dtype = 'float32' } = choice;
  if (!DTYPES.includes(dtype)) throw new OptionError('BAD_OPTION', 'dtype', dtype, `must be one of ${DTYPES.map((d) => `'${d}'`).join(', ')}`);
  if ((labels === undefined) === (y === undefined))
    throw new DataError('BAD_DATA', 'choice', labels === undefined ? 'neither' : 'both', 'needs exactly one of labels or y');
  const { columns, rows } = table;
  const index = (name: unknown, field: string) => {
    const i = typeof name === 'string' ? columns.indexOf(name) : -1;
    if (i < 0) throw new DataError('BAD_DATA', field, name, `is not a column (${columns.join(', ')})`);
    return i;
  };
  const targets = labels !== undefined ? [index(labels, 'labels')] : names(y, 'y').map((n, i) => index(n, `y[${i}]`));
  const inputs =
    choice.x !== undefined ? names(choice.x, 'x').map((n, i) => index(n, `x[${i}]`)) : columns.map((_, i) => i).filter((i) => !targets.includes(i));
  // The labels among the inputs would hand the network its answers.
  const leak = labels !== undefined ? inputs.indexOf(targets[0]!) : -1;
  if (leak >= 0) throw new DataError('BAD_DATA', `x[${leak}]`, labels, 'is the labels column: inputs cannot include the labels');
  if (inputs.length === 0) throw new DataError('BAD_DATA', 'x', [], 'no input columns are left');
  const get: (r: number, c: number) => number = 'data' in table ? (r, c) => table.data[r * columns.length + c]! : (r, c) => Number(table.arrays[c]![r]!);
  const make = (n: number) => (dtype === 'float64' ? new Float64Array(n) : new Float32Array(n));
  const x = make(rows * inputs.length);
  for (let r = 0, k = 0; r < rows; r++) for (const c of inputs) x[k++] = get(r, c);
  if (labels !== undefined) {
    const ls = new Float64Array(rows);
    for (let r = 0; r < rows; r++) ls[r] = get(r, targets[0]!);
    return { x, labels: ls, inputs: inputs.length };
  }
  const ys = make(rows * targets.length);
  for (let r = 0, k = 0; r < rows; r++) for (const c of targets) ys[k++] = get(r, c);
  return { x, y: ys, inputs: inputs.length };
}
