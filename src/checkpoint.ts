// checkpoint.ts: an arena on disk. One file: a 64-byte file header, then the arena header and
// the saved regions back to back, all covered by CRC-32C.
//
//   0  magic "NNACKPT\0"      8  version u32      12 byte-order mark u32 (0x01020304)
//   16 arena total bytes u64  24 payload bytes u64 32 trainer steps u64
//   40 kinds saved (bit per KINDS index) u32      44 payload CRC-32C u32
//   48 user regions saved (bit per kind-table index) u64 (version 2; version 1: reserved, zero)
//   56 reserved (4 bytes)     60 CRC-32C of bytes 0..59 u32
//
// Version 2 (user regions) reads version-1 files: their arena header is version 1, the same
// bytes as version 2 with no kind table; the arena is created with the version-2 header.
//
// Saving writes a temporary file (created exclusively under an unpredictable name, never
// through a symlink) in one writev, fsyncs it, renames it over the target and fsyncs the
// directory: a crash leaves the old file or the new one, whole, and concurrent saves to one
// path leave one complete file. Loading opens the file once and reads it in one pass: the
// headers are checked (the arena header re-planned from its own description must match byte
// for byte, and the memory it needs must be available) before anything is allocated, then the
// regions are read straight into the host side while the checksum runs, and only a verified
// arena goes to the device (in one transfer).
import { randomBytes } from 'node:crypto';
import { closeSync, constants, fstatSync, fsyncSync, openSync, readSync, renameSync, unlinkSync, writevSync } from 'node:fs';
import { freemem, totalmem } from 'node:os';
import { dirname } from 'node:path';
import { ArenaError, OptionError } from './errors.js';
import { decodeSpec, tableBytes } from './layout/decode.js';
import { HEADER_FIELDS, HEADER_SIZE, KINDS, KIND_INDEX, MAX_LAYERS, type Kind } from './layout/header.js';
import { planLayout, type Plan, type Region } from './layout/plan.js';
import { cudaInfo, native } from './native.js';

const MAGIC = Buffer.from('NNACKPT\0', 'latin1');
const VERSION = 2;
const BOM = 0x01020304;
const FILE_HEADER = 64;
const CHUNK = 16 * 2 ** 20;
/** One read() call stays below the 2 GiB that a single read may move. */
const MAX_READ = 2 ** 30;

export interface SaveOptions {
  /** Regions to save, built-in kinds and user regions by name (default: all). The header is
   *  always saved. */
  kinds?: readonly string[];
  /** Trainer steps so far (Adam's t), restored by Trainer.load. */
  steps?: number;
}

export interface CheckpointInfo {
  path: string; version: number; arenaBytes: number; payloadBytes: number; steps: number;
  /** Built-in kinds saved. */
  kinds: Kind[];
  /** User regions saved, by name. */
  extras: string[];
  plan: Plan;
}

/** What a checkpoint holds: a bit per built-in kind, a bit per user region (kind-table index). */
interface Saved { mask: number; extras: bigint }

const bad = (path: string, why: string) => new ArenaError('BAD_CHECKPOINT', `${path}: ${why}`);
const fsMessage = (e: unknown) => (e as Error)?.message ?? String(e);

function savedRegions(plan: Plan, saved: Saved): Region[] {
  return plan.regions.filter((r) => (r.extra === undefined ? saved.mask & (1 << KIND_INDEX[r.kind]) : saved.extras & (1n << BigInt(r.extra))));
}

const ALL_EXTRAS = (plan: Plan) => (1n << BigInt(plan.spec.extra.length)) - 1n;

/** A file path argument: a non-empty string without NUL bytes. */
function checkPath(path: unknown): string {
  if (typeof path !== 'string' || path.length === 0 || path.includes('\0')) {
    throw new OptionError('BAD_PATH', 'path', path, 'must be a non-empty file path string');
  }
  return path;
}

/** Save options read once: kinds an array of known kinds and user region names, steps a safe
 *  integer >= 0. */
