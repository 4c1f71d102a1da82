// format.ts: the checkpoint file format, shared by the synchronous and asynchronous readers and
// writers of ../checkpoint.ts. One file: a 64-byte file header, (version 3) a metadata block,
// then the payload: the arena header and the saved regions back to back.
//
//   0  magic "NNACKPT\0"      8  version u32      12 byte-order mark u32 (0x01020304)
//   16 arena total bytes u64  24 payload bytes u64 32 trainer steps u64
//   40 kinds saved (bit per KINDS index) u32      44 payload CRC-32C u32
//   48 user regions saved (bit per kind-table index) u64 (versions 2, 3; version 1: reserved, zero)
//   56 reserved (4 bytes)     60 CRC-32C of bytes 0..59 u32
//   64 (version 3) metadata: bytes n u32, CRC-32C of the n bytes u32, n bytes of UTF-8 JSON (an
//      object: the Trainer's settings and position, your own `metadata`); then the payload.
//
// Versions 1 and 2 still load: version 1's arena header is version 1, the same bytes as version
// 2 with no kind table (the arena is created with the version-2 header); neither has metadata.
//
// The parser is a generator that asks for the bytes it needs (yield n, receive n bytes) and
// returns what it found, so the synchronous and the asynchronous drivers run the same checks in
// the same order, reading nothing beyond what each check needs.
import { totalmem } from 'node:os';
import { ArenaError, OptionError } from '../core/errors.js';
import { decodeSpec, tableBytes } from '../layout/decode.js';
import { HEADER_FIELDS, HEADER_SIZE, KINDS, KIND_INDEX, MAX_LAYERS, type Kind } from '../layout/header.js';
import { planLayout, type Plan, type Region } from '../layout/plan.js';
import { native } from '../native/addon.js';

const MAGIC = Buffer.from('NNACKPT\0', 'latin1');
export const VERSION = 3;
const BOM = 0x01020304;
export const FILE_HEADER = 64;
const META_PREFIX = 8;
/** Metadata beyond this is refused on both sides (a crafted length must not allocate GiBs). */
export const MAX_METADATA = 64 * 2 ** 20;
/** Bytes read or written per step of a long pass (the async forms yield between steps). */
export const CHUNK = 16 * 2 ** 20;
/** The largest piece of the arena taken as one view: under the 4 GiB of one ArrayBuffer, and one
 *  read() call stays below the 2 GiB a single read may move. Any region is moved in pieces. */
export const MAX_PIECE = 2 ** 30;
/** The data set's kinds: left out of a checkpoint unless asked for (`data: true` or `kinds`). */
export const DATA_KINDS: readonly Kind[] = ['xdata', 'ydata'];

/** How far a long save or load is: payload bytes done of the total. */
export interface IoProgress {
  bytes: number;
  totalBytes: number;
}

export interface SaveOptions {
  /** Regions to save, built-in kinds and user regions by name. Default: every region but the
   *  resident data set (xdata, ydata). The header is always saved. */
  kinds?: readonly string[];
  /** Also save the resident data set (xdata, ydata) (default false). */
  data?: boolean;
  /** Trainer steps so far (Adam's t), restored by Trainer.load. */
  steps?: number;
  /** Your own JSON object, stored beside the arena (inspectCheckpoint returns it). */
  metadata?: Record<string, unknown>;
  /** saveAsync only: called after each chunk written. */
  onProgress?: (p: IoProgress) => void;
}

export interface CheckpointInfo {
  path: string;
  version: number;
  arenaBytes: number;
  payloadBytes: number;
  steps: number;
  /** Built-in kinds saved. */
  kinds: Kind[];
  /** User regions saved, by name. */
  extras: string[];
  /** Whether the resident data set (xdata and ydata) is inside. */
  data: boolean;
  /** The metadata object (version 3): `trainer` for a Trainer's checkpoint, your own keys. */
  metadata: Record<string, unknown>;
  plan: Plan;
}

/** What a checkpoint holds: a bit per built-in kind, a bit per user region (kind-table index). */
export interface Saved {
  mask: number;
  extras: bigint;
}

export const bad = (path: string, why: string) => new ArenaError('BAD_CHECKPOINT', `${path}: ${why}`);
export const fsMessage = (e: unknown) => (e as Error)?.message ?? String(e);

export function savedRegions(plan: Plan, saved: Saved): Region[] {
  return plan.regions.filter((r) => (r.extra === undefined ? saved.mask & (1 << KIND_INDEX[r.kind]) : saved.extras & (1n << BigInt(r.extra))));
}

/** [offset, bytes] pieces of the payload in file order (the header, then each saved region),
 *  none larger than MAX_PIECE. */
