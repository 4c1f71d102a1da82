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
    graph.set(rel(f), importsOf(readFileSync(f, 'utf8'))
      .filter((s) => s.startsWith('.'))
      .map((s) => rel(resolve(dirname(f), s)).replace(/\.(c|m)?js$/, '.$1ts'))
      .filter((t) => known.has(t)));
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
