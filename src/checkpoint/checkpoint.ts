// checkpoint.ts: an arena on disk (the format: checkpoint/format.ts). Synchronous and
// asynchronous forms of save, load and inspect run the same parser and the same steps.
//
// Saving writes a temporary file (created exclusively under an unpredictable name, never
// through a symlink), fsyncs it, renames it over the target and fsyncs the directory: a crash
// leaves the old file or the new one, whole, and concurrent saves to one path leave one complete
// file. save() writes the regions straight from the arena in one writev; saveAsync() copies them
// chunk by chunk into a buffer of its own and writes that with fs promises (the event loop runs
// between chunks; the header, with the checksum of what was copied, is written last).
//
// Loading opens the file once (O_NONBLOCK: a FIFO or a device is refused by fstat instead of
// blocking) and reads it in one pass: the headers are checked (the arena header re-planned from
// its own description must match byte for byte, and the memory it needs must be available)
// before anything is allocated, then the regions are read straight into the host side while the
// checksum runs, and only a verified arena goes to the device: the regions the file holds (the
// rest is zero on both sides of a new arena). No region is ever taken as one view of more than
// MAX_PIECE bytes, so arenas with regions of 4 GiB and more save and load.
import { randomBytes } from 'node:crypto';
import { closeSync, constants, fstatSync, fsyncSync, openSync, readSync, renameSync, unlinkSync, writevSync } from 'node:fs';
import { open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { freemem } from 'node:os';
import { dirname } from 'node:path';
import { ArenaError, OptionError } from '../core/errors.js';
import { checkKnownKeys } from '../core/known-keys.js';
import type { Plan } from '../layout/plan.js';
import { cudaInfo, native } from '../native/addon.js';
import { selectRanges, type ByteRange } from '../layout/selector.js';
import {
  bad,
  checkPath,
  CHUNK,
  encodeFileHeader,
  fsMessage,
  MAX_PIECE,
  parseCheckpoint,
  payloadPieces,
  savedRegions,
  saveOptions,
  type CheckpointInfo,
  type IoProgress,
  type Opened,
  type SaveOptions,
} from './format.js';

export { DATA_KINDS, type CheckpointInfo, type IoProgress, type SaveOptions } from './format.js';

/** What a checkpoint reads from and writes into: an arena's plan and host bytes. (The format
 *  sits below the Arena class: arena.ts uses this module, never the other way round.) */
export interface ArenaBytes {
  readonly plan: Plan;
  bytes(offset: number, bytes: number): Uint8Array;
}

export interface LoadOptions {
  /** loadAsync only: called after each chunk read. */
  onProgress?: (p: IoProgress) => void;
}

const failed = (path: string, e: unknown) => (e instanceof ArenaError ? e : new ArenaError('SAVE_FAILED', `${path}: ${fsMessage(e)}`, { cause: e }));
const tmpName = (path: string) => `${path}.tmp-${randomBytes(12).toString('hex')}`;
// Exclusive creation of a name nobody can guess: an existing file or a planted symlink at that
// name makes the open fail instead of being written through.
const CREATE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever; fstat then
// refuses anything but a regular file before a byte is read.
const READ = constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY;
/** Filesystems that cannot fsync a directory say so with one of these. */
const NO_DIR_SYNC = new Set(['EINVAL', 'ENOTSUP', 'EOPNOTSUPP']);

function noProgress(onProgress: unknown, what: string): void {
  if (onProgress !== undefined)
    throw new OptionError('BAD_OPTION', 'onProgress', onProgress, `is for ${what}Async (the synchronous ${what} reports no progress)`);
}

// ---- save -------------------------------------------------------------------------------------

export function saveArena(arena: ArenaBytes, path: string, options: SaveOptions = {}): number {
  checkPath(path);
  const plan = arena.plan;
  const s = saveOptions(plan, options);
  noProgress(s.onProgress, 'save');
  const parts = payloadPieces(plan, s).map(([offset, bytes]) => arena.bytes(offset, bytes));
  const payloadBytes = parts.reduce((a, p) => a + p.length, 0);
  const crc = parts.reduce((c, p) => native().crc32c(p, c), 0);
  const head = encodeFileHeader(plan, s, payloadBytes, crc);
  const tmp = tmpName(path);
  let fd: number;
  try {
    fd = openSync(tmp, CREATE, 0o666);
  } catch (e) {
    throw failed(path, e);
  }
  try {
    try {
      writeAll(fd, [head, ...parts]);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (e) {
    try {
      unlinkSync(tmp);
    } catch {
      /* already gone */
    }
    throw failed(path, e);
  }
  let dir: number;
  try {
    dir = openSync(dirname(path), constants.O_RDONLY | constants.O_DIRECTORY);
  } catch (e) {
    throw failed(path, e);
  }
  try {
    fsyncSync(dir);
  } catch (e) {
    if (!NO_DIR_SYNC.has((e as { code?: string }).code ?? '')) throw failed(path, e);
  } finally {
    closeSync(dir);
  }
  return head.length + payloadBytes;
}

/** One writev for the whole file; a short write (for large payloads) continues where it stopped. */
function writeAll(fd: number, parts: Uint8Array[]): void {
  const pending = parts.filter((p) => p.length > 0);
  while (pending.length > 0) {
    let n = writevSync(fd, pending);
    while (n > 0) {
      const first = pending[0]!;
      if (n >= first.length) {
        n -= first.length;
        pending.shift();
      } else {
        pending[0] = first.subarray(n);
        n = 0;
      }
    }
  }
}

/** save() without blocking the event loop: the payload is copied a chunk at a time into a
 *  buffer of this call's own and written from there (the arena may be disposed meanwhile: the
 *  save then fails, and no write ever reads freed memory). Keep the host side unchanged until it
 *  settles: what is saved is what each chunk holds when it is copied. */
export async function saveArenaAsync(arena: ArenaBytes, path: string, options: SaveOptions = {}): Promise<number> {
  checkPath(path);
  const plan = arena.plan;
  const s = saveOptions(plan, options);
  const pieces = payloadPieces(plan, s);
  const total = pieces.reduce((a, [, b]) => a + b, 0);
  const headBytes = encodeFileHeader(plan, s, 0, 0).length;
  const tmp = tmpName(path);
  let fh: FileHandle;
  try {
    fh = await open(tmp, CREATE, 0o666);
  } catch (e) {
    throw failed(path, e);
  }
  try {
    let crc = 0,
      done = 0;
    const buf = Buffer.allocUnsafe(Math.min(CHUNK, Math.max(total, 1)));
    for (const [offset, bytes] of pieces) {
      for (let at = 0; at < bytes;) {
        const n = Math.min(buf.length, bytes - at);
        buf.set(arena.bytes(offset + at, n));
        const chunk = buf.subarray(0, n);
        crc = native().crc32c(chunk, crc);
        await writeFully(fh, chunk, headBytes + done);
        at += n;
        done += n;
        s.onProgress?.({ bytes: done, totalBytes: total });
      }
    }
    await writeFully(fh, encodeFileHeader(plan, s, total, crc), 0);
    await fh.sync();
    await fh.close();
    await rename(tmp, path);
  } catch (e) {
    await fh.close().catch(() => {});
    await unlink(tmp).catch(() => {});
    throw failed(path, e);
  }
  try {
    const dir = await open(dirname(path), constants.O_RDONLY | constants.O_DIRECTORY);
    try {
      await dir.sync();
    } catch (e) {
      if (!NO_DIR_SYNC.has((e as { code?: string }).code ?? '')) throw e;
    } finally {
      await dir.close();
    }
  } catch (e) {
    throw failed(path, e);
  }
  return headBytes + total;
}

async function writeFully(fh: FileHandle, data: Uint8Array, position: number): Promise<void> {
  for (let done = 0; done < data.length;) {
    const { bytesWritten } = await fh.write(data, done, data.length - done, position + done);
    done += bytesWritten;
  }
}

// ---- read ------------------------------------------------------------------------------------

/** Reads `into` fully from `position` (BAD_CHECKPOINT when the file ends first). */
function readFullySync(fd: number, path: string, into: Uint8Array, position: number): void {
  for (let done = 0; done < into.length;) {
    let n: number;
    try {
      n = readSync(fd, into, done, Math.min(into.length - done, MAX_PIECE), position + done);
    } catch (e) {
      throw bad(path, fsMessage(e));
    }
    if (n === 0) throw bad(path, `truncated: ended at byte ${position + done}`);
    done += n;
  }
}

async function readFully(fh: FileHandle, path: string, into: Uint8Array, position: number): Promise<void> {
  for (let done = 0; done < into.length;) {
    let n: number;
    try {
      ({ bytesRead: n } = await fh.read(into, done, Math.min(into.length - done, MAX_PIECE), position + done));
    } catch (e) {
      throw bad(path, fsMessage(e));
    }
    if (n === 0) throw bad(path, `truncated: ended at byte ${position + done}`);
    done += n;
  }
}

function openSyncChecked(path: string): { fd: number; size: number } {
  checkPath(path);
  let fd: number;
  try {
    fd = openSync(path, READ);
  } catch (e) {
    throw bad(path, fsMessage(e));
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw bad(path, 'not a regular file');
    return { fd, size: st.size };
  } catch (e) {
    closeSync(fd);
    throw e instanceof ArenaError ? e : bad(path, fsMessage(e));
  }
}

async function openChecked(path: string): Promise<{ fh: FileHandle; size: number }> {
  checkPath(path);
  let fh: FileHandle;
  try {
    fh = await open(path, READ);
  } catch (e) {
    throw bad(path, fsMessage(e));
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw bad(path, 'not a regular file');
    return { fh, size: st.size };
  } catch (e) {
    await fh.close().catch(() => {});
    throw e instanceof ArenaError ? e : bad(path, fsMessage(e));
  }
}

/** The parser driven by synchronous reads. */
function parseSync(fd: number, path: string, size: number): Opened {
  const gen = parseCheckpoint(path, size);
  let at = 0;
  for (let r = gen.next(); ;) {
    if (r.done) return r.value;
    const buf = new Uint8Array(r.value);
    readFullySync(fd, path, buf, at);
    at += buf.length;
    r = gen.next(buf);
  }
}

async function parse(fh: FileHandle, path: string, size: number): Promise<Opened> {
  const gen = parseCheckpoint(path, size);
  let at = 0;
  for (let r = gen.next(); ;) {
    if (r.done) return r.value;
    const buf = new Uint8Array(r.value);
    await readFully(fh, path, buf, at);
    at += buf.length;
    r = gen.next(buf);
  }
}

/** The saved regions in file order, cut to CHUNK bytes. */
function regionChunks(o: Opened): Array<[offset: number, bytes: number]> {
  return cutRanges(
    savedRegions(o.info.plan, o.saved).map((r) => ({ offset: r.offset, bytes: r.bytes })),
    CHUNK,
  ).map((r) => [r.offset, r.bytes]);
}

/** Reads and checks a checkpoint's headers and checksum; allocates no arena. */
export function inspectCheckpoint(path: string): CheckpointInfo {
  const { fd, size } = openSyncChecked(path);
  try {
    const o = parseSync(fd, path, size);
    const chunk = new Uint8Array(Math.min(CHUNK, Math.max(1, size - o.at)));
    let crc = o.crc;
    for (let at = o.at; at < size;) {
      const part = chunk.subarray(0, Math.min(chunk.length, size - at));
      readFullySync(fd, path, part, at);
      crc = native().crc32c(part, crc);
      at += part.length;
    }
    if (crc >>> 0 !== o.payloadCrc) throw bad(path, 'payload checksum mismatch (corrupted)');
    return o.info;
  } finally {
    closeSync(fd);
  }
}

function progressOption(options: unknown): LoadOptions['onProgress'] {
  if (options === undefined) return undefined;
  if (options === null || typeof options !== 'object') throw new OptionError('BAD_OPTION', 'options', options, 'must be an object { onProgress? }');
  checkKnownKeys(options, ['onProgress'], 'load');
  const { onProgress } = options as LoadOptions;
  if (onProgress !== undefined && typeof onProgress !== 'function') throw new OptionError('BAD_OPTION', 'onProgress', onProgress, 'must be a function');
  return onProgress;
}

// ---- load ------------------------------------------------------------------------------------

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
    throw new ArenaError(
      'HOST_OOM',
      `${path}: the arena needs ${host} bytes of host memory (${cuda ? 'its host side' : 'host and device side: the CPU backend keeps both in host memory'}); ${free} bytes are available`,
    );
  }
  if (cuda && (options.memory ?? 'device') === 'device' && info && info.devices > 0 && plan.totalBytes > info.freeBytes) {
    throw new ArenaError('DEVICE_OOM', `${path}: the arena needs ${plan.totalBytes} bytes of device memory; ${info.freeBytes} bytes are free`);
  }
}

/** The options of the arena to be loaded that decide where its memory comes from. */
export interface MemoryOptions {
  backend?: unknown;
  memory?: unknown;
}

/** A checkpoint opened and checked up to its payload (readCheckpoint, readCheckpointAsync). */
export interface OpenCheckpoint<R> {
  readonly info: CheckpointInfo;
  /** HOST_OOM / DEVICE_OOM when an arena of this plan with `options` cannot be had now. */
  checkMemory(options: MemoryOptions): void;
  /** Reads the saved regions straight into `arena`'s host side while the checksum runs;
   *  BAD_CHECKPOINT when it does not match (the caller then disposes the arena). */
  readInto(arena: ArenaBytes): R;
  /** What to send to the device afterwards: the regions the file held, merged across padding
   *  (the header went up at create; the rest is zero on both sides of a new arena). */
  readonly ranges: ByteRange[];
  readonly kinds: string[];
}

function opened<R>(o: Opened, path: string, readInto: (arena: ArenaBytes) => R): OpenCheckpoint<R> {
  const kinds = [...o.info.kinds, ...o.info.extras];
  return {
    info: o.info,
    checkMemory: (options) => checkMemory(path, o.info.plan, options),
    readInto,
    ranges: kinds.length ? selectRanges(o.info.plan, { kinds }) : [],
    kinds,
  };
}

/** Opens `path` once, checks its headers, and hands the open checkpoint to `use` (Arena.load
 *  allocates the arena from info.plan and reads into it). The file replaced or changed during
 *  the load cannot mix in: the one open file is what is read and verified. */
export function readCheckpoint<T>(path: string, use: (cp: OpenCheckpoint<void>) => T): T {
  const { fd, size } = openSyncChecked(path);
  try {
    const o = parseSync(fd, path, size);
    return use(
      opened(o, path, (arena) => {
        let crc = o.crc,
          at = o.at;
        for (const [offset, bytes] of regionChunks(o)) {
          const into = arena.bytes(offset, bytes);
          readFullySync(fd, path, into, at);
          crc = native().crc32c(into, crc);
          at += bytes;
        }
        if (crc >>> 0 !== o.payloadCrc) throw bad(path, 'payload checksum mismatch (corrupted)');
      }),
    );
  } finally {
    closeSync(fd);
  }
}

/** readCheckpoint over fs promises: readInto reads a chunk at a time (`onProgress` after each;
 *  the event loop runs between them) into an arena nobody else can reach yet. */
export async function readCheckpointAsync<T>(path: string, loadOptions: LoadOptions, use: (cp: OpenCheckpoint<Promise<void>>) => Promise<T>): Promise<T> {
  const onProgress = progressOption(loadOptions);
  const { fh, size } = await openChecked(path);
  try {
    const o = await parse(fh, path, size);
    return await use(
      opened(o, path, async (arena) => {
        let crc = o.crc,
          at = o.at;
        const total = size - o.at;
        for (const [offset, bytes] of regionChunks(o)) {
          const into = arena.bytes(offset, bytes);
          await readFully(fh, path, into, at);
          crc = native().crc32c(into, crc);
          at += bytes;
          onProgress?.({ bytes: at - o.at, totalBytes: total });
        }
        if (crc >>> 0 !== o.payloadCrc) throw bad(path, 'payload checksum mismatch (corrupted)');
      }),
    );
  } finally {
    await fh.close().catch(() => {});
  }
}

/** Ranges cut to at most `max` bytes each. */
export function cutRanges(ranges: readonly ByteRange[], max: number): ByteRange[] {
  return ranges.flatMap((r) =>
    Array.from({ length: Math.ceil(r.bytes / max) }, (_, i) => ({ offset: r.offset + i * max, bytes: Math.min(max, r.bytes - i * max) })),
  );
}
