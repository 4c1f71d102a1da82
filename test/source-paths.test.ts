// source-paths.test.ts: a file of the repository that a source file names (in a comment, a
// message or a doc string: "csrc/train/half_copies.h", "src/layout/plan.ts") exists, so that a
// move or a removal cannot leave a comment pointing at nothing.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(__dirname, '..');
const SOURCE = /\.(ts|cjs|mjs|h|cc|cu|cuh)$/;

function files(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(`${dir}/${e.name}`) : SOURCE.test(e.name) ? [`${dir}/${e.name}`] : [],
  );
}

/** Repository paths with an extension named in `text` (globs and placeholders left out). */
export function namedFiles(text: string): string[] {
  const out = new Set<string>();
  for (const m of text.matchAll(
    /(?<![\w./-])((?:csrc|src|docs|scripts|test|bench|examples)\/[\w./-]+\.(?:h|cc|cu|cuh|ts|md|cjs|mjs|py|json))(?![\w*<-]|\.in\b)/g,
  ))
    out.add(m[1]!);
  return [...out];
}

describe('paths named in the sources', () => {
  it('exist', () => {
    const missing: string[] = [];
    for (const f of [...files('src'), ...files('csrc'), ...files('scripts')]) {
      for (const p of namedFiles(readFileSync(join(root, f), 'utf8'))) if (!existsSync(join(root, p))) missing.push(`${f}: ${p}`);
    }
    expect(missing).toEqual([]);
  });

  it('finds a path that is gone', () => {
    expect(namedFiles('// see csrc/train/optimizers.h and src/layout/plan.ts; not csrc/*.h or bench/results/<machine>.json')).toEqual([
      'csrc/train/optimizers.h',
      'src/layout/plan.ts',
    ]);
  });
});
