// arrow-ipc.ts: a check of Arrow IPC bytes (stream or file format) before apache-arrow reads
// them. apache-arrow trusts every length and count the bytes state: one flipped bit in a vector's
// length has it build a billion objects, one in a buffer's offset reads past the body. This walks
// what it will read: each message's framing within the bytes; every table, vector and string
// within its message; a schema first and once; record batches whose field nodes and buffers are
// exactly the ones its columns need, each buffer 8-byte aligned within the body and large enough
// for its column's length and type, every column as long as the batch; in the file format, the
// footer's blocks within the file, apart from each other and agreeing with their messages.
// Anything else is a DataError BAD_FILE; what passes reads in time and memory in proportion to
// its size.
import { DataError } from '../core/errors.js';
import { Flat, Table } from './flatbuffer.js';

const V4 = 3,
  V5 = 4; // MetadataVersion
const SCHEMA = 1,
  DICTIONARY_BATCH = 2,
  RECORD_BATCH = 3; // MessageHeader
const MAGIC = [0x41, 0x52, 0x52, 0x4f, 0x57, 0x31]; // ARROW1
const MAX_DEPTH = 64;

const bad = (value: unknown, why: string, field = 'arrow') => new DataError('BAD_FILE', field, value, why);

/** What a record batch holds for one column. */
interface Column {
  name: string;
  kind: 'null' | 'fixed' | 'bool' | 'binary' | 'view' | 'list' | 'fixedList' | 'struct' | 'sparse' | 'dense';
  /** fixed: bits a value; binary, list: bytes an offset; fixedList: values a list. */
  size: number;
  children: Column[];
}

interface Schema {
  columns: Column[];
  dictionaries: Map<number, Column>;
  version: number;
}

function checkVersion(flat: Flat, version: number): void {
  if (version !== V4 && version !== V5) throw flat.fail(version, 'has an Arrow metadata version other than V4 or V5');
}

/** Custom metadata: key / value strings. */
function keyValues(t: Table, i: number): void {
  for (const kv of t.tables(i, 'custom metadata')) {
    kv.string(0, 'metadata key');
    kv.string(1, 'metadata value');
  }
}

function readSchema(t: Table, version: number): Schema {
  const flat = t.flat;
  checkVersion(flat, version);
  if (t.i16(0, 0) !== 0) throw flat.fail(t.i16(0, 0), 'is big-endian, which apache-arrow does not read');
  const dictionaries = new Map<number, Column>();
  // A field may be reached twice (two offsets to one table): bound the fields visited by the
  // bytes that could hold them, so shared subtrees cannot multiply.
  const budget = { left: Math.floor(flat.size / 8) + 8 };
  const columns = t.tables(1, 'fields').map((f) => readField(f, dictionaries, 0, budget));
  keyValues(t, 2);
  t.vector(3, 8, 'features');
  return { columns, dictionaries, version };
}

function readField(f: Table, dictionaries: Map<number, Column>, depth: number, budget: { left: number }): Column {
  const flat = f.flat;
  if (depth > MAX_DEPTH) throw flat.fail(depth, `nests fields more than ${MAX_DEPTH} deep`);
  if (--budget.left < 0) throw flat.fail(flat.size, 'holds more fields than its bytes can');
  const name = f.string(0, 'field name');
  f.u8(1, 0);
  const children = f.tables(5, 'field children').map((c) => readField(c, dictionaries, depth + 1, budget));
  keyValues(f, 6);
  const value = columnOf(f, name, children);
  const dict = f.table(4, 'dictionary encoding');
  if (!dict) return value;
  const id = dict.count(0, 'dictionary id');
  const index = dict.table(1, 'dictionary index type');
  const bits = index ? index.i32(0, 0) : 32;
  if (index) index.u8(1, 0);
  dict.u8(2, 0);
  dict.i16(3, 0);
  if (![8, 16, 32, 64].includes(bits)) throw flat.fail(bits, 'has a dictionary index width other than 8, 16, 32 or 64 bits', `column "${name}"`);
  if (!dictionaries.has(id)) dictionaries.set(id, value);
  return { name, kind: 'fixed', size: bits, children: [] }; // a record batch holds the indices
}