export function payloadPieces(plan: Plan, saved: Saved): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (const [offset, bytes] of [[0, plan.headerBytes], ...savedRegions(plan, saved).map((r) => [r.offset, r.bytes])] as Array<[number, number]>) {
    for (let at = 0; at < bytes; at += MAX_PIECE) out.push([offset + at, Math.min(MAX_PIECE, bytes - at)]);
  }
  return out;
}

/** A file path argument: a non-empty string without NUL bytes. */
export function checkPath(path: unknown): string {
  if (typeof path !== 'string' || path.length === 0 || path.includes('\0')) {
    throw new OptionError('BAD_PATH', 'path', path, 'must be a non-empty file path string');
  }
  return path;
}

/** A JSON object as UTF-8 bytes: plain data only (objects, arrays, strings, finite numbers,
 *  booleans, null), so that what loads is what was saved. */
export function encodeMetadata(meta: Record<string, unknown>, field: string): Uint8Array {
  const check = (v: unknown, at: string, depth: number): void => {
    if (depth > 32) throw new OptionError('BAD_OPTION', at, v, 'nests deeper than 32 levels');
    if (v === null || typeof v === 'string' || typeof v === 'boolean') return;
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) throw new OptionError('BAD_OPTION', at, v, 'is not a finite number (JSON holds no NaN or Infinity)');
      return;
    }
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) check(v[i], `${at}[${i}]`, depth + 1);
      return;
    }
    if (typeof v === 'object' && (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null)) {
      for (const [k, x] of Object.entries(v)) check(x, `${at}.${k}`, depth + 1);
      return;
    }
    throw new OptionError('BAD_OPTION', at, v, 'is not plain JSON data (objects, arrays, strings, finite numbers, booleans, null)');
  };
  check(meta, field, 0);
  // No keys: no bytes (the block is its 8-byte prefix alone).
  const bytes = Object.keys(meta).length ? Buffer.from(JSON.stringify(meta), 'utf8') : Buffer.alloc(0);
  if (bytes.length > MAX_METADATA) throw new OptionError('BAD_OPTION', field, `${bytes.length} bytes`, `is larger than ${MAX_METADATA} bytes as JSON`);
  return bytes;
}

export interface SavePlan extends Saved {
  steps: number;
  meta: Uint8Array;
  onProgress: ((p: IoProgress) => void) | undefined;
}

/** Save options read once: kinds an array of known kinds and user region names, data a boolean,
 *  steps a safe integer >= 0, metadata a plain JSON object. */
export function saveOptions(plan: Plan, options: unknown): SavePlan {
  if (options === undefined) options = {};
  if (options === null || typeof options !== 'object')
    throw new OptionError('BAD_OPTION', 'options', options, 'must be an object { kinds?, data?, steps?, metadata?, onProgress? }');
  const { kinds, data = false, steps = 0, metadata = {}, onProgress } = options as SaveOptions;
  const names = plan.spec.extra.map((e) => e.name);
  const known = [...KINDS, ...names].join(', ');
  if (typeof data !== 'boolean') throw new OptionError('BAD_OPTION', 'data', data, 'must be a boolean');
  let saved: Saved = { mask: (1 << KINDS.length) - 1, extras: (1n << BigInt(names.length)) - 1n };
  if (kinds !== undefined) {
    if (!Array.isArray(kinds)) throw new OptionError('BAD_OPTION', 'kinds', kinds, `must be an array of kinds (${known})`);
    const n = kinds.length;
    if (!Number.isSafeInteger(n) || n > 128) throw new OptionError('BAD_OPTION', 'kinds.length', n, 'must be at most 128');
    saved = { mask: 0, extras: 0n };
    for (let i = 0; i < n; i++) {
      const k: unknown = kinds[i];
      const extra = typeof k === 'string' ? names.indexOf(k) : -1;
      if (extra >= 0) saved.extras |= 1n << BigInt(extra);
      else if (typeof k === 'string' && Object.hasOwn(KIND_INDEX, k)) saved.mask |= 1 << KIND_INDEX[k as Kind];
      else throw new OptionError('BAD_OPTION', `kinds[${i}]`, k, `is not a kind (${known})`);
    }
  } else {
    for (const k of DATA_KINDS) saved.mask &= ~(1 << KIND_INDEX[k]);
  }
  if (data) for (const k of DATA_KINDS) saved.mask |= 1 << KIND_INDEX[k];
  if (typeof steps !== 'number' || !Number.isSafeInteger(steps) || steps < 0)
    throw new OptionError('BAD_OPTION', 'steps', steps, 'must be a non-negative safe integer');
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata))
    throw new OptionError('BAD_OPTION', 'metadata', metadata, 'must be a plain object');
  if (onProgress !== undefined && typeof onProgress !== 'function') throw new OptionError('BAD_OPTION', 'onProgress', onProgress, 'must be a function');
  return { ...saved, steps, meta: encodeMetadata(metadata, 'metadata'), onProgress };
}

