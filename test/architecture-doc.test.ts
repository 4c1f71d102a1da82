// architecture-doc.test.ts: docs/architecture.md stays true. Every file or folder it names (in
// backticks) exists, and its table of the layers of src/ names every folder there.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { srcLayers } from './support/import-graph.js';

const root = join(__dirname, '..');
const doc = readFileSync(join(root, 'docs/architecture.md'), 'utf8');
const TOP = ['src', 'csrc', 'test', 'scripts', 'bench', 'docs', 'examples', '.ci'];

/** The repository paths a page names in backticks: `src/...`, `csrc/...` and so on, or a path
 *  under src/ written from its folder (`layout/spec.ts`). Package subpaths (`nn-arena/io`) and
 *  build outputs (`build/...`) are not files of the repository. */
export function namedPaths(text: string): string[] {
  const out = new Set<string>();
  for (const m of text.matchAll(/`([A-Za-z0-9_.\-/]+\/[A-Za-z0-9_.\-/]*)`/g)) {
    const p = m[1]!.replace(/\/$/, '');
    const top = p.split('/')[0]!;
    if (TOP.includes(top)) out.add(p);
    else if (existsSync(join(root, 'src', top)) && readdirSync(join(root, 'src')).includes(top)) out.add(`src/${p}`);
  }
  return [...out].sort();
}

describe('docs/architecture.md', () => {
  it('names only files and folders that exist', () => {
    const named = namedPaths(doc);
    expect(named.length).toBeGreaterThan(60); // the reader sees the page's paths
    expect(named.filter((p) => !existsSync(join(root, p)))).toEqual([]);
  });

  it('finds a path that is gone', () => {
    expect(namedPaths('see `src/no-such-file.ts` and `layout/gone.ts`, not `nn-arena/io`')).toEqual(['src/layout/gone.ts', 'src/no-such-file.ts']);
  });

  it('lists every folder of src/ in its table of layers', () => {
    const folders = readdirSync(join(root, 'src'), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort();
    expect([...srcLayers(doc)].sort()).toEqual(folders);
  });
});
