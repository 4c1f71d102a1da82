// run-examples.mjs (`npm run examples`): runs every file in examples/ as a user would, so the
// README's examples cannot rot: .mjs and .cjs with node; .ts compiled by the TypeScript compiler
// (module ES2022, target ES2022: `using` lowered for Node 20) into examples/.build/, then run.
// Needs dist/ (npm install builds it). Exit status 1 when any fails.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dir = join(root, 'examples');
const only = process.argv.slice(2);
let failed = 0;
for (const file of readdirSync(dir)
  .filter((f) => /\.(mjs|cjs|ts)$/.test(f))
  .sort()) {
  if (only.length && !only.includes(file)) continue;
  let run = join(dir, file);
  if (file.endsWith('.ts')) {
    const ts = (await import('typescript')).default;
    const out = ts.transpileModule(readFileSync(run, 'utf8'), {
      compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022, lib: ['lib.es2023.d.ts', 'lib.esnext.disposable.d.ts'] },
      fileName: file,
    });
    mkdirSync(join(dir, '.build'), { recursive: true });
    run = join(dir, '.build', file.replace(/\.ts$/, '.mjs'));
    writeFileSync(run, out.outputText);
  }
  const started = Date.now();
  const r = spawnSync(process.execPath, [run], { cwd: root, encoding: 'utf8' });
  const ok = r.status === 0;
  if (!ok) failed++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} examples/${file} (${Date.now() - started} ms)`);
  const text = `${r.stdout}${r.stderr}`.trimEnd();
  if (text) console.log(text.replace(/^/gm, '      '));
}
process.exitCode = failed ? 1 : 0;
