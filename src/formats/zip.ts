// zip.ts: the entries of a zip archive (what NumPy's savez / savez_compressed write), read from
// the central directory: stored entries are views over the archive's bytes, deflated ones are
// inflated with node:zlib. Zip64 sizes and offsets are read. Each entry's CRC-32 is checked
// where node:zlib has crc32 (Node 20.15+). Every refusal of the archive is a DataError BAD_FILE.
// A small archive can name one member many times or hold a member of zeros that inflates a
// thousandfold: members may not share bytes, and what they inflate to in all is bounded
// (DataError DATA_TOO_LARGE naming maxInflatedBytes) with zlib stopping at the bound.
import { constants as bufferConstants } from 'node:buffer';
import * as zlib from 'node:zlib';
import { DataError } from '../core/errors.js';

const bad = (field: string, value: unknown, why: string) => new DataError('BAD_FILE', field, value, why);
const EOCD = 0x06054b50,
  EOCD64 = 0x06064b50,
  LOCATOR64 = 0x07064b50,
  CENTRAL = 0x02014b50,
  LOCAL = 0x04034b50;
const crc32 = (zlib as { crc32?: (data: Uint8Array) => number }).crc32;

export interface ZipEntry {
  name: string;
  data: Uint8Array;
}

/** What one central-directory entry says, with where its data lies. */
interface Member {
  name: string;
  nameBytes: Uint8Array;
  method: number;
  crc: number;
  comp: number;
  size: number;
  local: number;
  start: number;
}

/** The entries of `bytes`, in central-directory order; the deflated ones may inflate to at most
 *  `maxInflated` bytes in all. */
export function readZip(bytes: Uint8Array, maxInflated = Infinity): ZipEntry[] {
  const members = readDirectory(bytes);
  // Each member's bytes (local header through its data) apart from every other's: overlapping
  // entries would let one small deflated member be inflated once per entry.
  const spans = members.slice().sort((a, b) => a.local - b.local);
  for (let i = 1; i < spans.length; i++) {
    const prev = spans[i - 1]!,
      m = spans[i]!;
    if (m.local < prev.start + prev.comp)
      throw bad(
        `${m.name} local header`,
        m.local,
        `lies inside member "${prev.name}" (bytes ${prev.local} to ${prev.start + prev.comp}): zip members never share bytes`,
      );
  }
  const out: ZipEntry[] = [];
  let left = maxInflated;
  for (const { name, nameBytes, method, crc, comp, size, local, start } of members) {
    const localName = bytes.subarray(local + 30, local + 30 + (bytes[local + 26]! | (bytes[local + 27]! << 8)));
    if (Buffer.compare(localName, nameBytes) !== 0)
      throw bad(`${name} local header`, local, `names another member (${JSON.stringify(Buffer.from(localName).toString('utf8'))})`);
    const raw = bytes.subarray(start, start + comp);
    let data: Uint8Array;
    if (method === 0) {
      if (comp !== size) throw bad(`${name} size`, size, `differs from the ${comp} bytes stored`);
      data = raw;
    } else if (method === 8) {
      data = inflate(name, raw, size, left, maxInflated);
      left -= data.length;
    } else {
      throw bad(`${name} method`, method, 'is not stored (0) or deflated (8)');
    }
    if (crc32 && crc32(data) >>> 0 !== crc) throw bad(`${name} crc32`, crc, 'does not match the data (corrupted)');
    out.push({ name, data });
  }
  return out;
}

/** A deflated member's `size` bytes, with zlib allowed at most one byte past min(size, left):
 *  a stream that inflates further is stopped there, never allocated whole. */
function inflate(name: string, raw: Uint8Array, size: number, left: number, maxInflated: number): Uint8Array {
  const cap = Math.min(size, left);
  let data: Uint8Array | undefined;
  try {
    data = zlib.inflateRawSync(raw, { maxOutputLength: Math.min(cap, bufferConstants.MAX_LENGTH - 1) + 1 });
  } catch (err) {
    if ((err as { code?: unknown })?.code !== 'ERR_BUFFER_TOO_LARGE') throw bad(`${name} data`, raw.length, `does not inflate (${(err as Error).message})`);
  }
  if (data === undefined || data.length > cap) {
    if (cap < size) {
      throw new DataError(
        'DATA_TOO_LARGE',
        'maxInflatedBytes',
        maxInflated,
        `npz member "${name}" inflates past the ${left} bytes left of this bound on what an archive's members inflate to in all (it states ${size} bytes): pass a larger maxInflatedBytes to read it`,
      );
    }
    throw bad(`${name} size`, size, 'is less than the data inflates to');
  }
  if (data.length !== size) throw bad(`${name} size`, size, `differs from the ${data.length} bytes inflated`);
  return data;
}

