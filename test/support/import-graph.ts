// import-graph.ts: the import graph of a TypeScript source tree, read with a small parser
// (static imports and re-exports, type-only ones included, and dynamic import() of a literal).
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

/** Files under `root` (relative, '/'-separated) -> the files of `root` each imports. */
export function importGraph(root: string): Map<string, string[]> {
  const files: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.(c|m)?ts$/.test(e.name) && !e.name.endsWith('.d.ts')) files.push(p);
    }
  };
  walk(root);
  const rel = (p: string) => relative(root, p).split(sep).join('/');
  const known = new Set(files.map(rel));
  const graph = new Map<string, string[]>();
  for (const f of files) {
    graph.set(
      rel(f),
      importsOf(readFileSync(f, 'utf8'))
        .filter((s) => s.startsWith('.'))
        .map((s) => rel(resolve(dirname(f), s)).replace(/\.(c|m)?js$/, '.$1ts'))
        .filter((t) => known.has(t)),
    );
  }
  return graph;
}

/** Module specifiers of `import ... from`, `export ... from`, `import '...'` and `import('...')`. */
export function importsOf(source: string): string[] {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
  const out: string[] = [];
  const re = /(?:^|[;\s])(?:import|export)\s[^'"`;]*?from\s*['"]([^'"]+)['"]|(?:^|[;\s])import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm;
  for (const m of code.matchAll(re)) out.push((m[1] ?? m[2] ?? m[3])!);
  return out;
}

/** Every elementary cycle found by a depth-first search (each as the files in order, the first
 *  repeated at the end); [] when the graph has none. */
export function importCycles(graph: Map<string, string[]>): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (n: string) => {
    state.set(n, 'open');
    stack.push(n);
    for (const m of graph.get(n) ?? []) {
      if (state.get(m) === 'open') cycles.push([...stack.slice(stack.indexOf(m)), m]);
      else if (!state.has(m)) visit(m);
    }
    stack.pop();
    state.set(n, 'done');
  };
  for (const n of [...graph.keys()].sort()) if (!state.has(n)) visit(n);
  return cycles;
}

/** The folders of src/ in the order of the layers table of docs/architecture.md ("## The layers
 *  of src/"), highest first: the page is the rule, the tests hold the code to it. */
export function srcLayers(doc: string): string[] {
  const at = doc.indexOf('## The layers of src/');
  if (at < 0) return [];
  const section = doc.slice(at, doc.indexOf('\n## ', at + 1) >>> 0 || undefined);
  return [...section.matchAll(/^\| `([a-z-]+)\/` \|/gm)].map((m) => m[1]!);
}

/** Imports from a folder of src/ into a folder at or above it in `layers` (highest first):
 *  "from -> to (file -> file)". Files at the top of src/ (the package's entries) may import any. */
export function upwardImports(graph: Map<string, string[]>, layers: string[]): string[] {
  const rank = (f: string) => (f.includes('/') ? layers.indexOf(f.split('/')[0]!) : -1);
  const out: string[] = [];
  for (const [from, deps] of graph) {
    const a = rank(from);
    if (a < 0) continue;
    for (const to of deps) {
      const b = rank(to);
      if (!to.includes('/') || b > a || from.split('/')[0] === to.split('/')[0]) continue;
      out.push(`${from.split('/')[0]} -> ${to.split('/')[0]} (${from} -> ${to})`);
    }
  }
  return out.sort();
}
