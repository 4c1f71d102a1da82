import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

describe('nn-arena train (the npm start job) on the CPU backend', () => {
  it('reaches >= 95% on the 2,000 held-out digits, with one arena and few transfers', () => {
    const r = run('train', '--backend', 'cpu', '--json');
    expect(r.status, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.backend).toBe('cpu');
    expect(j.accuracy).toBeGreaterThanOrEqual(0.95);
    expect(j.epochs).toBe(10);
    expect(j.allocations).toEqual({ host: 1, device: 1 });
    // Up: header at create, the whole arena (init), the training set (x and y rows fill the
    // data regions: one range), the test set's x rows and y rows (resident: evaluated in one
    // run, issue 18 part 5; batch by batch it was z[0] and y per batch, 2 x 40).
    expect(j.transfers.toDevice.transfers).toBe(5);
    // Down: stats 4x per epoch, w+b once (2 layer ranges), stats after testing.
    expect(j.transfers.toHost.transfers).toBe(4 * 10 + 2 + 1);
    expect(r.stderr).toMatch(/epoch 10\/10/);
  });

  it('prints the layout, the backend, test accuracy, wall time and transfer counts', () => {
    const r = run('train', '--backend', 'cpu', '--epochs', '1');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/network 784-128-10/);
    expect(r.stdout).toMatch(/backend cpu/);
    expect(r.stdout).toMatch(/test accuracy \d+\.\d+%/);
    expect(r.stdout).toMatch(/wall time/);
    expect(r.stdout).toMatch(/transfers: to device \d+/);
  });

  it('bad flags fail with a clear message', () => {
    const r = run('train', '--backend', 'cpu', '--layers', '100,10');
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/784 inputs/);
    const r2 = run('train', '--backend', 'tpu');
    expect(r2.status).not.toBe(0);
    expect(r2.stderr).toMatch(/Allowed choices/);
  });
});

describe('nn-arena train --save and nn-arena inspect', () => {
  it('saves a checkpoint that inspect checks and describes', () => {
    const dir = mkdtempSync(join(tmpdir(), 'nn-arena-cli-'));
    const file = join(dir, 'mnist.nna');
    const r = run('train', '--backend', 'cpu', '--epochs', '1', '--save', file);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/saved a checkpoint of \d+ bytes/);
    const i = run('inspect', file, '--json');
    expect(i.status, i.stderr).toBe(0);
    const j = JSON.parse(i.stdout);
    expect(j.steps).toBe(160);
    expect(j.kinds).toContain('w');
    expect(j.spec.layers).toEqual([784, 128, 10]);
    expect(j.totalBytes).toBe(j.arenaBytes);
    const t = run('inspect', file);
    expect(t.stdout).toMatch(/checksum ok/);
    expect(t.stdout).toMatch(/network 784-128-10/);
    writeFileSync(join(dir, 'bad.nna'), 'not a checkpoint at all, just some text that is long enough to have a header........');
    const b = run('inspect', join(dir, 'bad.nna'));
    expect(b.status).toBe(1);
    expect(b.stderr).toMatch(/BAD_CHECKPOINT: .*not an nn-arena checkpoint/);
  });
});
