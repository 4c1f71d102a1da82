// checkpoint.ts: an arena on disk. One file: a 64-byte file header, then the arena header and
// the saved regions back to back, all covered by CRC-32C.
//
//   0  magic "NNACKPT\0"      8  version u32      12 byte-order mark u32 (0x01020304)
//   16 arena total bytes u64  24 payload bytes u64 32 trainer steps u64
//   40 kinds saved (bit per KINDS index) u32      44 payload CRC-32C u32
//   48 reserved (12 bytes)    60 CRC-32C of bytes 0..59 u32
//
// Saving writes a temporary file in one writev, fsyncs it and renames it over the target, so a
// crash mid-write leaves the old file whole. Loading checks the file header, re-plans the arena
// from its header (which must match byte for byte), and verifies the payload checksum in a first
// streaming pass, all before anything is allocated; then reads into the host side and sends the
// arena to the device in one transfer.
import { closeSync, fstatSync, fsyncSync, openSync, readSync, renameSync, unlinkSync, writevSync } from 'node:fs';
import { totalmem } from 'node:os';
import { ArenaError, OptionError } from './errors.js';
import { decodeSpec } from './layout/decode.js';
import { KINDS, KIND_INDEX, type Kind } from './layout/header.js';
import { planLayout, type Plan, type Region } from './layout/plan.js';
import { native } from './native.js';

const MAGIC = Buffer.from('NNACKPT\0', 'latin1');
const VERSION = 1;
const BOM = 0x01020304;
const FILE_HEADER = 64;
const CHUNK = 16 * 2 ** 20;

export interface SaveOptions {
  /** Regions to save (default: every kind). The header is always saved. */
  kinds?: readonly Kind[];
  /** Trainer steps so far (Adam's t), restored by Trainer.load. */
  steps?: number;
}

export interface CheckpointInfo {
  path: string; version: number; arenaBytes: number; payloadBytes: number; steps: number;
  kinds: Kind[]; plan: Plan;
}

const bad = (path: string, why: string) => new ArenaError('BAD_CHECKPOINT', `${path}: ${why}`);

function savedRegions(plan: Plan, mask: number): Region[] {
  return plan.regions.filter((r) => mask & (1 << KIND_INDEX[r.kind]));
}

/** What a checkpoint reads from and writes into: an arena's plan and host bytes. (Structural, so
 *  this module never imports the Arena class: arena.ts imports it.) */
export interface ArenaBytes {
  readonly plan: Plan;
  bytes(offset: number, bytes: number): Uint8Array;
  toDevice(): unknown;
  dispose(): void;
}