function saveOptions(plan: Plan, options: unknown): Saved & { steps: number } {
  const all = { mask: (1 << KINDS.length) - 1, extras: ALL_EXTRAS(plan) };
  if (options === undefined) return { ...all, steps: 0 };
  if (options === null || typeof options !== 'object') throw new OptionError('BAD_OPTION', 'options', options, 'must be an object { kinds?, steps? }');
  const { kinds, steps = 0 } = options as SaveOptions;
  const names = plan.spec.extra.map((e) => e.name);
  const known = [...KINDS, ...names].join(', ');
  let saved = all;
  if (kinds !== undefined) {
    if (!Array.isArray(kinds)) throw new OptionError('BAD_OPTION', 'kinds', kinds, `must be an array of kinds (${known})`);
    const n = kinds.length;
    if (!Number.isSafeInteger(n) || n > 128) throw new OptionError('BAD_OPTION', 'kinds.length', n, 'must be at most 128');
    saved = { mask: 0, extras: 0n };
    for (let i = 0; i < n; i++) {
      const k: unknown = kinds[i];
      const extra = typeof k === 'string' ? names.indexOf(k) : -1;
      if (extra >= 0) saved.extras |= 1n << BigInt(extra);
      else if (typeof k === 'string' && Object.prototype.hasOwnProperty.call(KIND_INDEX, k)) saved.mask |= 1 << KIND_INDEX[k as Kind];
      else throw new OptionError('BAD_OPTION', `kinds[${i}]`, k, `is not a kind (${known})`);
    }
  }
  if (typeof steps !== 'number' || !Number.isSafeInteger(steps) || steps < 0) throw new OptionError('BAD_OPTION', 'steps', steps, 'must be a non-negative safe integer');
  return { ...saved, steps };
}

/** What a checkpoint reads from and writes into: an arena's plan and host bytes. (The format
 *  sits below the Arena class: arena.ts uses this module, never the other way round.) */
export interface ArenaBytes {
  readonly plan: Plan;
  bytes(offset: number, bytes: number): Uint8Array;
}

