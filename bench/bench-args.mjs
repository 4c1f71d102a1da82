// bench-args.mjs: what the benchmark scripts share to read their command line and to make their
// deterministic data sets.

/** The value after `--name` on the command line, or `dflt`. */
export function option(name, dflt) {
  const args = process.argv.slice(2);
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
}

/** Whether `--name` is on the command line. */
export const flag = (name) => process.argv.slice(2).includes(`--${name}`);

/** A xorshift32 generator from `seed`: each call a number in [0, 1). */
export function xorshift(seed) {
  let s = seed >>> 0;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 2 ** 32;
  };
}