/** The central directory's entries, each checked to lie (local header and data) in `bytes`. */
function readDirectory(bytes: Uint8Array): Member[] {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const u16 = (at: number) => dv.getUint16(at, true);
  const u32 = (at: number) => dv.getUint32(at, true);
  const u64 = (at: number, field: string, max = bytes.length) => {
    const v = dv.getBigUint64(at, true);
    if (v > BigInt(max)) throw bad(field, v, max === bytes.length ? `exceeds the archive's ${bytes.length} bytes` : 'is too large');
    return Number(v);
  };
  const within = (at: number, n: number, field: string) => {
    if (at < 0 || at + n > bytes.length) throw bad(field, at, `runs past the end of the ${bytes.length}-byte archive`);
  };
  // The end-of-central-directory record: the last one, within the 64 KiB a comment may take.
  let eocd = -1;
  for (let at = bytes.length - 22; at >= Math.max(0, bytes.length - 22 - 0xffff); at--)
    if (u32(at) === EOCD) {
      eocd = at;
      break;
    }
  if (eocd < 0) throw bad('zip', `${bytes.length} bytes`, 'has no end-of-central-directory record: not a zip archive (.npz)');
  let entries = u16(eocd + 10),
    cdSize = u32(eocd + 12),
    cdOffset = u32(eocd + 16);
  if (entries === 0xffff || cdSize === 0xffffffff || cdOffset === 0xffffffff) {
    const loc = eocd - 20;
    if (loc < 0 || u32(loc) !== LOCATOR64) throw bad('zip64 locator', loc, 'is missing though the directory needs zip64');
    const at = u64(loc + 8, 'zip64 record offset');
    within(at, 56, 'zip64 record');
    if (u32(at) !== EOCD64) throw bad('zip64 record', at, 'has a bad signature');
    entries = u64(at + 32, 'zip64 entries');
    cdSize = u64(at + 40, 'zip64 directory size');
    cdOffset = u64(at + 48, 'zip64 directory offset');
  }
  within(cdOffset, cdSize, 'zip central directory');
  const out: Member[] = [];
  let p = cdOffset;
  for (let e = 0; e < entries; e++) {
    within(p, 46, `zip entry ${e}`);
    if (u32(p) !== CENTRAL) throw bad(`zip entry ${e}`, p, 'has a bad signature');
    const method = u16(p + 10),
      crc = u32(p + 16),
      nameLen = u16(p + 28),
      extraLen = u16(p + 30),
      commentLen = u16(p + 32);
    let comp = u32(p + 20),
      size = u32(p + 24),
      local = u32(p + 42);
    within(p + 46, nameLen + extraLen + commentLen, `zip entry ${e}`);
    const nameBytes = bytes.subarray(p + 46, p + 46 + nameLen);
    const name = Buffer.from(nameBytes).toString('utf8');
    // Zip64 extended information: the 64-bit values of the fields that are 0xffffffff, in order.
    for (let x = p + 46 + nameLen; x + 4 <= p + 46 + nameLen + extraLen;) {
      const id = u16(x),
        len = u16(x + 2);
      if (id === 1) {
        let q = x + 4;
        const next = (field: string, max?: number) => {
          if (q + 8 > x + 4 + len) throw bad(field, len, 'is missing from the zip64 extra field');
          const v = u64(q, field, max);
          q += 8;
          return v;
        };
        // The inflated size may exceed the archive's (maxInflated bounds it); the others may not.
        if (size === 0xffffffff) size = next(`${name} size`, Number.MAX_SAFE_INTEGER);
        if (comp === 0xffffffff) comp = next(`${name} compressed size`);
        if (local === 0xffffffff) local = next(`${name} offset`);
      }
      x += 4 + len;
    }
    within(local, 30, `${name} local header`);
    if (u32(local) !== LOCAL) throw bad(`${name} local header`, local, 'has a bad signature');
    const start = local + 30 + u16(local + 26) + u16(local + 28);
    within(start, comp, `${name} data`);
    out.push({ name, nameBytes, method, crc, comp, size, local, start });
    p += 46 + nameLen + extraLen + commentLen;
  }
  return out;
}
