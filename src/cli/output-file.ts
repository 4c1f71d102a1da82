// output-file.ts (CLI): the files `--svg` and `--report` write. Checked before any work starts
// (a bad path fails in a second, not after training), and written without following a symlink
// (O_NOFOLLOW: a link planted at the path is refused, not written through).
import { constants, closeSync, lstatSync, openSync, statSync, writeSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { usage } from './format.js';

/** The path of an output file as given, checked: non-empty, in an existing folder, and not a
 *  folder, a symlink or another non-regular file. */
export function checkOutputFile(flag: string, file: unknown): string {
  if (typeof file !== 'string' || file.trim() === '') throw usage(`${flag}: needs a file name, got '${String(file)}'`);
  const path = resolve(file);
  const dir = dirname(path);
  let dirOk = false;
  try { dirOk = statSync(dir).isDirectory(); } catch { /* missing */ }
  if (!dirOk) throw usage(`${flag}: the folder ${dir} does not exist`);
  let st;
  try { st = lstatSync(path); } catch { return file; }  // a new file
  if (st.isSymbolicLink()) throw usage(`${flag}: ${path} is a symbolic link; nn-arena does not write through links`);
  if (!st.isFile()) throw usage(`${flag}: ${path} exists and is not a regular file`);
  return file;
}

/** Writes `text` to `file` (created or truncated), refusing a symlink at the path. */
export function writeOutputFile(flag: string, file: string, text: string): void {
  let fd: number;
  try {
    fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o644);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw usage(code === 'ELOOP' ? `${flag}: ${resolve(file)} is a symbolic link; nn-arena does not write through links` : `${flag}: cannot write ${resolve(file)} (${code ?? String(e)})`);
  }
  try {
    const buf = Buffer.from(text);
    for (let at = 0; at < buf.length;) at += writeSync(fd, buf, at);
  } finally {
    closeSync(fd);
  }
}