export function saveArena(arena: Pick<ArenaBytes, 'plan' | 'bytes'>, path: string, options: SaveOptions = {}): number {
  const kinds = options.kinds ?? KINDS;
  for (const k of kinds) if (!Object.prototype.hasOwnProperty.call(KIND_INDEX, k)) throw new OptionError('BAD_OPTION', 'kinds', k, `is not a region kind (expected ${KINDS.join(', ')})`);
  const steps = options.steps ?? 0;
  if (!Number.isSafeInteger(steps) || steps < 0) throw new OptionError('BAD_OPTION', 'steps', steps, 'must be a non-negative safe integer');
  const plan = arena.plan;
  const mask = kinds.reduce((m, k) => m | (1 << KIND_INDEX[k]), 0);
  const parts = [arena.bytes(0, plan.headerBytes), ...savedRegions(plan, mask).map((r) => arena.bytes(r.offset, r.bytes))];
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
  head.writeUInt32LE(native().crc32c(head.subarray(0, 60)) >>> 0, 60);
  const tmp = `${path}.tmp-${process.pid}-${Date.now()}`;
  let fd: number;
  try { fd = openSync(tmp, 'w'); } catch (e) { throw new ArenaError('SAVE_FAILED', `${path}: ${(e as Error).message}`, { cause: e }); }
  try {
    writeAll(fd, [head, ...parts]);
    fsyncSync(fd);
  } catch (e) {
    closeSync(fd);
    try { unlinkSync(tmp); } catch { /* already gone */ }
    throw new ArenaError('SAVE_FAILED', `${path}: ${(e as Error).message}`, { cause: e });
  }
  closeSync(fd);
  try { renameSync(tmp, path); } catch (e) {
    try { unlinkSync(tmp); } catch { /* already gone */ }
    throw new ArenaError('SAVE_FAILED', `${path}: ${(e as Error).message}`, { cause: e });
  }
  return FILE_HEADER + payloadBytes;
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

function readExact(fd: number, into: Uint8Array, position: number, path: string): void {
  let done = 0;
  while (done < into.length) {
    const n = readSync(fd, into, done, into.length - done, position + done);
    if (n === 0) throw bad(path, `truncated: ended at byte ${position + done}`);
    done += n;
  }
}

/** Reads and checks a checkpoint's headers and checksum; allocates no arena. */
export function inspectCheckpoint(path: string): CheckpointInfo {
  let fd: number;
  try { fd = openSync(path, 'r'); } catch (e) { throw new ArenaError('BAD_CHECKPOINT', `${path}: ${(e as Error).message}`, { cause: e }); }
  try {
    return inspectOpen(fd, path);
  } finally {
    closeSync(fd);
  }
}

function inspectOpen(fd: number, path: string): CheckpointInfo {
  const size = fstatSync(fd).size;
  if (size < FILE_HEADER) throw bad(path, `truncated: ${size} bytes, a checkpoint starts with a ${FILE_HEADER}-byte header`);
  const head = Buffer.alloc(FILE_HEADER);
  readExact(fd, head, 0, path);
  if (!head.subarray(0, 8).equals(MAGIC)) throw bad(path, 'not an nn-arena checkpoint (bad magic)');
  if (head.readUInt32LE(12) !== BOM) throw bad(path, 'written with another byte order');
  if ((native().crc32c(head.subarray(0, 60)) >>> 0) !== head.readUInt32LE(60)) throw bad(path, 'file header checksum mismatch (corrupted)');
  const version = head.readUInt32LE(8);
  if (version !== VERSION) throw bad(path, `unsupported checkpoint version ${version} (this build reads ${VERSION})`);
  const big = (at: number) => head.readBigUInt64LE(at);
  const arenaBytes = big(16), payloadBytes = big(24), steps = big(32);
  if (arenaBytes > BigInt(Number.MAX_SAFE_INTEGER) || payloadBytes > arenaBytes) throw bad(path, `impossible sizes (arena ${arenaBytes}, payload ${payloadBytes})`);
  if (Number(arenaBytes) > totalmem()) throw bad(path, `claims an arena of ${arenaBytes} bytes, more than this machine's ${totalmem()} bytes of memory`);
  if (BigInt(size) !== BigInt(FILE_HEADER) + payloadBytes) throw bad(path, `the header says ${FILE_HEADER + Number(payloadBytes)} bytes, the file has ${size}${BigInt(size) < BigInt(FILE_HEADER) + payloadBytes ? ' (truncated)' : ''}`);

  // The arena header: re-planned from its own description, it must come out identical.
  const first = Buffer.alloc(Math.min(Number(payloadBytes), 128 + 4096 * 248 + 4096));
  readExact(fd, first, FILE_HEADER, path);
  const spec = decodeSpec(first);
  if (typeof spec === 'string') throw bad(path, `arena header: ${spec}`);
  let plan: Plan;
  try { plan = planLayout(spec); } catch (e) { throw bad(path, `arena header describes no valid layout: ${(e as Error).message}`); }
  if (plan.totalBytes !== Number(arenaBytes)) throw bad(path, `arena header gives ${plan.totalBytes} bytes, the file header ${arenaBytes}`);
  if (!first.subarray(0, plan.headerBytes).equals(Buffer.from(plan.header))) throw bad(path, 'arena header differs from the layout it describes');
  const mask = head.readUInt32LE(40);
  if (mask >>> KINDS.length) throw bad(path, `unknown kinds in the saved-kinds mask 0x${mask.toString(16)}`);
  const expected = plan.headerBytes + savedRegions(plan, mask).reduce((a, r) => a + r.bytes, 0);
  if (expected !== Number(payloadBytes)) throw bad(path, `payload of ${payloadBytes} bytes, the saved regions need ${expected}`);

  // Checksum of the whole payload, streamed.
  const chunk = Buffer.alloc(Math.min(CHUNK, Number(payloadBytes)));
  let crc = 0;
  for (let at = 0; at < Number(payloadBytes); at += chunk.length) {
    const part = chunk.subarray(0, Math.min(chunk.length, Number(payloadBytes) - at));
    readExact(fd, part, FILE_HEADER + at, path);
    crc = native().crc32c(part, crc);
  }
  if ((crc >>> 0) !== head.readUInt32LE(44)) throw bad(path, 'payload checksum mismatch (corrupted)');
  return { path, version, arenaBytes: Number(arenaBytes), payloadBytes: Number(payloadBytes), steps: Number(steps), kinds: KINDS.filter((k) => mask & (1 << KIND_INDEX[k])), plan };
}

/** A checked checkpoint as a new arena (made by `create` from the saved plan), sent to the
 *  device in one transfer. */
export function loadArena<A extends ArenaBytes>(path: string, create: (plan: Plan) => A): { arena: A; info: CheckpointInfo } {
  const info = inspectCheckpoint(path);
  const arena = create(info.plan);
  try {
    const fd = openSync(path, 'r');
    try {
      let at = FILE_HEADER + info.plan.headerBytes;
      for (const r of savedRegions(info.plan, info.kinds.reduce((m, k) => m | (1 << KIND_INDEX[k]), 0))) {
        readExact(fd, arena.bytes(r.offset, r.bytes), at, path);
        at += r.bytes;
      }
    } finally {
      closeSync(fd);
    }
    arena.toDevice();
  } catch (e) {
    arena.dispose();
    throw e;
  }
  return { arena, info };
}
