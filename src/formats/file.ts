// file.ts: the files nn-arena reads and writes by path, and the one rule for each.
// Reading: a file is opened without blocking (a FIFO with no writer would wait for one forever)
// and refused by fstat unless it is a regular file, before a byte is read; failures are an
// OptionError naming the argument (a missing file, a folder, no permission) instead of a bare
// Node.js error. Writing (savers, the CLI's output files): the folder must exist and the path be
// absent or a regular file, never a folder, a FIFO, a device or a socket, and never a symbolic
// link unless the caller opts in; the file is opened without following a link (O_NOFOLLOW) and
// without blocking, and checked again by fstat before it is truncated or written.
import { closeSync, constants, fstatSync, ftruncateSync, lstatSync, openSync, readFileSync, statSync, writeSync, type Stats } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { OptionError } from '../core/errors.js';

/** A file path argument: a non-empty string without NUL bytes. */
export function checkPath(path: unknown, field = 'path'): string {
  if (typeof path !== 'string' || path.length === 0 || path.includes('\0'))
    throw new OptionError('BAD_PATH', field, path, 'must be a non-empty file path string');
  return path;
}

/** What a path that is not a regular file holds, in words. */
function kindOf(st: Stats): string {
  if (st.isDirectory()) return 'a folder';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  if (st.isSymbolicLink()) return 'a symbolic link';
  return 'a special file';
}

const notRegular = (st: Stats) => `is ${kindOf(st)}, which is not a regular file`;
const errno = (e: unknown) => (e as NodeJS.ErrnoException).code ?? String(e);
const fsMessage = (e: unknown) => (e instanceof Error ? e.message : String(e));

// O_NONBLOCK: opening a FIFO would otherwise wait for the other end forever (on the JS thread
// for a synchronous open, on a libuv thread for fs/promises, which then keeps the process alive).
const READ = constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY;
const WRITE = constants.O_WRONLY | constants.O_CREAT | constants.O_NONBLOCK | constants.O_NOCTTY;

const cannotRead = (field: string, path: string, why: string) => new OptionError('BAD_PATH', field, path, `cannot be read (${why})`);

/** `path` opened for reading, a regular file (OptionError BAD_PATH naming `field` otherwise). */
export function openRegularSync(path: string, field: string): number {
  let fd: number;
  try {
    fd = openSync(path, READ);
  } catch (e) {
    throw cannotRead(field, path, fsMessage(e));
  }
  let st: Stats;
  try {
    st = fstatSync(fd);
  } catch (e) {
    closeSync(fd);
    throw cannotRead(field, path, fsMessage(e));
  }
  if (!st.isFile()) {
    closeSync(fd);
    throw cannotRead(field, path, notRegular(st));
  }
  return fd;
}

/** openRegularSync's rule, asynchronously (the streamed .npy files). */
export async function openRegular(path: string, field: string): Promise<FileHandle> {
  let fd: FileHandle;
  try {
    fd = await open(path, READ);
  } catch (e) {
    throw cannotRead(field, path, fsMessage(e));
  }
  let st: Stats;
  try {
    st = await fd.stat();
  } catch (e) {
    await fd.close();
    throw cannotRead(field, path, fsMessage(e));
  }
  if (!st.isFile()) {
    await fd.close();
    throw cannotRead(field, path, notRegular(st));
  }
  return fd;
}

/** The bytes of `source`: a path (read whole) or the bytes themselves. */
export function bytesOf(source: unknown, field = 'source'): Uint8Array {
  if (source instanceof Uint8Array) return source;
  const path = checkPath(source, field);
  const fd = openRegularSync(path, field);
  try {
    return readFileSync(fd);
  } catch (e) {
    throw cannotRead(field, path, fsMessage(e));
  } finally {
    closeSync(fd);
  }
}

/** The error a refused output path becomes (`why`: a sentence naming the path): an OptionError
 *  in the library, the CLI's usage error there. */
export type Refuse = (why: string) => Error;

/** The library's refusal of output path `path` (argument `field`): OptionError BAD_PATH. */
const badOutputPath =
  (field: string, path: string): Refuse =>
  (why) =>
    new OptionError('BAD_PATH', field, path, why);

/** The option of a saver that writes a file by path. */
export interface OutputOptions {
  /** Write through a symbolic link at the path (default false: a link there is refused). */
  followLinks?: boolean;
}

/** options.followLinks, read once: undefined or a boolean. */
function followLinksOf(options: unknown): boolean {
  const v = options !== null && typeof options === 'object' ? (options as { followLinks?: unknown }).followLinks : undefined;
  if (v !== undefined && typeof v !== 'boolean') throw new OptionError('BAD_OPTION', 'followLinks', v, 'must be a boolean');
  return v === true;
}

/** Checks output path `path` before any work: its folder exists, and the path is new or a
 *  regular file (a symbolic link only with `links`, and then to a regular file or nothing). */
export function checkOutputPath(path: string, refuse: Refuse, links = false): void {
  const full = resolve(path);
  const dir = dirname(full);
  let dirOk = false;
  try {
    dirOk = statSync(dir).isDirectory();
  } catch {
    /* missing */
  }
  if (!dirOk) throw refuse(`the folder ${dir} does not exist`);
  let st: Stats;
  try {
    st = lstatSync(full);
  } catch {
    return;
  } // a new file
  if (st.isSymbolicLink()) {
    if (!links) throw refuse(`${full} is a symbolic link; nn-arena does not write through links`);
    try {
      st = statSync(full);
    } catch {
      return;
    } // a link to a new file
  }
  if (!st.isFile()) throw refuse(`${full} ${notRegular(st)}`);
}

/** Writes `bytes` to `path` (created, or truncated once it is known to be a regular file) under
 *  checkOutputPath's rule, every failure (EIO, ENOSPC, ...) through `refuse`. */
export function writeOutputFile(path: string, bytes: Uint8Array, refuse: Refuse, links = false): void {
  checkOutputPath(path, refuse, links);
  const full = resolve(path);
  let fd: number;
  try {
    fd = openSync(path, WRITE | (links ? 0 : constants.O_NOFOLLOW), 0o666);
  } catch (e) {
    // ELOOP: a link planted since the check; ENXIO: a FIFO with no reader.
    const code = errno(e);
    throw refuse(code === 'ELOOP' ? `${full} is a symbolic link; nn-arena does not write through links` : `cannot write ${full} (${code})`);
  }
  try {
    let st: Stats;
    try {
      st = fstatSync(fd);
      if (st.isFile()) {
        ftruncateSync(fd, 0);
        for (let at = 0; at < bytes.length;) at += writeSync(fd, bytes, at);
      }
    } catch (e) {
      throw refuse(`cannot write ${full} (${errno(e)})`);
    }
    if (!st.isFile()) throw refuse(`${full} ${notRegular(st)}`);
  } finally {
    closeSync(fd);
  }
}

/** A saver's write (saveSafetensors, saveOnnx): the path checked before `make` does any work,
 *  then its bytes written under writeOutputFile's rule; the bytes written. */
export function saveFile(path: unknown, options: unknown, make: () => Uint8Array): number {
  const file = checkPath(path);
  const links = followLinksOf(options);
  const refuse = badOutputPath('path', file);
  checkOutputPath(file, refuse, links);
  const bytes = make();
  writeOutputFile(file, bytes, refuse, links);
  return bytes.length;
}
