// bench/results keeps the current figures only: one JSON file per benchmark and machine, and
// the README rendered from them (bench/readme.ts). Raw logs, traces and profiles stay out of the
// repository (git history keeps what was there), so the folder does not grow with every run,
// and every figure the docs cite is in a file that is there. CPU only: no addon.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readmeText } from '../bench/readme.js';

const DIR = 'bench/results';
const MAX_FILES = 30;
const MAX_README_LINES = 200;
// docs/cuda.md is being rewritten on another branch, which moves its citations of the round-3
// diary with it; drop it from this list when that lands.

const entries = readdirSync(DIR);
const jsonFiles = entries.filter((f) => f.endsWith('.json'));

/** Whether a cited path is there; a template (`<machine>.json`, `stage-trace-*.txt`) must match
 *  at least one file. */
function cited(path: string): boolean {
  if (!/[<*]/.test(path)) return existsSync(join(DIR, path));
  const re = new RegExp(
    `^${path
      .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
      .replace(/<[^>]*>/g, '[^/]+')
      .replace(/\*/g, '[^/]*')}$`,
  );
  return entries.some((f) => re.test(f));
}

describe('bench/results', () => {
  it(`holds at most ${MAX_FILES} files, each a results JSON or the README, and no folders`, () => {
    expect(entries.length).toBeLessThanOrEqual(MAX_FILES);
    for (const f of entries) {
      expect(statSync(join(DIR, f)).isFile(), `${f} is a folder`).toBe(true);
      expect(f === 'README.md' || f.endsWith('.json'), `${f} is neither a results JSON nor README.md`).toBe(true);
    }
  });

  it('every results JSON names its machine, its date and the command that measures it again', () => {
    for (const f of jsonFiles) {
      const r = JSON.parse(readFileSync(join(DIR, f), 'utf8')) as { machine?: unknown; date?: unknown; command?: unknown };
      expect(typeof r.machine === 'string' ? r.machine.length > 0 : typeof r.machine === 'object' && r.machine !== null, `${f}: machine`).toBe(true);
      expect(typeof r.date === 'string' && !Number.isNaN(Date.parse(r.date)), `${f}: date`).toBe(true);
      expect(typeof r.command === 'string' && r.command.length > 0, `${f}: command`).toBe(true);
    }
  });

  it(`README.md is at most ${MAX_README_LINES} lines and is what the renderer makes of the results files`, () => {
    const readme = readFileSync(join(DIR, 'README.md'), 'utf8');
    expect(readme.split('\n').length).toBeLessThanOrEqual(MAX_README_LINES);
    // Out of date: `npx tsup && npm run bench -- --render`.
    expect(readme).toBe(readmeText(DIR));
  });

  it('every bench/results path the README and the docs cite exists', () => {
    const docs = [
      'README.md',
      join(DIR, 'README.md'),
      'CONTRIBUTING.md',
      ...readdirSync('docs')
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    const missing: string[] = [];
    for (const doc of docs) {
      // A path in git history is cited as COMMIT:bench/results/..., which `git show` takes.
      for (const m of readFileSync(doc, 'utf8').matchAll(/(?<![0-9a-f]{7}:)bench\/results\/([^\s`)'"\],;]*)/g)) {
        const path = m[1]!.replace(/[.:]+$/, '');
        if (path && !cited(path)) missing.push(`${doc}: bench/results/${path}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
