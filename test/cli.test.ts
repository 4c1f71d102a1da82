import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { planLayout } from '../src/index.js';

const CLI = 'dist/cli.js';
const run = (...args: string[]) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });

describe('nn-arena plan', () => {
  it('is built (npm install runs tsup)', () => expect(existsSync(CLI)).toBe(true));

  it('prints the region table and totals by kind', () => {
    const r = run('plan', '--layers', '784,128,10', '--batch', '100');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^w\s+406,528/m);
    expect(r.stdout).toMatch(/^z\s+368,800/m);
    expect(r.stdout).toMatch(/^\s+1\s+w\s+366,336\s+401,408\s+100,352$/m);
  });

  it('--json matches planLayout', () => {
    const r = run('plan', '--layers', '784,128,10', '--batch', '100', '--optimizer', 'adam', '--order', 'kind-major', '--json');
    expect(r.status).toBe(0);
    const j = JSON.parse(r.stdout);
    const p = planLayout({ layers: [784, 128, 10], batch: 100, optimizer: 'adam', order: 'kind-major' });
    expect(j.totalBytes).toBe(p.totalBytes);
    expect(j.regions).toEqual(p.regions);
    expect(j.bytesByKind).toEqual(p.bytesByKind());
  });

  it('bad input: one line naming the code, field and value; exit 1', () => {
    const r = run('plan', '--layers', '784,0,10');
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/BAD_LAYERS: layers\[1\].*got 0/);
    const r2 = run('plan', '--layers', '784,x,10');
    expect(r2.status).toBe(1);
    expect(r2.stderr).toContain("'x' is not a number");
  });
});
