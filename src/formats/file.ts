// file.ts: reading a whole file for the loaders and importers, with the failure as an
// OptionError naming the argument (a missing file, a folder, no permission) instead of a bare
// Node.js error.
import { readFileSync, statSync } from 'node:fs';
import { OptionError } from '../errors.js';

/** A file path argument: a non-empty string without NUL bytes. */
export function checkPath(path: unknown, field = 'path'): string {
  if (typeof path !== 'string' || path.length === 0 || path.includes('\0')) throw new OptionError('BAD_PATH', field, path, 'must be a non-empty file path string');
  return path;
}

/** The bytes of `source`: a path (read whole) or the bytes themselves. */
export function bytesOf(source: unknown, field = 'source'): Uint8Array {
  if (source instanceof Uint8Array) return source;
  const path = checkPath(source, field);
  try {
    if (!statSync(path).isFile()) throw new Error('not a regular file');
    return readFileSync(path);
  } catch (e) {
    throw new OptionError('BAD_PATH', field, path, `cannot be read (${(e as Error).message})`);
  }
}