export function saveArena(arena: ArenaBytes, path: string, options: SaveOptions = {}): number {
  checkPath(path);
  const plan = arena.plan;
  const { mask, extras, steps } = saveOptions(plan, options);
  const parts = [arena.bytes(0, plan.headerBytes), ...savedRegions(plan, { mask, extras }).map((r) => arena.bytes(r.offset, r.bytes))];
  const payloadBytes = parts.reduce((a, p) => a + p.length, 0);
  const crc = parts.reduce((c, p) => native().crc32c(p, c), 0);
  const head = Buffer.alloc(FILE_HEADER);
  MAGIC.copy(head, 0);
  head.writeUInt32LE(VERSION, 8);
  head.writeUInt32LE(BOM, 12);
  head.writeBigUInt64LE(BigInt(plan.totalBytes), 16);
  head.writeBigUInt64LE(BigInt(payloadBytes), 24);
  head.writeBigUInt64LE(BigInt(steps), 32);
  head.writeUInt32LE(mask, 40);
  head.writeUInt32LE(crc >>> 0, 44);
  head.writeBigUInt64LE(extras, 48);
  head.writeUInt32LE(native().crc32c(head.subarray(0, 60)) >>> 0, 60);
  const failed = (e: unknown) => new ArenaError('SAVE_FAILED', `${path}: ${fsMessage(e)}`, { cause: e });
  // Exclusive creation of a name nobody can guess: an existing file or a planted symlink at
  // that name makes the open fail instead of being written through.
  const tmp = `${path}.tmp-${randomBytes(12).toString('hex')}`;
  let fd: number;
  try {
    fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o666);
  } catch (e) { throw failed(e); }
  try {
    try {
      writeAll(fd, [head, ...parts]);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (e) {
    try { unlinkSync(tmp); } catch { /* already gone */ }
    throw failed(e);
  }
  syncDirectory(dirname(path), failed);
  return FILE_HEADER + payloadBytes;
}

/** Makes the rename durable. Filesystems that cannot fsync a directory say so with EINVAL;
 *  there the rename is as durable as that filesystem makes it. */
function syncDirectory(dir: string, failed: (e: unknown) => Error): void {
  let fd: number;
  try { fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY); } catch (e) { throw failed(e); }
  try { fsyncSync(fd); } catch (e) {
    const code = (e as { code?: string }).code;
    if (code !== 'EINVAL' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP') throw failed(e);
  } finally {
    closeSync(fd);
  }
}

/** One writev for the whole file; a short write (possible for very large payloads) continues
 *  where it stopped. */
function writeAll(fd: number, parts: Uint8Array[]): void {
  const pending = parts.filter((p) => p.length > 0);
  while (pending.length > 0) {
    let n = writevSync(fd, pending);
    while (n > 0) {
      const first = pending[0]!;
      if (n >= first.length) { n -= first.length; pending.shift(); }
      else { pending[0] = first.subarray(n); n = 0; }
    }
  }
}

/** One open file read front to back, the payload's CRC-32C running over what is read. */
class Reader {
  at = 0;
  crc = 0;
  constructor(readonly fd: number, readonly path: string) {}

  read(into: Uint8Array, payload = true): Uint8Array {
    let done = 0;
    while (done < into.length) {
      let n: number;
      try { n = readSync(this.fd, into, done, Math.min(into.length - done, MAX_READ), this.at + done); } catch (e) { throw bad(this.path, fsMessage(e)); }
      if (n === 0) throw bad(this.path, `truncated: ended at byte ${this.at + done}`);
      done += n;
    }
    this.at += into.length;
    if (payload) this.crc = native().crc32c(into, this.crc);
    return into;
  }
}

interface Opened { reader: Reader; info: CheckpointInfo; saved: Saved; payloadCrc: number }

/** Reads and checks the file header and the arena header (the payload's first headerBytes);
 *  allocates nothing larger than the header. */
function openCheckpoint(fd: number, path: string): Opened {
  let st;
  try { st = fstatSync(fd); } catch (e) { throw bad(path, fsMessage(e)); }
  if (!st.isFile()) throw bad(path, 'not a regular file');
  const size = st.size;
  if (size < FILE_HEADER) throw bad(path, `truncated: ${size} bytes, a checkpoint starts with a ${FILE_HEADER}-byte header`);
  const reader = new Reader(fd, path);
  const head = Buffer.from(reader.read(new Uint8Array(FILE_HEADER), false));
  if (!head.subarray(0, 8).equals(MAGIC)) throw bad(path, 'not an nn-arena checkpoint (bad magic)');
  if (head.readUInt32LE(12) !== BOM) throw bad(path, 'written with another byte order');
  if ((native().crc32c(head.subarray(0, 60)) >>> 0) !== head.readUInt32LE(60)) throw bad(path, 'file header checksum mismatch (corrupted)');
  const version = head.readUInt32LE(8);
  if (version !== 1 && version !== VERSION) throw bad(path, `unsupported checkpoint version ${version} (this build reads 1 and ${VERSION})`);
  const big = (at: number) => head.readBigUInt64LE(at);
  const arenaBytes = big(16), payloadBytes = big(24), steps = big(32);
  const MAX = BigInt(Number.MAX_SAFE_INTEGER);
  if (arenaBytes > MAX || payloadBytes > arenaBytes) throw bad(path, `impossible sizes (arena ${arenaBytes}, payload ${payloadBytes})`);
  // Steps cross to the native side as exact integers and keep counting from there.
  if (steps > MAX) throw bad(path, `a step count of ${steps} is beyond 2^53 - 1`);
  if (!head.subarray(version === 1 ? 48 : 56, 60).every((b) => b === 0)) throw bad(path, 'reserved header bytes are not zero');
  if (Number(arenaBytes) > totalmem()) throw bad(path, `claims an arena of ${arenaBytes} bytes, more than this machine's ${totalmem()} bytes of memory`);
  if (BigInt(size) !== BigInt(FILE_HEADER) + payloadBytes) throw bad(path, `the header says ${FILE_HEADER + Number(payloadBytes)} bytes, the file has ${size}${BigInt(size) < BigInt(FILE_HEADER) + payloadBytes ? ' (truncated)' : ''}`);
  const mask = head.readUInt32LE(40);
  if (mask >>> KINDS.length) throw bad(path, `unknown kinds in the saved-kinds mask 0x${mask.toString(16)}`);
  const payload = Number(payloadBytes);

  // The arena header: its fixed part gives the number of layers, the layer table follows; its
  // length is read from the file, never assumed (an align of 2^20 gives a 1 MiB header).
  if (payload < HEADER_SIZE) throw bad(path, `payload of ${payload} bytes is shorter than an arena header`);
  const fixed = reader.read(new Uint8Array(HEADER_SIZE));
  const layers = new DataView(fixed.buffer).getUint32(HEADER_FIELDS.num_layers, true);
  if (layers < 2 || layers > MAX_LAYERS) throw bad(path, `arena header: ${layers} layers (2 to ${MAX_LAYERS})`);
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
    reader.read(longer.subarray(table.length));
    table = longer;
  }
  const spec = decodeSpec(table);
  if (typeof spec === 'string') throw bad(path, `arena header: ${spec}`);
  let plan: Plan;
  try { plan = planLayout(spec); } catch (e) { throw bad(path, `arena header describes no valid layout: ${fsMessage(e)}`); }
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
    const part = reader.read(new Uint8Array(Math.min(CHUNK, plan.headerBytes - at)));
    if (!Buffer.from(part).equals(Buffer.from(plan.header.subarray(at, at + part.length)))) throw differs();
    at += part.length;
  }
  const info: CheckpointInfo = {
    path, version, arenaBytes: Number(arenaBytes), payloadBytes: payload, steps: Number(steps), kinds: KINDS.filter((k) => mask & (1 << KIND_INDEX[k])),
    extras: plan.spec.extra.filter((_, i) => extrasMask & (1n << BigInt(i))).map((e) => e.name), plan,
  };
  return { reader, info, saved, payloadCrc: head.readUInt32LE(44) };
}

