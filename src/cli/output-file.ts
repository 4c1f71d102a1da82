// output-file.ts (CLI): the files `--svg`, `--report`, `--save` and `export OUT` name. Checked
// before any work starts (a bad path fails in a second, not after training) and written under
// the library's one rule for output files (src/formats/file.ts: never a folder, a FIFO or a
// device, never through a symbolic link), as the CLI's usage errors.
import { checkOutputPath, writeOutputFile as writeChecked, type Refuse } from '../formats/file.js';
import { usage } from './format.js';

const refuse =
  (flag: string): Refuse =>
  (why) =>
    usage(`${flag}: ${why}`);

/** The path of an output file as given, checked: non-empty, in an existing folder, and not a
 *  folder, a symlink or another non-regular file. */
export function checkOutputFile(flag: string, file: unknown): string {
  if (typeof file !== 'string' || file.trim() === '' || file.includes('\0')) throw usage(`${flag}: needs a file name, got '${String(file)}'`);
  checkOutputPath(file, refuse(flag));
  return file;
}

/** Writes `text` to `file` (created or truncated), refusing a symlink at the path. */
export function writeOutputFile(flag: string, file: string, text: string): void {
  writeChecked(file, Buffer.from(text), refuse(flag));
}
