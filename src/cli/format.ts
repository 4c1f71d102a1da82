// format.ts: small printing and argument helpers shared by the CLI commands.
import { ArenaError } from '../core/errors.js';

// Byte and count formatting: the reports' own (the CLI prints the same numbers as the reports).
export { bytesText as bytes, int } from '../report/text.js';

/** A bad command-line argument: printed as `nn-arena: BAD_ARGUMENT: ...`. */
export const usage = (message: string) => new ArenaError('BAD_ARGUMENT', message);
export function table(rows: string[][], rightAlign: boolean[] = []): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  return rows
    .map((r) =>
      r
        .map((cell, c) => (rightAlign[c] ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export function parseList(value: string, field: string): number[] {
  const parts = value.split(',').map((s) => s.trim());
  return parts.map((p) => {
    const n = Number(p);
    if (p === '' || !Number.isFinite(n)) throw usage(`--${field}: '${p}' is not a number (in '${value}')`);
    return n;
  });
}

export function parseNumber(value: string, field: string): number {
  const n = Number(value);
  if (value.trim() === '' || Number.isNaN(n)) throw usage(`--${field}: '${value}' is not a number`);
  return n;
}

/** A whole number of at least `min`. */
export function parseInteger(value: string, field: string, min: number): number {
  const n = parseNumber(value, field);
  if (!Number.isSafeInteger(n) || n < min) throw usage(`--${field}: must be a whole number of at least ${min}, got '${value}'`);
  return n;
}

/** `--extra` values: NAME:KIND (z, b or w, every layer that has it), NAME:KIND:L1,L2 (those
 *  layers) or NAME:BYTES (a global region of raw bytes). The names and kinds themselves are
 *  checked by planLayout (LayoutError naming the field). */
export function parseExtras(values: readonly string[]): Array<{ name: string; like?: string; layers?: number[]; bytes?: number }> {
  return values.map((value) => {
    const parts = value.split(':');
    const [name = '', second = '', third] = parts;
    if (parts.length < 2 || parts.length > 3 || second === '') throw usage(`--extra: '${value}' is not NAME:KIND[:LAYERS] or NAME:BYTES`);
    if (/^[0-9]+$/.test(second)) {
      if (third !== undefined) throw usage(`--extra: '${value}': a region of raw bytes (NAME:BYTES) takes no layers`);
      return { name, bytes: parseInteger(second, 'extra', 1) };
    }
    return { name, like: second, ...(third === undefined ? {} : { layers: parseList(third, 'extra') }) };
  });
}