/** The layout of a field's type (the Type union of Schema.fbs), its parameters checked. */
function columnOf(f: Table, name: string, children: Column[]): Column {
  const flat = f.flat,
    field = `column "${name}"`;
  const typeId = f.u8(2, 0);
  const type = () => {
    const t = f.table(3, 'field type');
    if (!t) throw flat.fail(typeId, `has no parameters for its type ${typeId}`, field);
    return t;
  };
  const col = (kind: Column['kind'], size = 0): Column => ({ name, kind, size, children });
  const oneOf = (v: number, allowed: number[], what: string) => {
    if (!allowed.includes(v)) throw flat.fail(v, `has a ${what} other than ${allowed.join(', ')}`, field);
    return v;
  };
  const oneChild = (c: Column) => {
    if (children.length !== 1) throw flat.fail(children.length, 'is a list type without exactly one child field', field);
    return c;
  };
  switch (typeId) {
    case 0:
    case 1:
      return col('null');
    case 2: {
      const t = type();
      t.u8(1, 0);
      return col('fixed', oneOf(t.i32(0, 0), [8, 16, 32, 64], 'integer width'));
    }
    case 3:
      return col('fixed', 16 << oneOf(type().i16(0, 0), [0, 1, 2], 'float precision'));
    case 4:
    case 5:
      return col('binary', 4);
    case 19:
    case 20:
      return col('binary', 8);
    case 6:
      return col('bool');
    case 7: {
      const t = type();
      t.i32(0, 0);
      t.i32(1, 0);
      return col('fixed', oneOf(t.i32(2, 128), [32, 64, 128, 256], 'decimal width'));
    }
    case 8:
      return col('fixed', 32 << oneOf(type().i16(0, 1), [0, 1], 'date unit'));
    case 9: {
      const t = type();
      oneOf(t.i16(0, 1), [0, 1, 2, 3], 'time unit');
      return col('fixed', oneOf(t.i32(1, 32), [32, 64], 'time width'));
    }
    case 10: {
      const t = type();
      oneOf(t.i16(0, 0), [0, 1, 2, 3], 'timestamp unit');
      t.string(1, 'timezone');
      return col('fixed', 64);
    }
    case 11:
      return col('fixed', 32 << oneOf(type().i16(0, 0), [0, 1, 2], 'interval unit'));
    case 18:
      oneOf(type().i16(0, 1), [0, 1, 2, 3], 'duration unit');
      return col('fixed', 64);
    case 15: {
      const w = type().i32(0, 0);
      if (w < 0) throw flat.fail(w, 'has a negative byte width', field);
      return col('fixed', 8 * w);
    }
    case 12:
      oneChild(children[0]!);
      return col('list', 4);
    case 21:
      oneChild(children[0]!);
      return col('list', 8);
    case 17:
      oneChild(children[0]!);
      type().u8(0, 0);
      return col('list', 4);
    case 16: {
      oneChild(children[0]!);
      const n = type().i32(0, 0);
      if (n < 0) throw flat.fail(n, 'has a negative list size', field);
      return col('fixedList', n);
    }
    case 13:
      return col('struct');
    case 14: {
      const t = type();
      t.vector(1, 4, 'union type ids');
      return col(oneOf(t.i16(0, 0), [0, 1], 'union mode') === 0 ? 'sparse' : 'dense');
    }
    case 23:
    case 24:
      return col('view');
    default:
      throw flat.fail(typeId, 'has a type apache-arrow does not read (run-end encoded, list view or unknown)', field);
  }
}