function withOpen<T>(path: string, f: (fd: number) => T): T {
  checkPath(path);
  let fd: number;
  try { fd = openSync(path, 'r'); } catch (e) { throw bad(path, fsMessage(e)); }
  try {
    return f(fd);
  } finally {
    closeSync(fd);
  }
}

/** Reads and checks a checkpoint's headers and checksum; allocates no arena. */
export function inspectCheckpoint(path: string): CheckpointInfo {
  return withOpen(path, (fd) => {
    const { reader, info, payloadCrc } = openCheckpoint(fd, path);
    const chunk = new Uint8Array(Math.min(CHUNK, Math.max(1, info.payloadBytes - reader.at + FILE_HEADER)));
    while (reader.at < FILE_HEADER + info.payloadBytes) reader.read(chunk.subarray(0, Math.min(chunk.length, FILE_HEADER + info.payloadBytes - reader.at)));
    if ((reader.crc >>> 0) !== payloadCrc) throw bad(path, 'payload checksum mismatch (corrupted)');
    return info;
  });
}

/** What loading allocates, against what this machine has now: the host side, and the device
 *  side, which the CPU backend also keeps in host memory. os.freemem() is the kernel's
 *  MemAvailable (free plus reclaimable cache), the memory that can be had without swapping or
 *  the OOM killer. */
function checkMemory(path: string, plan: Plan, options: MemoryOptions): void {
  const backend = options.backend;
  const info = backend === 'cpu' ? undefined : cudaInfo();
  const cuda = backend === 'cuda' || (backend !== 'cpu' && !!info?.built && (info?.devices ?? 0) > 0);
  const host = cuda ? plan.totalBytes : 2 * plan.totalBytes;
  const free = freemem();
  if (host > free) {
    throw new ArenaError('HOST_OOM', `${path}: the arena needs ${host} bytes of host memory (${cuda ? 'its host side' : 'host and device side: the CPU backend keeps both in host memory'}); ${free} bytes are available`);
  }
  if (cuda && (options.memory ?? 'device') === 'device' && info && info.devices > 0 && plan.totalBytes > info.freeBytes) {
    throw new ArenaError('DEVICE_OOM', `${path}: the arena needs ${plan.totalBytes} bytes of device memory; ${info.freeBytes} bytes are free`);
  }
}

/** The options of the arena to be loaded that decide where its memory comes from. */
export interface MemoryOptions { backend?: unknown; memory?: unknown }

/** A checkpoint opened and checked up to its payload (readCheckpoint). */
export interface OpenCheckpoint {
  readonly info: CheckpointInfo;
  /** HOST_OOM / DEVICE_OOM when an arena of this plan with `options` cannot be had now. */
  checkMemory(options: MemoryOptions): void;
  /** Reads the saved regions straight into `arena`'s host side while the checksum runs;
   *  BAD_CHECKPOINT when it does not match (the caller then disposes the arena). */
  readInto(arena: Pick<ArenaBytes, 'bytes'>): void;
}

/** Opens `path` once, checks its headers, and hands the open checkpoint to `use` (Arena.load
 *  allocates the arena from info.plan and reads into it). The file replaced or changed during
 *  the load cannot mix in: the one open file is what is read and verified. */
export function readCheckpoint<T>(path: string, use: (cp: OpenCheckpoint) => T): T {
  return withOpen(path, (fd) => {
    const { reader, info, saved, payloadCrc } = openCheckpoint(fd, path);
    return use({
      info,
      checkMemory: (options) => checkMemory(path, info.plan, options),
      readInto: (arena) => {
        for (const r of savedRegions(info.plan, saved)) reader.read(arena.bytes(r.offset, r.bytes));
        if ((reader.crc >>> 0) !== payloadCrc) throw bad(path, 'payload checksum mismatch (corrupted)');
      },
    });
  });
}
