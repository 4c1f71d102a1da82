// flatbuffer.ts: reading one FlatBuffer (an Arrow IPC message's metadata, an Arrow file's footer)
// with every table, vtable, field, vector and string checked to lie within its bytes. The
// flatbuffers package reads whatever an offset points at (past the end it reads zeros), so a
// flipped bit in a vector's length is a count of billions; here it is a DataError BAD_FILE.
import { DataError } from '../core/errors.js';

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const utf8 = new TextDecoder();

/** A FlatBuffer of `n` bytes at `at` in `bytes`; `field` and `where` name it in refusals. */
export class Flat {
  private readonly dv: DataView;
  constructor(
    readonly bytes: Uint8Array,
    readonly at: number,
    n: number,
    readonly field: string,
    readonly where: string,
  ) {
    this.dv = new DataView(bytes.buffer, bytes.byteOffset + at, n);
  }

  get size(): number {
    return this.dv.byteLength;
  }

  fail(value: unknown, why: string, field = this.field): DataError {
    return new DataError('BAD_FILE', field, value, `${this.where}: ${why}`);
  }

  within(at: number, n: number, part: string): void {
    if (!(at >= 0 && at + n <= this.size)) throw this.fail(at, `points past its ${this.size} bytes (at its ${part})`);
  }

  u8(at: number): number {
    this.within(at, 1, 'value');
    return this.dv.getUint8(at);
  }
  u16(at: number): number {
    this.within(at, 2, 'value');
    return this.dv.getUint16(at, true);
  }
  i16(at: number): number {
    this.within(at, 2, 'value');
    return this.dv.getInt16(at, true);
  }
  i32(at: number): number {
    this.within(at, 4, 'value');
    return this.dv.getInt32(at, true);
  }
  u32(at: number): number {
    this.within(at, 4, 'value');
    return this.dv.getUint32(at, true);
  }

  /** A 64-bit count, size or offset: refused when negative or past 2^53. */
  count(at: number, part: string): number {
    this.within(at, 8, part);
    const v = this.dv.getBigInt64(at, true);
    if (v < 0n || v > MAX_SAFE) throw this.fail(String(v), `its ${part} is out of range`);
    return Number(v);
  }

  /** The position the 32-bit offset at `at` points to. */
  ref(at: number, part: string): number {
    const to = at + this.u32(at);
    this.within(to, 4, part);
    return to;
  }

  /** The root table (its offset is the buffer's first 4 bytes). */
  root(part: string): Table {
    return Table.at(this, this.ref(0, part), part);
  }
}

/** One table of a Flat: field i's value, or the default when its vtable leaves it out. */
export class Table {
  private constructor(
    readonly flat: Flat,
    readonly at: number,
    private readonly vtable: number,
    private readonly vsize: number,
    private readonly tsize: number,
  ) {}

  static at(flat: Flat, at: number, part: string): Table {
    const vtable = at - flat.i32(at);
    flat.within(vtable, 4, `${part} vtable`);
    const vsize = flat.u16(vtable),
      tsize = flat.u16(vtable + 2);
    // The flatbuffers package reads both as signed 16-bit numbers: 0x8000 and up would differ.
    if (vsize < 4 || vsize % 2 !== 0 || vsize >= 0x8000 || tsize < 4 || tsize >= 0x8000) throw flat.fail(vsize, `its ${part} has a malformed vtable`);
    flat.within(vtable, vsize, `${part} vtable`);
    flat.within(at, tsize, part);
    return new Table(flat, at, vtable, vsize, tsize);
  }

  /** Where field `i` (`width` bytes) lies, or -1 when absent. */
  private field(i: number, width: number): number {
    const slot = 4 + 2 * i;
    const off = slot + 2 <= this.vsize ? this.flat.u16(this.vtable + slot) : 0;
    if (off === 0) return -1;
    if (off < 4 || off + width > this.tsize) throw this.flat.fail(off, `a table's field ${i} lies outside the table`);
    return this.at + off;
  }

  has(i: number): boolean {
    return this.field(i, 4) >= 0;
  }
  u8(i: number, def: number): number {
    const p = this.field(i, 1);
    return p < 0 ? def : this.flat.u8(p);
  }
  i16(i: number, def: number): number {
    const p = this.field(i, 2);
    return p < 0 ? def : this.flat.i16(p);
  }
  i32(i: number, def: number): number {
    const p = this.field(i, 4);
    return p < 0 ? def : this.flat.i32(p);
  }
  count(i: number, part: string): number {
    const p = this.field(i, 8);
    return p < 0 ? 0 : this.flat.count(p, part);
  }

  table(i: number, part: string): Table | null {
    const p = this.field(i, 4);
    return p < 0 ? null : Table.at(this.flat, this.flat.ref(p, part), part);
  }

  /** A vector of `n` elements of `size` bytes from `at` (n 0 when absent). */
  vector(i: number, size: number, part: string): { at: number; n: number } {
    const p = this.field(i, 4);
    if (p < 0) return { at: 0, n: 0 };
    const v = this.flat.ref(p, part),
      n = this.flat.u32(v);
    this.flat.within(v + 4, n * size, part);
    return { at: v + 4, n };
  }

  tables(i: number, part: string): Table[] {
    const { at, n } = this.vector(i, 4, part);
    return Array.from({ length: n }, (_, k) => Table.at(this.flat, this.flat.ref(at + 4 * k, part), part));
  }

  string(i: number, part: string): string {
    const { at, n } = this.vector(i, 1, part);
    return n === 0 ? '' : utf8.decode(new Uint8Array(this.flat.bytes.buffer, this.flat.bytes.byteOffset + this.flat.at + at, n));
  }
}
