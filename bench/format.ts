// format.ts: number formats and the provenance line shared by the sections of
// bench/results/README.md (bench/readme.ts, bench/readme-machine.ts).

export const fix = (n: number, d = 1): string => n.toFixed(d);
export const int = (n: number): string => Math.round(n).toLocaleString('en-US');
export const mb = (bytes: number, d = 1): string => (bytes / 1e6).toFixed(d);
/** "a-b" over the values, or "a" where they agree to the digits shown. */
export function span(values: number[], d = 1): string {
  const lo = fix(Math.min(...values), d),
    hi = fix(Math.max(...values), d);
  return lo === hi ? lo : `${lo}-${hi}`;
}
export const median = (v: number[]): number => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;

/** A markdown table: a header row, its alignment row (numbers right-aligned from `right` on), the rows. */
export function table(header: string[], rows: string[][], right = 1): string[] {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map((_, i) => (i >= right ? '---:' : '---'))), ...rows.map(line)];
}

export interface Provenance {
  date: string;
  commit?: string | null;
  command?: string;
}

/** The line under a section's title: which file, when, on which code, and the command that
 *  measures it again. A file written before results recorded their commit says where to look. */
export function provenance(file: string, p: Provenance, command = p.command): string {
  const commit = p.commit ? `commit ${p.commit}` : `commit not recorded (\`git log -- bench/results/${file}\` lists the commits that wrote it)`;
  return `\`${file}\`, ${p.date.slice(0, 10)}, ${commit}. Again: \`${command ?? 'see docs/benchmarks.md'}\`.`;
}