/** A record batch (`rb`, its body `body` bytes long) against the columns it must hold. */
function checkBatch(rb: Table, body: number, columns: Column[], version: number): void {
  const flat = rb.flat;
  const length = rb.count(0, 'length');
  const nodes = rb.vector(1, 16, 'field nodes'),
    buffers = rb.vector(2, 16, 'buffers');
  if (rb.has(3)) throw flat.fail('compressed', 'has compressed buffers (LZ4 / ZSTD), which loadArrow does not read: write the data uncompressed');
  const counts = rb.vector(4, 8, 'variadic buffer counts');
  let node = 0,
    buffer = 0,
    variadic = 0;
  const visit = (c: Column, expect: number | undefined): void => {
    const field = `column "${c.name}"`;
    if (node >= nodes.n) throw flat.fail(nodes.n, `has fewer field nodes than its schema's columns need (at ${field})`);
    const n = flat.count(nodes.at + 16 * node, 'field node length'),
      nulls = flat.count(nodes.at + 16 * node + 8, 'null count');
    node++;
    if (nulls > n) throw flat.fail(nulls, `states more nulls than its ${n} values`, field);
    if (expect !== undefined && n !== expect) throw flat.fail(n, `holds ${n} values where ${expect} belong`, field);
    const next = (min: number, part: string) => {
      if (buffer >= buffers.n) throw flat.fail(buffers.n, `has fewer buffers than its schema's columns need (at ${field})`);
      const offset = flat.count(buffers.at + 16 * buffer, 'buffer offset'),
        bytes = flat.count(buffers.at + 16 * buffer + 8, 'buffer length');
      buffer++;
      if (offset % 8 !== 0) throw flat.fail(offset, `its ${part} buffer is not at a multiple of 8 bytes in the body`, field);
      if (offset + bytes > body) throw flat.fail(offset + bytes, `its ${part} buffer runs past the ${body}-byte body`, field);
      if (bytes < min) throw flat.fail(bytes, `its ${part} buffer holds ${bytes} bytes; ${n} values need ${min}`, field);
    };
    const validity = () => next(nulls > 0 ? Math.ceil(n / 8) : 0, 'validity');
    switch (c.kind) {
      case 'null':
        break;
      case 'fixed':
        validity();
        next(Math.ceil((n * c.size) / 8), 'data');
        break;
      case 'bool':
        validity();
        next(Math.ceil(n / 8), 'data');
        break;
      case 'binary':
        validity();
        next(n > 0 ? (n + 1) * c.size : 0, 'offsets');
        next(0, 'data');
        break;
      case 'view': {
        validity();
        next(16 * n, 'views');
        if (variadic >= counts.n) throw flat.fail(counts.n, 'has fewer variadic buffer counts than its view columns', field);
        const k = flat.count(counts.at + 8 * variadic++, 'variadic buffer count');
        for (let i = 0; i < k; i++) next(0, 'variadic data');
        break;
      }
      case 'list':
        validity();
        next(n > 0 ? (n + 1) * c.size : 0, 'offsets');
        visit(c.children[0]!, undefined);
        break;
      case 'fixedList':
        validity();
        visit(c.children[0]!, n * c.size);
        break;
      case 'struct':
        validity();
        for (const child of c.children) visit(child, n);
        break;
      case 'sparse':
      case 'dense':
        if (version < V5) validity(); // unions lost their validity buffer in V5
        next(n, 'type ids');
        if (c.kind === 'dense') next(4 * n, 'offsets');
        for (const child of c.children) visit(child, c.kind === 'sparse' ? n : undefined);
        break;
    }
  };
  for (const c of columns) visit(c, length);
  if (node !== nodes.n) throw flat.fail(nodes.n, `has ${nodes.n} field nodes; its schema's columns need ${node}`);
  if (buffer !== buffers.n) throw flat.fail(buffers.n, `has ${buffers.n} buffers; its schema's columns need ${buffer}`);
  if (variadic !== counts.n) throw flat.fail(counts.n, `has ${counts.n} variadic buffer counts; its schema's columns need ${variadic}`);
}

function checkDictionary(d: Table, body: number, schema: Schema): void {
  const id = d.count(0, 'dictionary id');
  const column = schema.dictionaries.get(id);
  if (!column) throw d.flat.fail(id, 'is a dictionary batch for an id no field of the schema has');
  const data = d.table(1, 'dictionary data');
  if (!data) throw d.flat.fail(id, 'is a dictionary batch without data');
  d.u8(2, 0);
  checkBatch(data, body, [column], schema.version);
}

interface Message {
  type: number;
  header: Table | null;
  version: number;
  metaEnd: number;
  bodyLength: number;
  end: number;
}

/** The message at `at` (ending by `limit`), or where an end-of-stream marker ends. */
function readMessage(bytes: Uint8Array, dv: DataView, at: number, limit: number): Message | { eos: number } {
  const where = `the message at byte ${at}`;
  if (at + 4 > limit) throw bad(limit - at, `${where}: ends inside its length prefix`);
  let len = dv.getInt32(at, true),
    head = 4;
  if (len === -1) {
    // the continuation marker; without it, the format before Arrow 0.15
    if (at + 8 > limit) throw bad(limit - at, `${where}: ends inside its length prefix`);
    len = dv.getInt32(at + 4, true);
    head = 8;
  }
  if (len === 0) return { eos: at + head };
  if (len < 0 || at + head + len > limit) throw bad(len, `${where}: states ${len} metadata bytes where ${limit - at - head} remain`);
  const flat = new Flat(bytes, at + head, len, 'arrow', where);
  const m = flat.root('message');
  const version = m.i16(0, 0),
    type = m.u8(1, 0);
  checkVersion(flat, version);
  const header = type >= SCHEMA && type <= RECORD_BATCH ? m.table(2, 'message header') : null;
  if (!header) throw flat.fail(type, 'is not a schema, dictionary batch or record batch message');
  const bodyLength = m.count(3, 'body length');
  keyValues(m, 4);
  const metaEnd = at + head + len;
  if (bodyLength > limit - metaEnd) throw flat.fail(bodyLength, `states a ${bodyLength}-byte body where ${limit - metaEnd} bytes remain`);
  if (type === SCHEMA && bodyLength !== 0) throw flat.fail(bodyLength, 'is a schema message with a body');
  return { type, header, version, metaEnd, bodyLength, end: metaEnd + bodyLength };
}

