// known-keys.ts: option objects hold only the names their function reads. A misspelled option
// (`optimiser`, `backnd`, `learningRate`) would otherwise be silently ignored in plain JS; it is
// an OptionError UNKNOWN_OPTION naming the key, the nearest valid name and every valid name.
import { OptionError } from './errors.js';

/** Edit distance (insertions, deletions, substitutions; a swap of two neighbours counts 1). */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/** The initials of a camelCase or snake_case name: learningRate -> lr, learning_rate -> lr. */
const initials = (s: string) =>
  s
    .split(/(?=[A-Z])|_|-/)
    .filter(Boolean)
    .map((w) => w[0]!.toLowerCase())
    .join('');

/** The valid name `key` most likely meant: the closest by edit distance (case ignored) within
 *  a third of its length (at least 2 edits), or the one its initials spell; undefined if none. */
export function nearestName(key: string, valid: readonly string[]): string | undefined {
  const k = key.toLowerCase();
  let best: string | undefined,
    bestD = Infinity;
  for (const v of valid) {
    const dv = distance(k, v.toLowerCase());
    if (dv < bestD) {
      best = v;
      bestD = dv;
    }
  }
  if (best !== undefined && bestD <= Math.max(2, Math.floor(key.length / 3))) return best;
  const ini = initials(key);
  return ini.length > 1 ? valid.find((v) => v.toLowerCase() === ini) : undefined;
}

/** The end of a refusal's message naming the valid name `value` most likely meant, or ''. */
export function didYouMean(value: unknown, valid: readonly string[]): string {
  const near = typeof value === 'string' ? nearestName(value, valid) : undefined;
  return near ? `; did you mean '${near}'?` : '';
}

/** Refuses any own enumerable key of `options` that is not in `valid` (`what`: the function,
 *  for the message). A key list that cannot be read (a throwing Proxy) is BAD_OPTION. */
export function checkKnownKeys(options: object, valid: readonly string[], what: string, field = ''): void {
  let keys: string[];
  try {
    keys = Object.keys(options);
  } catch (e) {
    throw new OptionError('BAD_OPTION', field || 'options', undefined, `the keys of ${what}'s options could not be read (${(e as Error)?.message})`);
  }
  for (const key of keys) {
    if (valid.includes(key)) continue;
    throw new OptionError(
      'UNKNOWN_OPTION',
      field ? `${field}.${key}` : key,
      key,
      `is not an option of ${what}${didYouMean(key, valid)} (its options: ${valid.join(', ')})`,
    );
  }
}

/** The keys of an options interface T, as a list the compiler holds to T: a key of T missing
 *  from `keys` (or a name not in T) does not compile, so the list cannot drift from the type. */
export const keysOf =
  <T>() =>
  <const K extends readonly (keyof T & string)[]>(keys: K & ([keyof T] extends [K[number]] ? unknown : never)): readonly string[] =>
    keys;
