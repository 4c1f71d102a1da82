// report.ts: bench/results/<machine>.json, the figures of `npm run bench` on one machine; a run of
// some parts (--only) keeps the other parts' figures. bench/results/README.md is rebuilt from
// every results file after each run (bench/readme.ts).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderReadme } from './readme.js';
import type { Part, Results } from './results-file.js';

export type { Part, Results } from './results-file.js';

export function writeResults(dir: string, r: Results): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${r.machine.name}.json`);
  let previous: Partial<Results> = {};
  try {
    previous = JSON.parse(readFileSync(file, 'utf8')) as Results;
  } catch {
    /* first run */
  }
  const merged: Results = { ...r };
  for (const part of ['transfers', 'steps', 'memory', 'um', 'cpu'] as const) {
    if (!r.parts.includes(part) && previous[part]) (merged as unknown as Record<string, unknown>)[part] = previous[part];
  }
  const now = (value: string | null | undefined) => Object.fromEntries(value ? r.parts.map((p) => [p, value]) : []);
  merged.partDates = { ...(previous.partDates ?? {}), ...now(r.date) };
  // A part measured now without a known commit must not keep an older run's commit.
  const kept = Object.fromEntries(Object.entries(previous.partCommits ?? {}).filter(([p]) => !r.parts.includes(p as Part)));
  merged.partCommits = { ...kept, ...now(r.commit) };
  writeFileSync(file, `${JSON.stringify(merged, null, 2)}\n`);
  renderReadme(dir);
  return file;
}