function checkStream(bytes: Uint8Array, dv: DataView): void {
  let schema: Schema | undefined,
    at = 0;
  while (at < bytes.length) {
    const m = readMessage(bytes, dv, at, bytes.length);
    if ('eos' in m) {
      at = m.eos;
      break;
    }
    const where = `the message at byte ${at}`;
    at = m.end;
    if (!schema) {
      if (m.type !== SCHEMA) throw bad(m.type, `${where}: the stream does not start with a schema message`);
      schema = readSchema(m.header!, m.version);
    } else if (m.type === SCHEMA) {
      throw bad(m.type, `${where}: the stream holds a second schema`);
    } else if (m.type === DICTIONARY_BATCH) {
      checkDictionary(m.header!, m.bodyLength, schema);
    } else {
      checkBatch(m.header!, m.bodyLength, schema.columns, schema.version);
    }
  }
  if (!schema) throw bad(`${bytes.length} bytes`, 'holds no schema message: not Arrow IPC data');
  if (at < bytes.length) throw bad(bytes.length - at, `has ${bytes.length - at} bytes after its end-of-stream marker`);
}

function checkFile(bytes: Uint8Array, dv: DataView): void {
  const n = bytes.length;
  if (n < 18 || !MAGIC.every((b, i) => bytes[n - 6 + i] === b)) throw bad(`${n} bytes`, 'starts as an Arrow file but does not end with its ARROW1 magic');
  const footLen = dv.getInt32(n - 10, true),
    footAt = n - 10 - footLen;
  if (footLen <= 0 || footAt < 8) throw bad(footLen, `states a ${footLen}-byte footer in a ${n}-byte file`);
  const flat = new Flat(bytes, footAt, footLen, 'arrow', 'the file footer');
  const footer = flat.root('footer');
  const version = footer.i16(0, 0);
  const s = footer.table(1, 'schema');
  if (!s) throw flat.fail(null, 'has no schema');
  const schema = readSchema(s, version);
  const blocks = (i: number, type: number) => {
    const { at, n: count } = footer.vector(i, 24, 'blocks');
    return Array.from({ length: count }, (_, k) => ({
      type,
      offset: flat.count(at + 24 * k, 'block offset'),
      meta: flat.i32(at + 24 * k + 8),
      body: flat.count(at + 24 * k + 16, 'block body length'),
    }));
  };
  const dictionaries = blocks(2, DICTIONARY_BATCH),
    batches = blocks(3, RECORD_BATCH);
  keyValues(footer, 4);
  // apache-arrow reads each block where the footer says: blocks sharing bytes would read the
  // same batch more than once.
  const spans = [...dictionaries, ...batches].sort((a, b) => a.offset - b.offset);
  let end = 8;
  for (const b of spans) {
    if (b.meta <= 0) throw flat.fail(b.meta, `has a block at byte ${b.offset} without metadata`);
    if (b.offset < end) throw flat.fail(b.offset, `has a block at byte ${b.offset}, inside the one before it or the file's magic`);
    if (b.offset + b.meta + b.body > footAt) throw flat.fail(b.offset, `has a block at byte ${b.offset} that runs past the footer at byte ${footAt}`);
    end = b.offset + b.meta + b.body;
  }
  for (const b of [...dictionaries, ...batches]) {
    const m = readMessage(bytes, dv, b.offset, footAt);
    if ('eos' in m) throw flat.fail(b.offset, `has a block at byte ${b.offset} that is no message`);
    if (m.type !== b.type || m.metaEnd - b.offset !== b.meta || m.bodyLength !== b.body)
      throw flat.fail(b.offset, `has a block at byte ${b.offset} that does not match the message there`);
    if (b.type === DICTIONARY_BATCH) checkDictionary(m.header!, m.bodyLength, schema);
    else checkBatch(m.header!, m.bodyLength, schema.columns, schema.version);
  }
}

/** Refuses Arrow IPC bytes (file or stream format) that apache-arrow's tableFromIPC would read
 *  inconsistently, slowly or into unbounded memory; DataError BAD_FILE. */
export function checkArrowIpc(bytes: Uint8Array): void {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length >= 6 && MAGIC.every((b, i) => bytes[i] === b)) checkFile(bytes, dv);
  else checkStream(bytes, dv);
}