/** The file header and the metadata block of a save whose payload has `payloadBytes` bytes and
 *  CRC-32C `crc`. */
export function encodeFileHeader(plan: Plan, s: SavePlan, payloadBytes: number, crc: number): Buffer {
  const head = Buffer.alloc(FILE_HEADER + META_PREFIX + s.meta.length);
  MAGIC.copy(head, 0);
  head.writeUInt32LE(VERSION, 8);
  head.writeUInt32LE(BOM, 12);
  head.writeBigUInt64LE(BigInt(plan.totalBytes), 16);
  head.writeBigUInt64LE(BigInt(payloadBytes), 24);
  head.writeBigUInt64LE(BigInt(s.steps), 32);
  head.writeUInt32LE(s.mask, 40);
  head.writeUInt32LE(crc >>> 0, 44);
  head.writeBigUInt64LE(s.extras, 48);
  head.writeUInt32LE(native().crc32c(head.subarray(0, 60)) >>> 0, 60);
  head.writeUInt32LE(s.meta.length, FILE_HEADER);
  head.writeUInt32LE(native().crc32c(s.meta) >>> 0, FILE_HEADER + 4);
  head.set(s.meta, FILE_HEADER + META_PREFIX);
  return head;
}

export interface Opened {
  info: CheckpointInfo;
  saved: Saved;
  /** CRC-32C of the payload read so far (the arena header), and the one the file claims. */
  crc: number;
  payloadCrc: number;
  /** File offset of the first byte after the arena header (the first saved region). */
  at: number;
}

/** The parser: yields a byte count, receives that many bytes (the driver reads them in file
 *  order; a short file is the driver's BAD_CHECKPOINT). `size` is the file's size from fstat.
 *  Checks the file header, the metadata and the arena header; allocates nothing larger than the
 *  header (and the metadata, at most MAX_METADATA). */
