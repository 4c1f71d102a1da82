// arrow.ts: Apache Arrow IPC (file or stream format) through the `apache-arrow` package, an
// optional peer dependency loaded when first used (ArenaError NO_PACKAGE when absent). Numeric
// columns (float32/64, int8-64, uint8-64) become typed arrays; a column held in one record batch
// is a view over the bytes read (no copy), one spread over several batches is joined (one copy).
// Null values, other types and a bad file are DataError BAD_FILE naming the column. The bytes are
// checked (src/formats/arrow-ipc.ts) before apache-arrow reads them: it trusts every length they
// state, and one flipped bit in a count has it build billions of entries.
import { DataError } from '../core/errors.js';
import { checkArrowIpc } from './arrow-ipc.js';
import { bytesOf } from './file.js';
import type { ColumnTable, NumericArray } from './table.js';
import { optionalImport } from './optional.js';

export interface ArrowOptions {
  /** Columns to read, in this order (default: all). */
  columns?: readonly string[];
}

// The part of apache-arrow used here (typed structurally: the package stays optional).
interface ArrowField {
  name: string;
  type: { typeId: number; precision?: number; bitWidth?: number; toString(): string };
}
interface ArrowVector {
  nullCount: number;
  length: number;
  data: unknown[];
  toArray(): unknown;
}
interface ArrowTable {
  numRows: number;
  schema: { fields: ArrowField[] };
  getChild(name: string): ArrowVector | null;
}
interface ArrowModule {
  tableFromIPC(bytes: Uint8Array): ArrowTable;
  Type: Record<string, number>;
}

const bad = (field: string, value: unknown, why: string) => new DataError('BAD_FILE', field, value, why);

/** Reads an Arrow IPC file or stream (a path or its bytes). */
export async function loadArrow(source: string | Uint8Array, options: ArrowOptions = {}): Promise<ColumnTable> {
  if (options === null || typeof options !== 'object') throw new DataError('BAD_DATA', 'options', options, 'must be an object { columns? }');
  const bytes = bytesOf(source);
  const arrow = await optionalImport<ArrowModule>('apache-arrow', 'loadArrow');
  checkArrowIpc(bytes);
  let table: ArrowTable;
  try {
    table = arrow.tableFromIPC(bytes);
  } catch (e) {
    throw bad('arrow', `${bytes.length} bytes`, `is not Arrow IPC data (${(e as Error)?.message})`);
  }
  const names = table.schema.fields.map((f) => f.name);
  const wanted = options.columns ?? names;
  if (!Array.isArray(wanted)) throw new DataError('BAD_DATA', 'columns', wanted, 'must be an array of column names');
  const arrays = wanted.map((name: unknown, i) => {
    const field = table.schema.fields.find((f) => f.name === name);
    if (typeof name !== 'string' || !field) throw new DataError('BAD_DATA', `columns[${i}]`, name, `is not a column of the table (${names.join(', ')})`);
    const t = field.type;
    const numeric = t.typeId === arrow.Type.Int || (t.typeId === arrow.Type.Float && t.precision !== 0); // precision 0: float16
    if (!numeric) throw bad(`column "${name}"`, t.toString(), 'is not a numeric column (float32/64 or an integer type)');
    const v = table.getChild(name)!;
    if (v.nullCount > 0) throw bad(`column "${name}"`, v.nullCount, 'holds null values');
    const array = v.toArray() as NumericArray;
    if (array.length !== table.numRows) throw bad(`column "${name}"`, array.length, `holds ${array.length} values in a table of ${table.numRows} rows`);
    return array;
  });
  return { columns: wanted.slice() as string[], rows: table.numRows, arrays };
}