export function* parseCheckpoint(path: string, size: number): Generator<number, Opened, Uint8Array> {
  if (size < FILE_HEADER) throw bad(path, `truncated: ${size} bytes, a checkpoint starts with a ${FILE_HEADER}-byte header`);
  const head = Buffer.from(yield FILE_HEADER);
  if (!head.subarray(0, 8).equals(MAGIC)) throw bad(path, 'not an nn-arena checkpoint (bad magic)');
  if (head.readUInt32LE(12) !== BOM) throw bad(path, 'written with another byte order');
  if (native().crc32c(head.subarray(0, 60)) >>> 0 !== head.readUInt32LE(60)) throw bad(path, 'file header checksum mismatch (corrupted)');
  const version = head.readUInt32LE(8);
  if (version < 1 || version > VERSION) throw bad(path, `unsupported checkpoint version ${version} (this build reads 1 to ${VERSION})`);
  const big = (at: number) => head.readBigUInt64LE(at);
  const arenaBytes = big(16),
    payloadBytes = big(24),
    steps = big(32);
  const MAX = BigInt(Number.MAX_SAFE_INTEGER);
  if (arenaBytes > MAX || payloadBytes > arenaBytes) throw bad(path, `impossible sizes (arena ${arenaBytes}, payload ${payloadBytes})`);
  // Steps cross to the native side as exact integers and keep counting from there.
  if (steps > MAX) throw bad(path, `a step count of ${steps} is beyond 2^53 - 1`);
  if (!head.subarray(version === 1 ? 48 : 56, 60).every((b) => b === 0)) throw bad(path, 'reserved header bytes are not zero');
  if (Number(arenaBytes) > totalmem()) throw bad(path, `claims an arena of ${arenaBytes} bytes, more than this machine's ${totalmem()} bytes of memory`);
  const mask = head.readUInt32LE(40);
  if (mask >>> KINDS.length) throw bad(path, `unknown kinds in the saved-kinds mask 0x${mask.toString(16)}`);
  const payload = Number(payloadBytes);

  let metadata: Record<string, unknown> = {};
  let metaBlock = 0;
  if (version >= 3) {
    if (size < FILE_HEADER + META_PREFIX) throw bad(path, `truncated: ${size} bytes, ended in the metadata block`);
    const prefix = Buffer.from(yield META_PREFIX);
    const n = prefix.readUInt32LE(0);
    if (n > MAX_METADATA) throw bad(path, `metadata of ${n} bytes (at most ${MAX_METADATA})`);
    metaBlock = META_PREFIX + n;
    if (size < FILE_HEADER + metaBlock) throw bad(path, `truncated: ${size} bytes, ended in the metadata block`);
    const bytes = yield n;
    if (native().crc32c(bytes) >>> 0 !== prefix.readUInt32LE(4)) throw bad(path, 'metadata checksum mismatch (corrupted)');
    let parsed: unknown = {};
    if (n > 0) {
      try {
        parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
      } catch (e) {
        throw bad(path, `metadata is not UTF-8 JSON: ${fsMessage(e)}`);
      }
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw bad(path, 'metadata is not a JSON object');
    metadata = parsed as Record<string, unknown>;
  }
  const fileBytes = BigInt(FILE_HEADER + metaBlock) + payloadBytes;
  if (BigInt(size) !== fileBytes) throw bad(path, `the header says ${fileBytes} bytes, the file has ${size}${BigInt(size) < fileBytes ? ' (truncated)' : ''}`);

  // The arena header: its fixed part gives the number of layers, the layer table follows; its
  // length is read from the file, never assumed (an align of 2^20 gives a 1 MiB header).
  let crc = 0;
  const payloadRead = function* (n: number): Generator<number, Uint8Array, Uint8Array> {
    const b = yield n;
    crc = native().crc32c(b, crc);
    return b;
  };
  if (payload < HEADER_SIZE) throw bad(path, `payload of ${payload} bytes is shorter than an arena header`);
  const fixed = Uint8Array.from(yield* payloadRead(HEADER_SIZE));
  const layers = new DataView(fixed.buffer).getUint32(HEADER_FIELDS.num_layers, true);
  // A bound on what is read next; the header's own rules are the validator's (decodeSpec).
  if (layers > MAX_LAYERS) throw bad(path, `arena header: ${layers} layers (at most ${MAX_LAYERS})`);
  // The tables' length comes from the tables: the layer table, then the kind table's structs,
  // then its entries (each step bounded by the payload and by MAX_LAYERS / MAX_EXTRAS).
  let table: Uint8Array = fixed;
  for (;;) {
    const want = tableBytes(table);
    if (typeof want === 'string') throw bad(path, `arena header: ${want}`);
    if (want <= table.length) break;
    if (want > payload) throw bad(path, `arena header: its tables (${want} bytes) are longer than the payload`);
    const longer = new Uint8Array(want);
    longer.set(table);
    longer.set(yield* payloadRead(want - table.length), table.length);
    table = longer;
  }
  const spec = decodeSpec(table);
  if (typeof spec === 'string') throw bad(path, `arena header: ${spec}`);
  let plan: Plan;
  try {
    plan = planLayout(spec);
  } catch (e) {
    throw bad(path, `arena header describes no valid layout: ${fsMessage(e)}`);
  }
  if (plan.totalBytes !== Number(arenaBytes)) throw bad(path, `arena header gives ${plan.totalBytes} bytes, the file header ${arenaBytes}`);
  const extrasMask = version === 1 ? 0n : head.readBigUInt64LE(48);
  if (extrasMask >> BigInt(plan.spec.extra.length)) throw bad(path, `unknown user regions in the saved mask 0x${extrasMask.toString(16)}`);
  const saved = { mask, extras: extrasMask };
  const expected = plan.headerBytes + savedRegions(plan, saved).reduce((a, r) => a + r.bytes, 0);
  if (expected !== payload) throw bad(path, `payload of ${payloadBytes} bytes, the saved regions need ${expected}`);
  const differs = () => bad(path, 'arena header differs from the layout it describes');
  // A version-1 arena header is the planner's version-2 header (no kind table) with version 1.
  const planned = plan.header.slice(0, table.length);
  const headerVersion = new DataView(table.buffer, table.byteOffset).getUint32(HEADER_FIELDS.version, true);
  if (headerVersion === 1 && plan.spec.extra.length === 0) new DataView(planned.buffer).setUint32(HEADER_FIELDS.version, 1, true);
  if (!Buffer.from(table).equals(Buffer.from(planned))) throw differs();
  // The padding up to the first region, in bounded chunks.
  for (let at = table.length; at < plan.headerBytes;) {
    const part = yield* payloadRead(Math.min(CHUNK, plan.headerBytes - at));
    if (!Buffer.from(part).equals(Buffer.from(plan.header.subarray(at, at + part.length)))) throw differs();
    at += part.length;
  }
  const kinds = KINDS.filter((k) => mask & (1 << KIND_INDEX[k]));
  const info: CheckpointInfo = {
    path,
    version,
    arenaBytes: Number(arenaBytes),
    payloadBytes: payload,
    steps: Number(steps),
    kinds,
    extras: plan.spec.extra.filter((_, i) => extrasMask & (1n << BigInt(i))).map((e) => e.name),
    data: DATA_KINDS.every((k) => kinds.includes(k)),
    metadata,
    plan,
  };
  return { info, saved, crc, payloadCrc: head.readUInt32LE(44), at: FILE_HEADER + metaBlock + plan.headerBytes };
}
